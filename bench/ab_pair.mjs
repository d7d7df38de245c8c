#!/usr/bin/env node
// Two or more edgepack .wasm builds on one bundle by paired per-round ratios of CPU time: many short rounds
// (ROUNDS, default 30, of MS = 100 ms CPU each), the builds' order reversed every other round, after a 2 s
// warm-up each. On a loaded 2-core machine the per-build medians of ab_wasm.mjs drift by 5-15% between
// builds that are the same bytes; ratios taken within one round drift less. Pass the first build twice
// (A B A) to see the noise floor: the third line's ratio.
//
//   ROUNDS=16 MS=60 node --experimental-wasm-relaxed-simd bench/ab_pair.mjs BUNDLE A.wasm B.wasm [A.wasm]
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Session } from '../web/src/index.js';
const [bundle, ...wasms] = process.argv.slice(2);
if (wasms.length < 2) { console.error('usage: ab_pair.mjs BUNDLE A.wasm B.wasm [...]'); process.exit(2); }
const rounds = Number(process.env.ROUNDS || 30), ms = Number(process.env.MS || 100);
const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
const sessions = [];
for (const w of wasms) { const { instance } = await WebAssembly.instantiate(await readFile(w), {}); sessions.push(new Session(instance, plan, manifest, path.basename(w))); }
const feeds = {};
for (const s of manifest.inputs) { const n = s.shape.reduce((a, d) => a * d, 1); feeds[s.name] = { data: s.dtype === 'int64' ? BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 7)) : Float32Array.from({ length: n }, (_, i) => Math.sin(i)), dims: s.shape }; }
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
for (const s of sessions) { const end = performance.now() + 2000; while (performance.now() < end) s.runSync(feeds); }
const per = sessions.map(() => []);
for (let r = 0; r < rounds; r++) {
  const order = r % 2 ? [...sessions.keys()].reverse() : [...sessions.keys()];
  for (const i of order) { const s = sessions[i]; s.runSync(feeds); const t0 = cpu(); let n = 0; do { s.runSync(feeds); n++; } while (cpu() - t0 < ms); per[i].push((cpu() - t0) / n); }
}
wasms.forEach((w, i) => { const rat = per[i].map((x, r) => x / per[0][r]); console.log(`${path.basename(w).padEnd(28)} ${med(per[i]).toFixed(3)} ms  paired ${med(rat).toFixed(3)}  min-ratio ${(Math.min(...per[i]) / Math.min(...per[0])).toFixed(3)}`); });
