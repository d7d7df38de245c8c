#!/usr/bin/env node
// A/B of two (or more) edgepack .wasm builds on one bundle, in one Node process, by CPU time.
//
//   node --experimental-wasm-relaxed-simd ab_wasm.mjs BUNDLE_DIR A.wasm B.wasm [...] [--seconds 2] [--rounds 15] [--profile]
//   node ... ab_wasm.mjs BUNDLE_A::A.wasm BUNDLE_B::B.wasm [...]   (two packagings of one model: same inputs)
//
// On a machine shared with other jobs, wall-clock latency mostly measures the others; the process's own CPU
// time (process.cpuUsage) per run does not, so two builds of the core can be compared to a few percent there.
// Runs are interleaved A B A B ... after a timed warm-up; prints the median ms of CPU per run and B/A.
// --profile: CPU time per kernel node (ep_run_node), medians over the rounds, for the first two builds.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Session } from '../web/src/index.js';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); if (i < 0) return d; const v = Number(args[i + 1]); args.splice(i, 2); return v; };
const seconds = opt('--seconds', 2), rounds = opt('--rounds', 15);
const profile = args.includes('--profile') ? (args.splice(args.indexOf('--profile'), 1), true) : false;
if (args.length < 2) { console.error('usage: ab_wasm.mjs BUNDLE A.wasm B.wasm [...] [--seconds S] [--rounds R] [--profile]'); process.exit(2); }
const pairs = args[0].includes('::') ? args.map((a) => a.split('::')) : args.slice(1).map((w) => [args[0], w]);
const wasms = pairs.map(([b, w]) => (args[0].includes('::') ? `${path.basename(b)}:${path.basename(w)}` : w));
const sessions = [];
let manifest;
for (const [bundle, w] of pairs) {
  manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
  const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
  const { instance } = await WebAssembly.instantiate(await readFile(w), {});
  sessions.push(new Session(instance, plan, manifest, path.basename(w)));
}
const feeds = {};
for (const s of manifest.inputs) {
  const n = s.shape.reduce((a, d) => a * d, 1);
  feeds[s.name] = { data: s.dtype === 'int64' ? BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 7)) : Float32Array.from({ length: n }, (_, i) => Math.sin(i)), dims: s.shape };
}
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
for (const s of sessions) { const end = performance.now() + seconds * 1000; while (performance.now() < end) s.runSync(feeds); }
const per = sessions.map(() => []);
for (let r = 0; r < rounds; r++) {
  sessions.forEach((s, i) => {
    s.runSync(feeds);   // inputs written, caches warm for this build
    const t0 = cpu(); let n = 0;
    do { s.runSync(feeds); n++; } while (cpu() - t0 < 200);
    per[i].push((cpu() - t0) / n);
  });
}
const base = med(per[0]);
wasms.forEach((w, i) => console.log(`${path.basename(w).padEnd(28)} ${med(per[i]).toFixed(3).padStart(10)} ms CPU/run  ${(med(per[i]) / base).toFixed(3)}x of A`));
if (profile) {
  const nodes = sessions[0].ex.ep_num_nodes();
  const times = sessions.slice(0, 2).map(() => Array.from({ length: nodes }, () => []));
  for (let r = 0; r < Math.max(3, rounds >> 2); r++) {
    sessions.slice(0, 2).forEach((s, i) => {
      s.runSync(feeds);
      for (let k = 0; k < nodes; k++) { const t0 = process.cpuUsage(); for (let j = 0; j < 5; j++) s.ex.ep_run_node(k); const d = process.cpuUsage(t0); times[i][k].push((d.user + d.system) / 5000); }
    });
  }
  const rows = [...Array(nodes).keys()].map((k) => [k, med(times[0][k]), times[1] ? med(times[1][k]) : 0]).sort((a, b) => b[1] - a[1]);
  console.log('node      A ms      B ms   B/A');
  for (const [k, a, b] of rows.slice(0, Number(process.env.AB_ROWS || 25))) console.log(`${String(k).padStart(4)} ${a.toFixed(3).padStart(9)} ${b.toFixed(3).padStart(9)} ${(b / a).toFixed(2).padStart(6)}`);
}
