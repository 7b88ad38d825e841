// Corpus workload (Node, with and without --jitless): binary trees, Map
// and string churn.  Output is deterministic.
'use strict';
function tree(d) { return d ? [tree(d - 1), tree(d - 1)] : [null, null]; }
function check(t) { return t[0] === null ? 1 : 1 + check(t[0]) + check(t[1]); }
let h = 0;
const longLived = tree(16);
for (let d = 4; d <= 16; d += 2) {
  let total = 0;
  for (let i = 0; i < 1 << (16 - d + 2); i++) total += check(tree(d));
  console.log(`trees of depth ${d} check ${total}`);
  h = (h * 31 + total) % 1000000007;
}
const maps = [];
for (let i = 0; i < 60; i++) {
  const m = new Map();
  let n = 0;
  for (let k = 0; k < 5000; k++) { const v = new Array(k % 7).fill(k); m.set(String(k * i), v); n += v.length; }
  maps.push(m);
  if (maps.length > 8) maps.shift();
  h = (h * 31 + m.size + n) % 1000000007;
}
let s = '';
for (let i = 0; i < 300000; i++) s += i % 97;
h = (h * 31 + s.length) % 1000000007;
console.log(`long lived ${check(longLived)}`);
console.log(`hash ${h}`);
