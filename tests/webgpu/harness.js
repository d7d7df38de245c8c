// Browser-side driver for tests/test_webgpu.py and bench/webgpu_bench.py: opens a bundle on the wasm core
// and on the WebGPU backend, runs feeds fetched from .bin files, returns outputs as base64.
import { load } from '/web/src/runtime.js';
import { createWebGPUBackend, webgpuAvailable } from '/web/src/webgpu/index.js';

const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

function b64(u8) {
  let s = '';
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  return btoa(s);
}

const encode = (out) => Object.fromEntries(Object.entries(out).map(([k, t]) => [k, {
  dims: t.dims, dtype: t.dtype, b64: b64(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength)) }]));

let session = null, backend = null;

window.ep = {
  available: () => webgpuAvailable(),
  /** Opens bundle (URL path) on wasm + WebGPU. opts: createWebGPUBackend options; planUrl: hand the
   * backend these plan bytes instead of the bundle's (hostile-plan tests). Errors are returned. */
  async open(bundle, opts = {}, planUrl = null) {
    if (backend) backend.destroy();
    backend = null;
    try {
      session = await load(bundle);
      const [plan, manifest] = await Promise.all([bytes(planUrl || `${bundle}/model.plan`), bytes(`${bundle}/manifest.json`)]);
      const t0 = performance.now();
      backend = await createWebGPUBackend({ plan, manifest: JSON.parse(new TextDecoder().decode(manifest)), wasm: session, ...opts });
      return { features: backend.features, placement: backend.placement, memory: backend.memory, load_ms: performance.now() - t0 };
    } catch (e) {
      return { error: String(e.message || e), name: e.name };
    }
  },
  /** feeds: {name: url of a .bin}; returns GPU outputs (and wasm outputs when withWasm). */
  async run(feeds, withWasm = false) {
    const f = {};
    for (const s of session.inputs) {
      const b = await bytes(feeds[s.name]);
      f[s.name] = { data: new ARRAYS[s.dtype](b.buffer), dims: s.shape };
    }
    try {
      const res = { gpu: encode(await backend.run(f)) };
      if (withWasm) res.wasm = encode(await session.run(f));
      return res;
    } catch (e) {
      return { error: String(e.message || e), name: e.name };
    }
  },
  /** Several runs started at once (they must queue, each with its own answer). */
  async runConcurrent(feedsList) {
    const all = [];
    for (const feeds of feedsList) {
      const f = {};
      for (const s of session.inputs) f[s.name] = { data: new ARRAYS[s.dtype]((await bytes(feeds[s.name])).buffer), dims: s.shape };
      all.push(f);
    }
    return (await Promise.all(all.map((f) => backend.run(f)))).map(encode);
  },
  /** Per-node times of one run (the GPU drained after each node). */
  async profile(feeds) {
    const f = {};
    for (const s of session.inputs) {
      const b = await bytes(feeds[s.name]);
      f[s.name] = { data: new ARRAYS[s.dtype](b.buffer), dims: s.shape };
    }
    await backend.run(f);
    return backend.profile(f);
  },
  /** Latency: warm-up by time, then rounds alternating GPU and wasm runs; medians in ms. */
  async bench(feeds, warmupMs = 3000, rounds = 5) {
    const f = {};
    for (const s of session.inputs) {
      const b = await bytes(feeds[s.name]);
      f[s.name] = { data: new ARRAYS[s.dtype](b.buffer), dims: s.shape };
    }
    const end = performance.now() + warmupMs;
    while (performance.now() < end) { await backend.run(f); await session.run(f); }
    const g = [], w = [];
    for (let i = 0; i < rounds; i++) {
      let t = performance.now(); await backend.run(f); g.push(performance.now() - t);
      t = performance.now(); await session.run(f); w.push(performance.now() - t);
    }
    const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
    return { gpu_ms: med(g), wasm_ms: med(w), wasm_variant: session.variant };
  },
  destroy() { backend.destroy(); },   // keeps the object: later runs must fail cleanly
  close() { if (backend) backend.destroy(); backend = null; },
};
window.epReady = true;
