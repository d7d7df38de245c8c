// Threaded instantiation of edgepack-threads.wasm: one shared WebAssembly.Memory, the calling thread's
// instance (which runs the plan, exactly like the single-threaded module) and one instance per worker
// (browser Worker or Node worker_threads), each parked in the core's ep_worker_main loop, where it polls between
// the jobs of a run and sleeps in memory.atomic.wait32 between runs (wasm_kernels/src/parallel.c).
// Browsers need crossOriginIsolated (COOP + COEP headers) for SharedArrayBuffer; Node always has it.

import { isNode, node } from './platform.js';

// Must match wasm_kernels/Makefile THREADS_MEMORY_INITIAL / THREADS_MEMORY_MAX (bytes / 64 KiB).
const INITIAL_PAGES = 64;
const MAX_PAGES = 32768;
export const MAX_THREADS = 16;   // EP_MAX_THREADS in wasm_kernels/src/ep_parallel.h
/** The shared memory's maximum: a version-2 plan's shape needing more is refused (runtime.js). */
export const MAX_MEMORY_BYTES = MAX_PAGES * 65536;

// The worker's whole program (Node: CommonJS eval worker; browsers: classic Worker from a Blob URL).
const WORKER_SOURCE = `
const node = typeof process !== 'undefined' && !!(process.versions && process.versions.node);
const port = node ? require('node:worker_threads').parentPort : self;
const onMessage = (f) => (node ? port.on('message', f) : (self.onmessage = (e) => f(e.data)));
onMessage((m) => {
  try {
    const ex = new WebAssembly.Instance(m.module, { env: { memory: m.memory } }).exports;
    ex.__stack_pointer.value = ex.ep_worker_stack_top(m.index);   // its own stack, not the caller's
    port.postMessage({ ready: m.index });
    ex.ep_worker_main(m.index);
    port.postMessage({ exited: m.index });
  } catch (e) {
    port.postMessage({ error: String((e && e.message) || e) });
  }
});`;

/** Whether this engine can run the threaded build: shared memory (crossOriginIsolated in browsers) + atomics.
 * @returns {boolean} */
export function threadsSupported() {
  if (typeof SharedArrayBuffer === 'undefined') return false;
  if (!isNode && globalThis.crossOriginIsolated === false) return false;
  try {
    const m = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    return m.buffer instanceof SharedArrayBuffer;
  } catch {
    return false;
  }
}

/** Default thread count: the machine's cores (at most MAX_THREADS). @returns {Promise<number>} */
export async function defaultThreads() {
  let n = globalThis.navigator?.hardwareConcurrency;
  if (!n && isNode) n = (await node()).cores();
  return Math.max(1, Math.min(MAX_THREADS, n || 1));
}

/** A worker speaking {post, on, terminate} over Node's worker_threads or the browser's Worker. */
async function spawnWorker() {
  if (isNode) {
    const { Worker } = await node();
    const w = new Worker(WORKER_SOURCE, { eval: true });
    return { post: (/** @type {any} */ m) => w.postMessage(m), on: (/** @type {(m: any) => void} */ f) => w.on('message', f),
      onError: (/** @type {(e: any) => void} */ f) => w.on('error', f), unref: () => w.unref(), terminate: () => w.terminate() };
  }
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: 'text/javascript' }));
  const w = new Worker(url);
  URL.revokeObjectURL(url);
  return { post: (/** @type {any} */ m) => w.postMessage(m), on: (/** @type {(m: any) => void} */ f) => w.addEventListener('message', (e) => f(e.data)),
    onError: (/** @type {(e: any) => void} */ f) => w.addEventListener('error', (e) => f(e.message || e)), unref: () => {}, terminate: () => w.terminate() };
}

/**
 * Instantiates edgepack-threads.wasm with `threads` threads in all (the caller + threads - 1 workers).
 * The instance exports the same core API as the single-threaded modules (plus `memory`), so a Session can
 * run on it; kernels split their work across the workers while the caller runs the plan.
 * @param {WebAssembly.Module} wasmModule compiled edgepack-threads.wasm
 * @param {{threads?: number, spin?: boolean}} [options] threads: 1..16 (default: the machine's cores); spin: the
 *   workers spin for the whole of each run instead of sleeping when no task comes for a few hundred microseconds
 *   (no wake-up in a long serial stretch, but a core kept busy: slower on a loaded machine; default false)
 * @returns {Promise<{instance: WebAssembly.Instance, memory: WebAssembly.Memory, maxBytes: number, threads: number, terminate: () => Promise<void>}>}
 */
export async function instantiateThreaded(wasmModule, options = {}) {
  if (!threadsSupported()) {
    throw new Error('threads need SharedArrayBuffer and shared WebAssembly memory (in browsers: a crossOriginIsolated page, i.e. COOP/COEP headers)');
  }
  const threads = options.threads ?? (await defaultThreads());
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) throw new Error(`threads must be an integer in 1..${MAX_THREADS}, got ${threads}`);
  const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: MAX_PAGES, shared: true });
  const instance = await WebAssembly.instantiate(wasmModule, { env: { memory } });
  const ex = /** @type {any} */ (instance.exports);
  const workers = [];
  const exited = [];
  try {
    for (let i = 1; i < threads; i++) {
      const w = await spawnWorker();
      workers.push(w);
      await new Promise((resolve, reject) => {
        w.onError((e) => reject(new Error(`worker ${i}: ${e}`)));
        w.on((m) => {
          if (m.ready === i) resolve(undefined);
          else if (m.error) reject(new Error(`worker ${i}: ${m.error}`));
        });
        w.post({ module: wasmModule, memory, index: i });
      });
      exited.push(new Promise((resolve) => w.on((m) => { if (m.exited === i) resolve(undefined); })));
      w.unref();   // once parked (and after its last listener, which refs it again): must not keep Node alive
    }
  } catch (e) {
    ex.ep_threads_stop();
    for (const w of workers) w.terminate();
    throw e;
  }
  // A worker counts once it is in ep_worker_main: tasks it has not started are run by the caller anyway.
  ex.ep_set_threads(threads);
  if (options.spin) ex.ep_set_spin(1);   // the core starts with spin off
  let stopped = false;
  // Node joins its workers at exit, and a worker asleep in memory.atomic.wait32 would never return:
  // release them first when the session was not terminated.
  const atExit = () => ex.ep_threads_stop();
  if (isNode) process.once('exit', atExit);
  return {
    instance, memory, threads, maxBytes: MAX_MEMORY_BYTES,
    async terminate() {
      if (stopped) return;
      stopped = true;
      if (isNode) process.off('exit', atExit);
      ex.ep_threads_stop();
      await Promise.race([Promise.all(exited), new Promise((r) => setTimeout(r, 1000))]);
      for (const w of workers) await w.terminate();
    },
  };
}
