#!/usr/bin/env node
// Two or more edgepack .wasm builds on one bundle by paired per-round ratios of CPU time: many short rounds
// (ROUNDS, default 30, of MS = 100 ms CPU each), the builds' order reversed every other round, after a 2 s
// warm-up each. On a loaded 2-core machine the per-build medians of ab_wasm.mjs drift by 5-15% between
// builds that are the same bytes; ratios taken within one round drift less. Pass the first build twice
// (A B A) to see the noise floor: the third line's ratio. A threaded build (edgepack-threads*.wasm: it imports its
// memory) runs with THREADS (default 2) threads, its workers spinning through each run when its name ends in +spin
// (threads.js `spin`; the same file as X.wasm and X.wasm+spin compares the two); then every build is timed by wall
// time (CPU time sums the threads). Each threaded build has a pool of its own, and where the scheduler puts its worker
// (beside the caller or on the other core) can differ between pools of one process and last for seconds
// (docs/benchmarks.md, "Session 17 (helper thr5)"): pass the same build twice, run several processes, swap the order.
//
//   ROUNDS=16 MS=60 node --experimental-wasm-relaxed-simd bench/ab_pair.mjs BUNDLE A.wasm B.wasm [A.wasm]
//   ... bench/ab_pair.mjs BUNDLE_A::A.wasm BUNDLE_B::B.wasm [BUNDLE_A::A.wasm]   (two packagings of one model, e.g.
//       its static plan and its version-2 plan: the first bundle's input shapes, a run-time dim at its example)
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Session } from '../web/src/index.js';
import { instantiateThreaded } from '../web/src/threads.js';
import { seededFeeds } from './profile_core.mjs';
const args = process.argv.slice(2);
const pairs = args[0]?.includes('::') ? args.map((a) => a.split('::')) : args.slice(1).map((w) => [args[0], w]);
if (pairs.length < 2) { console.error('usage: ab_pair.mjs BUNDLE A.wasm B.wasm [...] | BUNDLE_A::A.wasm BUNDLE_B::B.wasm [...]'); process.exit(2); }
const wasms = pairs.map(([b, w]) => (args[0].includes('::') ? `${path.basename(b)}:${path.basename(w)}` : w));
const rounds = Number(process.env.ROUNDS || 30), ms = Number(process.env.MS || 100);
const sessions = [], pools = [];
let first;
for (const [bundle, w] of pairs) {
  const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
  first ??= manifest;
  const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
  const mod = await WebAssembly.compile(await readFile(w.replace(/\+spin$/, '')));
  if (WebAssembly.Module.imports(mod).some((i) => i.kind === 'memory')) {
    const t = await instantiateThreaded(mod, { threads: Number(process.env.THREADS || 2), spin: w.endsWith('+spin') });
    pools.push(t);
    sessions.push(new Session(t.instance, plan, manifest, path.basename(w), t.memory, t.maxBytes));
  } else sessions.push(new Session(await WebAssembly.instantiate(mod, {}), plan, manifest, path.basename(w)));
}
const feeds = seededFeeds(first);
const cpu = pools.length ? () => performance.now() : () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
for (const s of sessions) { const end = performance.now() + 2000; while (performance.now() < end) s.runSync(feeds); }
const per = sessions.map(() => []);
for (let r = 0; r < rounds; r++) {
  const order = r % 2 ? [...sessions.keys()].reverse() : [...sessions.keys()];
  for (const i of order) { const s = sessions[i]; s.runSync(feeds); const t0 = cpu(); let n = 0; do { s.runSync(feeds); n++; } while (cpu() - t0 < ms); per[i].push((cpu() - t0) / n); }
}
wasms.forEach((w, i) => { const rat = per[i].map((x, r) => x / per[0][r]); console.log(`${path.basename(w).padEnd(28)} ${med(per[i]).toFixed(3)} ms  paired ${med(rat).toFixed(3)}  min-ratio ${(Math.min(...per[i]) / Math.min(...per[0])).toFixed(3)}`); });
for (const t of pools) await t.terminate();
