'use strict';
// Real-client test: a JIT-heavy node script.
// Generates many distinct functions with new Function (each gets its own
// bytecode, then Sparkplug/Maglev/TurboFan code as it gets hot), runs each
// in a hot loop, forces some deoptimisations by changing argument types,
// and prints checksums.  V8 writes machine code into its code space and
// flips page permissions around it, so this exercises mprotect/mmap/madvise
// from a JIT.  Output is deterministic.

const NFUNCS = Number(process.argv[2] || 1500);
const ITERS = Number(process.argv[3] || 4000);

function mix(h, x) {
  h = (h ^ (x >>> 0)) >>> 0;
  return Math.imul(h, 16777619) >>> 0;
}

// Build a distinct function body from a small grammar.
function makeSource(i) {
  const ops = ['+', '-', '^', '|', '&', '*'];
  const a = ops[i % ops.length];
  const b = ops[(i >> 2) % ops.length];
  const c = (i * 7919) % 97 + 1;
  const d = (i * 104729) % 31 + 1;
  let body = `let acc = ${i} | 0;\n`;
  body += `for (let k = 0; k < n; k++) {\n`;
  body += `  let t = (k ${a} ${c}) | 0;\n`;
  if (i % 3 === 0) body += `  t = (t ${b} (k >>> ${i % 5 + 1})) | 0;\n`;
  if (i % 4 === 1) body += `  if ((t & ${d}) === 0) acc = (acc + arr[k & 63]) | 0;\n`;
  if (i % 5 === 2) body += `  acc = Math.imul(acc, ${d * 2 + 1}) | 0;\n`;
  if (i % 7 === 3) body += `  t = (t + s.charCodeAt(k % s.length)) | 0;\n`;
  if (i % 11 === 4) body += `  acc = (acc + ((o.x * t) | 0) + o.y) | 0;\n`;
  body += `  acc = (acc ${b} t) | 0;\n`;
  body += `}\nreturn acc >>> 0;`;
  return body;
}

const arr = new Int32Array(64);
for (let i = 0; i < 64; i++) arr[i] = (i * 2654435761) | 0;
const strs = ['alpha', 'bravo-charlie', 'delta', 'echo-foxtrot-golf'];

let h = 2166136261;
const funcs = [];
for (let i = 0; i < NFUNCS; i++) {
  funcs.push(new Function('n', 'arr', 's', 'o', makeSource(i)));
}

// Hot loops: each function is called enough times to be optimised.
for (let round = 0; round < 3; round++) {
  for (let i = 0; i < NFUNCS; i++) {
    const f = funcs[i];
    const o = { x: i & 15, y: round };
    let r = 0;
    for (let j = 0; j < 12; j++) r = mix(r, f(ITERS >> (round + 1), arr, strs[(i + j) & 3], o));
    h = mix(h, r);
  }
}

// Deoptimise some of them with a different object shape / argument type.
for (let i = 0; i < NFUNCS; i += 7) {
  const o = { y: 1, x: 2.5, z: 'shape-change' };
  h = mix(h, funcs[i](200, arr, 'x' + i, o));
}

// Closures and polymorphic call sites.
class Shape { area() { return 0; } }
class Sq extends Shape { constructor(s) { super(); this.s = s; } area() { return this.s * this.s; } }
class Rect extends Shape { constructor(w, hh) { super(); this.w = w; this.h = hh; } area() { return this.w * this.h; } }
class Tri extends Shape { constructor(b, hh) { super(); this.b = b; this.h = hh; } area() { return (this.b * this.h) >> 1; } }
const shapes = [];
for (let i = 0; i < 3000; i++) {
  shapes.push(i % 3 === 0 ? new Sq(i & 31) : i % 3 === 1 ? new Rect(i & 15, i & 7) : new Tri(i & 63, 9));
}
let area = 0;
for (let r = 0; r < 400; r++) for (const s of shapes) area = (area + s.area()) | 0;
h = mix(h, area);

// eval-generated regular expressions and string building.
let text = '';
for (let i = 0; i < 2000; i++) text += strs[i & 3] + (i % 10);
let matches = 0;
for (let i = 0; i < 200; i++) {
  const re = new RegExp(strs[i & 3].slice(-3) + '[0-9]', 'g');
  const m = text.match(re);
  matches += m ? m.length : 0;
}
h = mix(h, matches);

console.log('functions: ' + NFUNCS);
console.log('matches: ' + matches);
console.log('area: ' + area);
console.log('checksum: ' + h.toString(16));
