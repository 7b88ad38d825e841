'use strict';
// Real-client test: a GC-heavy node script (run with --expose-gc).
// Allocates lots of short- and long-lived objects (Maps, arrays, strings,
// typed arrays, large objects), keeps a rotating old generation alive so
// scavenges promote and major mark-compact GCs have real work, and forces
// major GCs with global.gc().  V8's heap grows and shrinks its pages with
// mmap/munmap/madvise/mprotect.  Output is deterministic.

const ROUNDS = Number(process.argv[2] || 80);

function fnv(h, s) {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619) >>> 0;
  return h;
}
function mixn(h, x) { return Math.imul((h ^ (x >>> 0)) >>> 0, 16777619) >>> 0; }

let seed = 12345;
function rnd() { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed >>> 8; }

const forceGC = typeof global.gc === 'function' ? global.gc : () => {};

let h = 2166136261;
const old = [];            // rotating old generation
const OLDSLOTS = 64;

for (let round = 0; round < ROUNDS; round++) {
  // Young garbage: many small objects and strings.
  const m = new Map();
  for (let i = 0; i < 20000; i++) {
    const k = 'k' + round + ':' + (rnd() % 5000);
    const v = { a: i, b: k.length, c: [i, i + 1, i + 2] };
    m.set(k, v);
  }
  let s = 0;
  for (const [k, v] of m) s = (s + v.a + v.b + v.c[2] + k.length) | 0;
  h = mixn(h, s);
  h = mixn(h, m.size);

  // Arrays of doubles and of objects, sorted and filtered.
  const arr = [];
  for (let i = 0; i < 30000; i++) arr.push((rnd() % 100000) / 7);
  arr.sort((x, y) => x - y);
  h = mixn(h, Math.floor(arr[arr.length >> 1] * 1000));
  const objs = arr.filter((x, i) => (i & 3) === 0).map((x) => ({ x, s: x.toFixed(2) }));
  h = fnv(h, objs[objs.length - 1].s);

  // String building and splitting.
  const parts = [];
  for (let i = 0; i < 5000; i++) parts.push(String.fromCharCode(97 + (rnd() % 26)).repeat(1 + (i % 9)));
  const big = parts.join('-');
  const sp = big.split('-');
  h = mixn(h, sp.length);
  h = fnv(h, big.slice(0, 64));

  // Large objects (own pages in large-object space) and typed arrays.
  const bufs = [];
  for (let i = 0; i < 8; i++) {
    const b = new Float64Array(65536 + i * 4096);
    for (let j = 0; j < b.length; j += 97) b[j] = j * 0.5 + round;
    bufs.push(b);
  }
  let t = 0;
  for (const b of bufs) t += b[97 * 100];
  h = mixn(h, t | 0);

  // Keep some of it alive for a while (promoted to old space).
  old[round % OLDSLOTS] = { m, objs, bufs: bufs.slice(0, 2), sp };
  if (round >= 8) old[(round - 8) % OLDSLOTS] = null;

  if (round % 5 === 4) forceGC();
}
forceGC();

let alive = 0;
for (const o of old) if (o) alive += o.m.size + o.objs.length + o.sp.length;

console.log('rounds: ' + ROUNDS);
console.log('alive: ' + alive);
console.log('checksum: ' + h.toString(16));
