// Per-node serial profile of a bundle (the node side of bench/serial_profile.py):
//   node serial_profile.mjs BUNDLE [--threads 2] [--rounds 9] [--variant simd]  -> JSON on stdout
// For every node: its median time alone (ep_run_node after a whole run, so its inputs are real) in the single-threaded
// build of --variant, and how many tasks it handed to the thread pool in the threaded build with --threads threads
// (the sum of ep_thread_tasks over all threads grows only for jobs split across threads: a node that hands out none
// runs on one thread whatever the thread count). Deterministic: the count does not depend on the load.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { load } from '../web/src/index.js';
import { seededFeeds } from './profile_core.mjs';

const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i < 0 ? d : args[i + 1]; };
const bundle = args[0];
const threads = Number(opt('--threads', 2)), rounds = Number(opt('--rounds', 9)), variant = opt('--variant', 'simd');
const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const feeds = seededFeeds(manifest);
const med = (xs) => { const q = [...xs].sort((a, b) => a - b); return q[q.length >> 1]; };

const one = await load(bundle, { backend: 'wasm', threads: 1, variant });
for (let end = performance.now() + 1500; performance.now() < end;) await one.run(feeds);   // V8 tiers wasm up late
const n = one.ex.ep_num_nodes();
const per = Array.from({ length: n }, () => []);
for (let r = 0; r < rounds; r++) {
  await one.run(feeds);
  per.forEach((t, k) => { const t0 = performance.now(); one.ex.ep_run_node(k); t.push(performance.now() - t0); });
}
one.destroy();

const many = await load(bundle, { backend: 'wasm', threads, variant });
if (many.features.threads !== threads) throw new Error(`no ${threads}-thread session: ${many.notes.join('; ')}`);
await many.run(feeds);
const pooled = () => { let s = 0; for (let i = 0; i < threads; i++) s += many.ex.ep_thread_tasks(i) >>> 0; return s; };
const tasks = [];
for (let k = 0; k < n; k++) { const t0 = pooled(); many.ex.ep_run_node(k); tasks.push(pooled() - t0); }
many.destroy();
console.log(JSON.stringify({ threads, variant: one.variant, threaded_variant: many.variant, ms: per.map(med), tasks }));
