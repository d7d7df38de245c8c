#!/usr/bin/env node
// What the threaded build's workers do during back-to-back runs of one bundle: per chunk of MS (default 300) ms,
// the time per run, tasks per run taken by the caller and by worker 1 (ep_thread_tasks), and per OS thread of this
// process (Linux /proc: schedstat, status) the CPU it last ran on, its run and run-queue wait time, and its
// voluntary (sleeps) and involuntary (preempted) context switches per run. A build with -DEP_POOL_STATS adds the
// pool's counters per run: jobs, jobs worker 1 took a task of, notifies (a worker slept at publish), worker sleeps,
// late arrivals (a worker found no task left), in-run polls that ran out (RUN_SPINS) (wasm_kernels/src/parallel.c).
//
//   THREADS=2 CHUNKS=10 node --experimental-wasm-relaxed-simd bench/pool_stats.mjs BUNDLE edgepack-threads-relaxed.wasm[+spin]
//   counters: make -C wasm_kernels -B build/edgepack-threads-relaxed.wasm CWARN='-Wall -DEP_POOL_STATS' (then rebuild)
import { readFile, readdir } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Session } from '../web/src/index.js';
import { instantiateThreaded } from '../web/src/threads.js';
import { seededFeeds } from './profile_core.mjs';

const [bundle, wasm] = process.argv.slice(2);
if (!wasm) { console.error('usage: pool_stats.mjs BUNDLE edgepack-threads*.wasm[+spin]'); process.exit(2); }
const manifest = JSON.parse(await readFile(path.join(bundle, 'manifest.json'), 'utf8'));
const plan = new Uint8Array(await readFile(path.join(bundle, 'model.plan')));
const mod = await WebAssembly.compile(await readFile(wasm.replace(/\+spin$/, '')));
const pool = await instantiateThreaded(mod, { threads: Number(process.env.THREADS || 2), spin: wasm.endsWith('+spin') });
const s = new Session(pool.instance, plan, manifest, path.basename(wasm), pool.memory, pool.maxBytes);
const ex = /** @type {any} */ (pool.instance.exports);
const feeds = seededFeeds(manifest);
const COUNTERS = ['jobs', 'joined', 'notifies', 'sleeps', 'late', 'ran out'];
const counters = () => (ex.ep_pool_stats ? COUNTERS.map((_, k) => ex.ep_pool_stats(k)) : []);

/** Per OS thread: last CPU, run and wait ms (schedstat), voluntary and involuntary switches. */
async function threads() {
  return (await readdir('/proc/self/task')).map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const [run, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
    const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
    const num = (k) => Number(status.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm'))[1]);
    return { tid, cpu: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[36]), run: run / 1e6, wait: wait / 1e6,
      vol: num('voluntary_ctxt_switches'), inv: num('nonvoluntary_ctxt_switches') };
  });
}

const ms = Number(process.env.MS || 300);
for (let end = performance.now() + 2000; performance.now() < end;) s.runSync(feeds);   // V8 tiers wasm up late
for (let c = 0; c < Number(process.env.CHUNKS || 10); c++) {
  const t0s = await threads(), c0 = counters(), k0 = [ex.ep_thread_tasks(0), ex.ep_thread_tasks(1)];
  const t0 = performance.now();
  let n = 0;
  do { s.runSync(feeds); n++; } while (performance.now() - t0 < ms);
  const dt = (performance.now() - t0) / n;
  const c1 = counters(), t1s = await threads();
  const busy = t1s.map((b) => [b, t0s.find((a) => a.tid === b.tid)]).filter(([b, a]) => a && b.run - a.run > ms / 100)
    .map(([b, a]) => `[cpu${b.cpu} run ${(b.run - a.run).toFixed(0)} wait ${(b.wait - a.wait).toFixed(0)} ms, sleeps ${((b.vol - a.vol) / n).toFixed(1)} preempted ${((b.inv - a.inv) / n).toFixed(1)}/run]`);
  const per = c1.map((v, k) => `${COUNTERS[k]} ${((v - c0[k]) / n).toFixed(1)}`).join(' ');
  console.log(`${dt.toFixed(3)} ms/run  tasks/run caller ${((ex.ep_thread_tasks(0) - k0[0]) / n).toFixed(1)} worker ${((ex.ep_thread_tasks(1) - k0[1]) / n).toFixed(1)}` +
    `${per ? `  ${per}` : ''}  ${busy.join(' ')}`);
}
await pool.terminate();
