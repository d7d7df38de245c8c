#!/usr/bin/env node
// CPU time a runtime's threads burn AFTER its runs, while the calling thread sleeps: onnxruntime's intra-op pools
// spin-wait for work after a run (session.intra_op.allow_spinning, on by default), edgepack's workers poll briefly
// (parallel.c SPINS) and sleep. Runs each runtime back to back for --busy seconds, then sleeps and reads this
// process's CPU time over the windows after the last run. CPU time, not wall time: valid on a loaded machine too
// (a spinning thread that gets no core burns less, so a loaded figure is a lower bound).
//
//   node --experimental-wasm-relaxed-simd bench/spin_after_run.mjs MODEL.onnx BUNDLE [--threads 2] [--reps 5] [--busy 0.3]
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { load } from '../web/src/index.js';
import { seededFeeds } from './profile_core.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i < 0 ? d : Number(args[i + 1]); };
const [modelPath, bundle] = args.filter((x, i) => !x.startsWith('--') && !(i > 0 && args[i - 1].startsWith('--')));
if (!modelPath || !bundle) { console.error('usage: spin_after_run.mjs MODEL.onnx BUNDLE [--threads N] [--reps R] [--busy S]'); process.exit(2); }
const threads = opt('--threads', 2), reps = opt('--reps', 5), busy = opt('--busy', 0.3);
const WINDOWS = [1, 5, 20, 100, 400];   // ms after the last run: CPU ms used in [prev, this)

const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const feedsEp = seededFeeds(manifest);
const bytes = new Uint8Array(await readFile(modelPath));
if (bytes[0] === 0x08 && bytes[1] > 10 && bytes[1] < 0x80) bytes[1] = 10;   // onnxruntime 1.30 reads IR <= 10
const ortFeeds = (ort) => Object.fromEntries(Object.entries(feedsEp).map(([k, t]) => [k, new ort.Tensor('float32', t.data, t.dims)]));
const noSpin = { extra: { session: { intra_op: { allow_spinning: '0' } } } };

async function runners() {
  const out = [];
  const ep = await load(bundle, { threads });
  out.push({ name: `edgepack-threads (${threads})`, run: () => ep.run(feedsEp) });
  const web = await import('onnxruntime-web');
  web.env.wasm.numThreads = threads; web.env.wasm.proxy = false; web.env.logLevel = 'error';
  web.env.wasm.wasmPaths = pathToFileURL(path.join(HERE, 'node_modules/onnxruntime-web/dist/')).href;
  for (const spin of [true, false]) {
    const s = await web.InferenceSession.create(bytes, { executionProviders: ['wasm'], graphOptimizationLevel: 'all', ...(spin ? {} : noSpin) });
    const f = ortFeeds(web);
    out.push({ name: `ort-web (${threads})${spin ? '' : ' no spinning'}`, run: () => s.run(f) });
  }
  const node = createRequire(import.meta.url)('onnxruntime-node');
  for (const spin of [true, false]) {
    const s = await node.InferenceSession.create(bytes, { executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
      executionMode: 'sequential', graphOptimizationLevel: 'all', ...(spin ? {} : noSpin) });
    const f = ortFeeds(node);
    out.push({ name: `native (${threads})${spin ? '' : ' no spinning'}`, run: () => s.run(f) });
  }
  return out;
}

const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const med = (xs) => { const q = [...xs].sort((a, b) => a - b); return q[q.length >> 1]; };
const rs = await runners();
console.log(`CPU ms used by the process in the windows after the last run (median of ${reps}), and one run's wall ms`);
console.log('runtime'.padEnd(28) + WINDOWS.map((w, i) => `${i ? WINDOWS[i - 1] : 0}-${w} ms`.padStart(11)).join('') + 'run ms'.padStart(9));
for (const r of rs) {
  const per = WINDOWS.map(() => []), runMs = [];
  for (let k = 0; k < reps; k++) {
    const end = performance.now() + busy * 1000;
    let n = 0;
    const t0 = performance.now();
    do { await r.run(); n++; } while (performance.now() < end);
    const t1 = performance.now();
    runMs.push((t1 - t0) / n);
    let c = cpuMs(), t = t1;
    for (let i = 0; i < WINDOWS.length; i++) {
      // busy-free wait: the event loop sleeps in epoll; the main thread itself burns ~nothing
      await sleep(Math.max(0, t1 + WINDOWS[i] - performance.now()));
      const c2 = cpuMs();
      per[i].push(c2 - c);
      c = c2; t = performance.now();
    }
  }
  console.log(r.name.padEnd(28) + per.map((xs) => med(xs).toFixed(2).padStart(11)).join('') + med(runMs).toFixed(2).padStart(9));
}
process.exit(0);   // onnxruntime-web's pthread workers keep the event loop alive
