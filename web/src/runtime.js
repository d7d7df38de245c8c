// @ts-check
// edgepack web runtime: loads a bundle (manifest.json, model.plan, one .wasm) and runs it.
// Mirror of packager/runtime/wasm.py + packager/bundle.py. No dependencies; Node >= 20 and browsers.

import { Sha256 } from './sha256.js';
import { isNode, node } from './platform.js';
import { DTYPES } from './dtypes.js';
import { chooseInt8Dot } from './int8_dot_choice.js';

/** @typedef {'auto'|'simd'|'scalar'|'relaxed'} Variant */
/** A dim of a manifest shape: a number (fixed), a symbol name (resolved at run time: version-2 plans), or null
 * (an output dim that varies otherwise).
 * @typedef {number|string|null} Dim */
/** @typedef {{name: string, dtype: string, shape: Dim[], tensor: number}} TensorSpec */
/** @typedef {{min: number, max: number|null, example?: number}} DimBound */
/** @typedef {{data: ArrayBufferView, dims: readonly number[]}} Tensor */

export const VARIANTS = Object.freeze({ simd: 'edgepack.wasm', scalar: 'edgepack-scalar.wasm', relaxed: 'edgepack-relaxed.wasm' });
const FORMAT = 'edgepack-bundle';
const FORMAT_VERSION = 1;
/** This runtime's version (web/package.json "version"; a bundle's manifest says which edgepack made it). */
export const VERSION = '0.1.0';
const PLAN_VERSIONS = [1, 2];   // what the core opens (docs/plan-format.md)
const PAGE = 65536;
const PLAN_DYNAMIC = 2;   // plan version whose shapes are resolved at run time
const MAX_DIM = 0x7fffffff;   // the core's dims are int32

/** dtype name (manifest) -> TypedArray constructor that carries it (the plan's dtype table, dtypes.js). */
const ARRAYS = Object.fromEntries(Object.values(DTYPES).map((t) => [t.name, t.array]));

export class EdgepackError extends Error {
  /** @param {string} message @param {number} [status] runtime status code, when the wasm core refused */
  constructor(message, status) {
    super(message);
    this.name = 'EdgepackError';
    if (status !== undefined) this.status = status;
  }
}

// Smallest modules using one SIMD128 op / one relaxed-SIMD op (f32x4.relaxed_madd, what the kernels use).
const SIMD_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11];
const RELAXED_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 19, 1, 17, 0,
  65, 0, 253, 15, 65, 0, 253, 15, 65, 0, 253, 15, 253, 133, 2, 11];

/** What this engine runs: 'relaxed' if it validates relaxed SIMD, else 'simd' if it validates SIMD128, else 'scalar'.
 * @returns {'relaxed'|'simd'|'scalar'} */
export function detectVariant() {
  const ok = (/** @type {number[]} */ b) => { try { return WebAssembly.validate(new Uint8Array(b)); } catch { return false; } };
  return ok(RELAXED_PROBE) ? 'relaxed' : ok(SIMD_PROBE) ? 'simd' : 'scalar';
}

const align = (/** @type {number} */ n, a = 64) => Math.ceil(n / a) * a;

/** Progress of a load: `file` is the file being read, `loaded`/`total` its bytes (total: from manifest.json, else
 * Content-Length, else null); `bytesLoaded`/`bytesTotal` cover the files this load reads after the manifest.
 * @typedef {{file: string, loaded: number, total: number|null, bytesLoaded: number, bytesTotal: number|null}} Progress */

/** @typedef {{update: (b: Uint8Array) => unknown, hex: () => string}} Hasher */

/** An incremental SHA-256: node:crypto in Node (faster), else the JS one (no WebCrypto needed: plain-http pages on
 * a LAN address have no crypto.subtle). @returns {Promise<Hasher>} */
async function hasher() {
  if (isNode) {
    const h = (await node()).createHash('sha256');
    return { update: (b) => h.update(b), hex: () => h.digest('hex') };
  }
  return new Sha256();
}

/** Reads a response body once, chunk by chunk (each given to onChunk: hashing and progress as it streams).
 * `limit` (the size manifest.json lists) stops a server that sends more before it fills memory.
 * @param {Response} r @param {string} what @param {(chunk: Uint8Array) => void} onChunk @param {number|null} limit
 * @returns {Promise<Uint8Array>} */
async function readBody(r, what, onChunk, limit) {
  const tooMany = () => new EdgepackError(`${what}: more than the ${limit} bytes manifest.json lists (tampered or corrupt)`);
  if (!r.body) {
    const b = new Uint8Array(await r.arrayBuffer());
    if (limit !== null && b.length > limit) throw tooMany();
    onChunk(b);
    return b;
  }
  const reader = r.body.getReader();
  // with a known size, one buffer filled in place (no copy at the end); else the chunks, joined once
  let out = limit !== null ? new Uint8Array(limit) : null;
  /** @type {Uint8Array[]} */
  const parts = [];
  let n = 0;
  for (;;) {
    let step;
    try { step = await reader.read(); } catch (e) { throw new EdgepackError(`${what}: download failed (${e})`); }
    if (step.done) break;
    const c = step.value;
    if (limit !== null && n + c.length > limit) { reader.cancel().catch(() => {}); throw tooMany(); }
    if (out) out.set(c, n); else parts.push(c);
    n += c.length;
    onChunk(c);
  }
  if (out) return n === out.length ? out : out.subarray(0, n);
  const all = new Uint8Array(n);
  let at = 0;
  for (const c of parts) { all.set(c, at); at += c.length; }
  return all;
}

/** Where a load reads files from the network: fetch, through the Cache API when asked (a cached file is read
 * without the network; a fetched one is stored once the whole load has checked it).
 * @param {{fetch?: typeof fetch, cache?: string|boolean}} options @param {string[]} notes */
async function httpGetter(options, notes) {
  const f = options.fetch || globalThis.fetch;
  const name = options.cache === true ? 'edgepack' : options.cache || null;
  /** @type {Cache|null} */
  let cache = null;
  if (name) {
    if (typeof globalThis.caches === 'undefined') notes.push('cache: the Cache API is unavailable here (Node, or a page that is not a secure context): files are fetched');
    else {
      try { cache = await globalThis.caches.open(name); } catch (e) { notes.push(`cache: cannot open '${name}' (${e}): files are fetched`); }
    }
  }
  /** @type {[string, Uint8Array, string][]} fetched this load: stored in the cache once the load has checked them */
  const fresh = [];
  return {
    fresh,
    /** @param {URL} url @returns {Promise<Response>} */
    async get(url) {
      const hit = cache ? await cache.match(url.href) : undefined;
      if (hit) return hit;
      let r;
      try { r = await f(url); } catch (e) { throw new EdgepackError(`${url}: fetch failed (${e})`); }
      if (r.status === 403 && url.pathname.startsWith('/@fs/')) {   // Vite's dev server, bundle outside its root
        throw new EdgepackError(`${url}: HTTP 403: Vite's dev server serves no file outside server.fs.allow; add the bundle's ` +
          `folder (${decodeURIComponent(url.pathname.slice(4).replace(/\/[^/]*$/, ''))}) to server.fs.allow in vite.config.js`);
      }
      if (!r.ok) throw new EdgepackError(`${url}: HTTP ${r.status}`);
      return r;
    },
    /** @param {URL} url @param {Uint8Array} bytes @param {Response} r */
    remember(url, bytes, r) {
      if (cache && r.type !== 'opaque' && !r.headers.has('x-edgepack-cached')) fresh.push([url.href, bytes, r.headers.get('content-type') || '']);
    },
    async commit() {
      if (!cache) return;
      for (const [u, b, type] of fresh) {
        // the marker tells a cached response from a network one (the cache holds only files a load checked)
        const headers = { 'content-type': type || 'application/octet-stream', 'content-length': String(b.length), 'x-edgepack-cached': '1' };
        await cache.put(u, new Response(/** @type {BodyInit} */ (/** @type {unknown} */ (b)), { headers })).catch(() => {});
      }
    },
  };
}

/** Reads files of a bundle: a directory path or file: URL in Node, an http(s) URL (or path relative to the page) in
 * browsers, or a map {file name: URL} (what a bundle packaged as an npm package passes: bundlers see each
 * `new URL('./file', import.meta.url)` and ship the file). Each file is read once: `read(name, onChunk, limit)`
 * streams it through onChunk. `list` (Node directories only) gives every file's path relative to the bundle,
 * recursively. `commit` stores what was fetched in the Cache API (when asked) once the load has checked it.
 * @param {string|URL|Record<string, string|URL>} source @param {{fetch?: typeof fetch, cache?: string|boolean}} options
 * @param {string[]} notes
 * @returns {Promise<{read: (name: string, onChunk?: (c: Uint8Array) => void, limit?: number|null) => Promise<Uint8Array>,
 *   list?: () => Promise<string[]>, commit: () => Promise<void>}>} */
async function bundleReader(source, options, notes) {
  const isMap = source && typeof source === 'object' && !(source instanceof URL);
  const s = isMap ? '' : String(source);
  if (!isMap && isNode && !/^(https?|blob|data):/i.test(s)) {
    const dir = s.startsWith('file:') ? new URL(s.endsWith('/') ? s : s + '/') : null;
    const root = dir || `${s.replace(/\/+$/, '')}/`;
    return {
      read: async (name, onChunk, limit = null) => {
        const fs = await node();
        let b;
        try {
          b = await fs.readFile(dir ? new URL(name, dir) : root + name);
        } catch (e) {
          throw new EdgepackError(`${s}: cannot read bundle file ${name} (${/** @type {any} */ (e).code || e})`);
        }
        if (limit !== null && b.length > limit) throw new EdgepackError(`${name}: more than the ${limit} bytes manifest.json lists (tampered or corrupt)`);
        onChunk?.(b);
        return b;
      },
      list: async () => {
        const fs = await node();
        const ents = await fs.readdir(root, { recursive: true, withFileTypes: true });
        return ents.filter((/** @type {any} */ e) => !e.isDirectory()).map((/** @type {any} */ e) => {
          const parent = String(/** @type {any} */ (e).parentPath ?? /** @type {any} */ (e).path);
          const base = dir ? decodeURIComponent(dir.pathname) : String(root);
          const rel = parent.replace(/\\/g, '/').replace(/\/+$/, '') + '/' + e.name;
          const b = base.replace(/\\/g, '/').replace(/\/+$/, '') + '/';
          return rel.startsWith(b) ? rel.slice(b.length) : e.name;
        });
      },
      commit: async () => {},
    };
  }
  const map = isMap ? /** @type {Record<string, string|URL>} */ (source) : null;
  const base = map ? null : new URL(s.endsWith('/') ? s : s + '/', globalThis.location?.href);
  const http = await httpGetter(options, notes);
  /** @param {string} name */
  const urlOf = (name) => {
    if (!map) return new URL(name, /** @type {URL} */ (base));
    if (!Object.hasOwn(map, name)) throw new EdgepackError(`bundle file ${name}: not in the bundle's file map`);
    return new URL(String(map[name]), globalThis.location?.href);
  };
  return {
    read: async (name, onChunk = () => {}, limit = null) => {
      const url = urlOf(name);
      if (isNode && url.protocol === 'file:') {   // a file map in Node: the files are on disk
        const fs = await node();
        let b;
        try { b = await fs.readFile(url); } catch (e) {
          throw new EdgepackError(`${url}: cannot read bundle file (${/** @type {any} */ (e).code || e})`);
        }
        if (limit !== null && b.length > limit) throw new EdgepackError(`${name}: more than the ${limit} bytes manifest.json lists (tampered or corrupt)`);
        onChunk(b);
        return b;
      }
      const r = await http.get(url);
      const bytes = await readBody(r, String(url), onChunk, limit);
      http.remember(url, bytes, r);
      return bytes;
    },
    commit: () => http.commit(),
  };
}

/** @param {string|Uint8Array} key 64 hex chars or 32 bytes @returns {Uint8Array} */
function publicKeyBytes(key) {
  const raw = typeof key === 'string' && /^[0-9a-fA-F]{64}$/.test(key.trim())
    ? Uint8Array.from(key.trim().match(/../g) || [], (h) => parseInt(h, 16)) : key;
  if (!(raw instanceof Uint8Array) || raw.length !== 32) throw new EdgepackError('publicKey must be an Ed25519 public key: 64 hex characters or 32 bytes');
  return raw;
}

/** The Ed25519 key as a WebCrypto key, imported before anything is downloaded: a page without crypto.subtle (plain
 * http from a LAN address) or without Ed25519 learns it at once, not after the plan has downloaded.
 * @param {Uint8Array} key @returns {Promise<CryptoKey>} */
async function importPublicKey(key) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    throw new EdgepackError('publicKey: checking a signature needs WebCrypto (crypto.subtle), which this page does not have ' +
      '(not a secure context: plain http from an address other than localhost); serve it over https, or load without ' +
      'publicKey (every file is still checked against its SHA-256 in manifest.json)');
  }
  try {
    return await subtle.importKey('raw', /** @type {BufferSource} */ (key), { name: 'Ed25519' }, false, ['verify']);
  } catch (e) {
    throw new EdgepackError(`publicKey: this engine cannot check Ed25519 signatures (WebCrypto: ${/** @type {Error} */ (e).message})`);
  }
}

/** Ed25519 signature `sig` of `msg` under `key`. Throws EdgepackError unless it verifies.
 * @param {CryptoKey} key @param {Uint8Array} sig @param {Uint8Array} msg */
async function verifySignature(key, sig, msg) {
  if (sig.length !== 64) throw new EdgepackError('manifest.sig is not a 64-byte Ed25519 signature');
  let ok;
  try {
    ok = await globalThis.crypto.subtle.verify({ name: 'Ed25519' }, key, /** @type {BufferSource} */ (sig), /** @type {BufferSource} */ (msg));
  } catch (e) {
    throw new EdgepackError(`cannot verify the bundle signature here (Ed25519 in WebCrypto: ${/** @type {Error} */ (e).message})`);
  }
  if (!ok) throw new EdgepackError('signature does not verify with the given public key (manifest.json tampered, or signed by another key)');
}

/** "edgepack 0.1.0" -> [0, 1, 0]; null when the manifest does not say. @param {any} createdBy */
const madeBy = (createdBy) => {
  const m = /^edgepack (\d+)\.(\d+)\.(\d+)/.exec(String(createdBy ?? ''));
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
};

/** @param {any} m */
function checkManifest(m) {
  if (!m || typeof m !== 'object' || m.format !== FORMAT) throw new EdgepackError('manifest.json: not an edgepack bundle manifest');
  if (m.target !== 'web') throw new EdgepackError(`manifest.json: bundle was packaged for target '${m.target}', not 'web': package it with --target web`);
  // The format and plan versions are the contract; the packager's version says which runtime reads the bundle.
  const ver = madeBy(m.created_by)?.join('.');
  const hint = ver && ver !== VERSION ? `; it was made by edgepack ${ver}: load it with that runtime (npm install edgepack@${ver}) or package the model again with edgepack ${VERSION}` : '';
  if (m.format_version !== FORMAT_VERSION) {
    throw new EdgepackError(`manifest.json: bundle format ${m.format_version} is not supported by this runtime ` +
      `(edgepack ${VERSION} reads format ${FORMAT_VERSION})${hint}`);
  }
  const pv = m.plan?.version;
  if (pv !== undefined && !PLAN_VERSIONS.includes(pv)) {
    throw new EdgepackError(`model.plan: version ${pv} is not supported by this runtime (edgepack ${VERSION} reads plan ` +
      `versions ${PLAN_VERSIONS.join(' and ')})${hint}`);
  }
  if (!Array.isArray(m.inputs) || !Array.isArray(m.outputs)) throw new EdgepackError('manifest.json: inputs/outputs missing');
  for (const s of [...m.inputs, ...m.outputs]) {
    if (!s || typeof s.name !== 'string' || !Object.hasOwn(ARRAYS, s.dtype) || !Array.isArray(s.shape) || !Number.isInteger(s.tensor) ||
        s.shape.length > 8 || !s.shape.every((/** @type {any} */ d) => d === null || typeof d === 'string' || (Number.isInteger(d) && d >= 0 && d <= MAX_DIM)))
      throw new EdgepackError(`manifest.json: bad input/output entry ${JSON.stringify(s)?.slice(0, 200)}`);
  }
  if (m.files !== undefined && (typeof m.files !== 'object' || m.files === null)) throw new EdgepackError('manifest.json: files is not an object');
  // bounds of the symbolic dims: {name: {min, max}}, max null (or 0) unbounded (packager/api.py writes them)
  const bound = (/** @type {any} */ x) => x === undefined || x === null || (Number.isInteger(x) && x >= 0 && x <= MAX_DIM);
  if (m.dims !== undefined && (typeof m.dims !== 'object' || m.dims === null || Array.isArray(m.dims) ||
      !Object.values(m.dims).every((b) => b && typeof b === 'object' && bound(b.min) && bound(b.max))))
    throw new EdgepackError(`manifest.json: bad dims (bounds of the symbolic dims) ${JSON.stringify(m.dims)?.slice(0, 200)}`);
}

/** ONNX dtype codes a plan tensor carries -> manifest dtype names. */
const PLAN_DTYPES = /** @type {Record<number, string>} */ (Object.fromEntries(Object.entries(DTYPES).map(([c, t]) => [c, t.name])));

/** The plan is the truth: each manifest input/output must be the plan's tensor of that dtype and those dims (a
 * run-time dim, -1 in the plan, where the manifest gives a symbol or null), else run() would reinterpret bytes.
 * Reads the tensor table of a plan the core has opened (so its offsets are valid): docs/plan-format.md.
 * @param {Uint8Array} plan @param {TensorSpec} s @param {string} kind */
function checkAgainstPlan(plan, s, kind) {
  const dv = new DataView(plan.buffer, plan.byteOffset, plan.byteLength);
  const at = dv.getUint32(32, true) + s.tensor * 48;   // header: tensors_off; 48-byte tensor records
  if (at + 48 > plan.length) throw new EdgepackError(`manifest.json: ${kind} '${s.name}' names tensor ${s.tensor}, not in model.plan`);
  const dtype = PLAN_DTYPES[dv.getUint8(at)] ?? `dtype ${dv.getUint8(at)}`;
  const rank = dv.getUint8(at + 2);
  const dims = Array.from({ length: Math.min(rank, 8) }, (_, k) => dv.getInt32(at + 12 + 4 * k, true));
  const said = s.shape.map((d) => (Number.isInteger(d) ? d : -1));
  if (dtype !== s.dtype || said.length !== dims.length || said.some((d, k) => d !== (dims[k] < 0 ? -1 : dims[k]))) {
    throw new EdgepackError(`manifest.json says ${kind} '${s.name}' is ${s.dtype}[${s.shape}], but model.plan holds ` +
      `${dtype}[${dims.map((d) => (d < 0 ? '?' : d))}] (manifest.json does not match model.plan)`);
  }
}

/** Compiled modules by wasm SHA-256: every bundle ships its own copy of the same runtime. */
const modules = new Map();

/** One wasm instance holding one plan and its arena (like packager.runtime.wasm.WasmPlan); with the WebGPU
 * backend, run() goes to the GPU and this instance stays as its fallback. */
export class Session {
  /** @param {WebAssembly.Instance} instance @param {Uint8Array} plan @param {any} manifest @param {string} variant
   * @param {WebAssembly.Memory} [memory] the instance's memory when it imports it (the threaded build)
   * @param {number} [maxBytes] what that memory can grow to */
  constructor(instance, plan, manifest, variant, memory, maxBytes = 2 ** 32) {
    const ex = /** @type {any} */ (instance.exports);
    this.ex = ex;
    /** @type {WebAssembly.Memory} */
    this.memory = memory || ex.memory;
    /** What the memory can grow to (wasm32: 4 GiB; the threaded build's shared memory: its declared maximum). */
    this.maxBytes = maxBytes;
    this.manifest = manifest;
    this.variant = variant;
    /** @type {TensorSpec[]} */
    this.inputs = manifest.inputs;
    /** @type {TensorSpec[]} */
    this.outputs = manifest.outputs;
    if (typeof ex._initialize === 'function') ex._initialize();
    const planPtr = align(ex.ep_heap_base() >>> 0);
    this._reserve(planPtr + plan.length);
    new Uint8Array(this.memory.buffer, planPtr, plan.length).set(plan);
    this._check(ex.ep_open(planPtr, plan.length), 'opening the plan');
    /** Version 2: shapes resolved per run (the arena re-planned when the input dims change).
     * A core built before plan version 2 has no ep_plan_version and reads version 1 only. */
    this.dynamic = typeof ex.ep_plan_version === 'function' && (ex.ep_plan_version() >>> 0) === PLAN_DYNAMIC;
    /** Bounds of the symbolic dims by name (manifest "dims"; empty for a version-1 plan). @type {Readonly<Record<string, DimBound>>} */
    this.dims = Object.freeze({ ...(this.dynamic ? manifest.dims : null) });
    let end = planPtr + plan.length;
    if (this.dynamic) {   // the core's per-shape state after the plan; the arena after it, bound once resolved
      const statePtr = align(end);
      const stateBytes = ex.ep_state_bytes() >>> 0;
      this._reserve(statePtr + stateBytes);
      this._check(ex.ep_set_state(statePtr, stateBytes), 'setting the plan state');
      end = statePtr + stateBytes;
    }
    this.arenaPtr = align(end);
    /** The input dims the arena is resolved and bound for, flattened (null: none yet, or the last resolve failed).
     * @type {number[] | null} */
    this._shapes = null;
    /** Version 2: indices of the value inputs (their values decide shapes: written before resolving). @type {number[]} */
    this._valueInputs = this.dynamic && typeof ex.ep_input_values === 'function'
      ? this.inputs.map((_, i) => i).filter((i) => ex.ep_input_values(i) >>> 0) : [];
    if (!this.dynamic) this._bind();
    this.vec = this._cstr(ex.ep_vec_name() >>> 0);
    if (this.dynamic !== (manifest.plan?.version === PLAN_DYNAMIC) ||
        !this.inputs.every((s) => s.shape.every((d) => Number.isInteger(d) || (this.dynamic && typeof d === 'string'))))
      throw new EdgepackError('manifest.json inputs/outputs do not match model.plan (plan version or symbolic dims)');
    // The plan, not only the manifest, names the graph's inputs/outputs: both must agree (a version-2 plan's
    // sizes are known once resolved: there, the rank).
    const agree = (/** @type {TensorSpec[]} */ specs, /** @type {number} */ n, /** @type {(i: number) => number} */ id) => specs.length === n && specs.every((s, i) => id(i) === s.tensor &&
      (this.dynamic ? this._planRankAgrees(s)
        : (ex.ep_tensor_nbytes(s.tensor) >>> 0) === /** @type {number[]} */ (s.shape).reduce((a, d) => a * d, 1) * ARRAYS[s.dtype].BYTES_PER_ELEMENT));
    if (!agree(this.inputs, ex.ep_num_inputs(), ex.ep_input_id) || !agree(this.outputs, ex.ep_num_outputs(), ex.ep_output_id))
      throw new EdgepackError('manifest.json inputs/outputs do not match model.plan');
    for (const x of this.inputs) checkAgainstPlan(plan, x, 'input');
    for (const x of this.outputs) checkAgainstPlan(plan, x, 'output');
    /** @type {'wasm'|'webgpu'} */
    this.backend = 'wasm';
    // What the core reports it was built with, not what was asked for.
    // int8Dot: the relaxed build's int8 dot form on this engine (set by load: int8_dot_choice.js), null elsewhere
    /** @type {{simd: boolean, relaxed: boolean, threads: number, webgpu: boolean, f16: boolean, int8Dot: 'pair'|'fused'|null}} */
    this.features = { simd: this.vec.startsWith('wasm-simd128'), relaxed: this.vec.includes('relaxed'), threads: 1, webgpu: false, f16: false, int8Dot: null };
    /** @type {string|undefined} the WebGPU adapter, when backend is 'webgpu' */
    this.adapter = undefined;
    /** Why a requested or 'auto' feature was not used (no threaded build, page not isolated, no WebGPU, ...).
     * @type {string[]} */
    this.notes = [];
    /** @type {{run: (feeds: Record<string, Tensor>) => Promise<any>, destroy: () => void} | null} */
    this._gpu = null;
    /** The threaded build's workers, when it runs on them. @type {{terminate: () => unknown} | null} */
    this._threads = null;
    this._destroyed = false;
  }

  /** Grows the memory to hold `end` bytes (a shared memory grows for every worker at once).
   * @param {number} end @param {string} [what] */
  _reserve(end, what = 'the plan') {
    const have = this.memory.buffer.byteLength;
    if (end <= have) return;
    if (end > this.maxBytes)   // the threaded build's shared memory has a fixed maximum (threads.js)
      throw new EdgepackError(`${what} needs ${Math.ceil(end / 2 ** 20)} MiB of WebAssembly memory, above this build's ` +
        `${this.maxBytes / 2 ** 20} MiB maximum`);
    try {
      this.memory.grow(Math.ceil((end - have) / PAGE));
    } catch (e) {   // RangeError: above the memory's maximum (2 GiB for the threaded build) or the engine's
      throw new EdgepackError(`${what} needs ${Math.ceil(end / 2 ** 20)} MiB of WebAssembly memory, more than this engine ` +
        `allows here (${/** @type {Error} */ (e).message})`);
    }
  }

  /** Binds the arena (ep_arena_bytes: this shape's needs for a version-2 plan) at the fixed address after the plan
   * (and state), growing the memory first. The same address every time: the core re-runs no prologue.
   * @param {string} [what] */
  _bind(what) {
    const bytes = this.ex.ep_arena_bytes() >>> 0;
    this._reserve(this.arenaPtr + bytes, what);
    this._check(this.ex.ep_bind(this.arenaPtr, bytes), 'binding the arena');
  }

  /** Resolved dims of tensor `id` (version 2: this shape's, once resolved). @param {number} id @returns {number[]} */
  _dims(id) {
    const rank = this.ex.ep_tensor_dims(id);
    if (rank < 0) throw new EdgepackError(`tensor ${id}: no such tensor in the plan`);
    return Array.from(new Int32Array(this.memory.buffer, this.ex.ep_dims_buffer() >>> 0, rank));
  }

  /** Version 2, at load: an input/output's rank in the manifest is the plan's (its dims are known once resolved;
   * the core refuses input dims its plan does not allow, status 15). @param {TensorSpec} s */
  _planRankAgrees(s) {
    return this.ex.ep_tensor_dims(s.tensor) === s.shape.length;
  }

  /** Version 2: resolves the plan for these input dims (and the value inputs' values, from feeds) and binds an arena
   * of the size they need, unless the dims are the last ones and no input's values decide shapes (then nothing runs:
   * a repeated shape costs one comparison; with value inputs the core compares their values itself).
   * @param {number[][]} shapes @param {Record<string, Tensor>} feeds */
  _setShapes(shapes, feeds) {
    const flat = shapes.flat();
    const last = this._shapes;
    if (!this._valueInputs.length && last && last.length === flat.length && last.every((d, i) => d === flat[i])) return;
    this._shapes = null;   // until resolved and bound: a failure leaves no stale shape behind
    const ex = this.ex;
    let what = shapes.map((d, i) => `'${this.inputs[i].name}' [${d}]`).join(', ');
    shapes.forEach((d, i) => {
      // a fresh view each time: growing the memory detaches the old buffer
      new Int32Array(this.memory.buffer, ex.ep_dims_buffer() >>> 0, d.length).set(d);
      this._check(ex.ep_set_input_shape(i, d.length), `input '${this.inputs[i].name}' of shape [${d}]`);
    });
    for (const i of this._valueInputs) {
      const s = this.inputs[i], d = feeds[s.name].data, n = ex.ep_tensor_nbytes(s.tensor) >>> 0;
      if (d.byteLength !== n) throw new EdgepackError(`input '${s.name}': ${d.byteLength} bytes, the plan expects ${n}`);
      new Uint8Array(this.memory.buffer, ex.ep_input_values(i) >>> 0, n).set(new Uint8Array(d.buffer, d.byteOffset, n));
      what += `, values of '${s.name}' [${Array.from(/** @type {ArrayLike<unknown>} */ (/** @type {unknown} */ (d)), String)}]`;
    }
    this._check(ex.ep_resolve(), `resolving shapes for inputs ${what}`);
    this._bind(`inputs ${what}`);
    this._shapes = flat;
  }

  /** @param {number} ptr */
  _cstr(ptr) {
    // slice(): TextDecoder refuses views of a SharedArrayBuffer (the threaded build's memory).
    const b = new Uint8Array(this.memory.buffer, ptr, Math.min(256, this.memory.buffer.byteLength - ptr)).slice();
    const end = b.indexOf(0);
    return new TextDecoder().decode(b.subarray(0, end < 0 ? b.length : end));
  }

  /** @param {number} status @param {string} what */
  _check(status, what) {
    if (status !== 0) {
      throw new EdgepackError(`edgepack runtime refused ${what}: ${this._cstr(this.ex.ep_status_str(status) >>> 0)} (status ${status})`, status);
    }
  }

  /** Where tensor `id` lives in wasm memory. @param {number} id */
  _span(id) {
    const ptr = this.ex.ep_tensor_data(id) >>> 0;
    const n = this.ex.ep_tensor_nbytes(id) >>> 0;
    if (!ptr) throw new EdgepackError(`tensor ${id}: no data (plan not bound?)`);
    return [ptr, n];
  }

  /** Validates feeds against the manifest: names, TypedArray kind, dims and element count.
   * @param {Record<string, Tensor>} feeds */
  checkFeeds(feeds) {
    if (this._destroyed) throw new EdgepackError('this session was destroyed (session.destroy()): load() the bundle again to run it');
    if (!feeds || typeof feeds !== 'object') throw new EdgepackError('run() takes an object {inputName: {data, dims}}');
    const names = this.inputs.map((s) => s.name);
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    if (unknown.length) throw new EdgepackError(`unknown input(s) ${unknown.map((k) => `'${k}'`).join(', ')}; this model takes ${names.map((k) => `'${k}'`).join(', ')}`);
    const missing = names.filter((k) => !(k in feeds));
    if (missing.length) throw new EdgepackError(`missing input(s) ${missing.map((k) => `'${k}'`).join(', ')}`);
    /** @type {Map<string, [number, string]>} */
    const seen = new Map();
    for (const s of this.inputs) {
      const t = feeds[s.name];
      // an onnxruntime-web Tensor fits ({data, dims, type, location}): its type and where its data lives are checked
      const ort = /** @type {any} */ (t);
      if (typeof ort?.location === 'string' && ort.location !== 'cpu' && ort.location !== 'cpu-pinned')
        throw new EdgepackError(`input '${s.name}': the tensor's data is on '${ort.location}', not the CPU: pass a CPU tensor (onnxruntime-web: new Tensor(type, await t.getData(), t.dims))`);
      if (typeof ort?.type === 'string' && ort.type !== s.dtype)
        throw new EdgepackError(`input '${s.name}': tensor type ${ort.type}, expected ${s.dtype}`);
      const want = ARRAYS[s.dtype].name;
      const data = t?.data;
      const got = ArrayBuffer.isView(data) ? /** @type {any} */ (data)[Symbol.toStringTag] || 'DataView' : typeof data;
      if (got !== want) throw new EdgepackError(`input '${s.name}': data is ${got}, expected ${want} (dtype ${s.dtype})`);
      const dims = t.dims;
      if (!Array.isArray(dims) && !ArrayBuffer.isView(dims)) throw new EdgepackError(`input '${s.name}': dims missing, expected [${s.shape}]`);
      if (!this.dynamic) {
        if (dims.length !== s.shape.length || s.shape.some((d, i) => Number(dims[i]) !== d))
          throw new EdgepackError(`input '${s.name}': shape [${Array.from(dims)}], expected [${s.shape}]`);
      } else {
        this._checkDims(s, Array.from(dims, Number), seen);
      }
      const shape = this.dynamic ? Array.from(dims, Number) : /** @type {number[]} */ (s.shape);
      const n = shape.reduce((a, d) => a * d, 1);
      if (/** @type {any} */ (data).length !== n) throw new EdgepackError(`input '${s.name}': ${/** @type {any} */ (data).length} elements for shape [${shape}], expected ${n}`);
    }
  }

  /** Version 2: fixed dims as in the manifest, symbolic ones within the bundle's bounds (manifest "dims") and one
   * extent per symbol across inputs (like packager/bundle.py check_feeds).
   * @param {TensorSpec} s @param {number[]} dims @param {Map<string, [number, string]>} seen symbol -> (extent, input) */
  _checkDims(s, dims, seen) {
    const shown = s.shape.map((d) => (typeof d === 'string' ? `'${d}'` : d)).join(',');
    if (dims.length !== s.shape.length || s.shape.some((d, k) => typeof d === 'number' && dims[k] !== d))
      throw new EdgepackError(`input '${s.name}': shape [${dims}], expected [${shown}]`);
    const bounds = this.dims;
    s.shape.forEach((d, k) => {
      if (typeof d !== 'string') return;
      const x = dims[k];
      if (!Number.isInteger(x) || x < 0 || x > MAX_DIM) throw new EdgepackError(`input '${s.name}': dimension ${k} ('${d}') is ${x}, not a valid extent`);
      const b = Object.hasOwn(bounds, d) ? bounds[d] : { min: 0, max: null };
      const min = b.min ?? 0, max = b.max || null;   // max null (or 0, as the packager's bounds write it): unbounded
      const above = max !== null && x > max;
      if (x < min || above)
        throw new EdgepackError(`input '${s.name}': dimension ${k} ('${d}') is ${x}, outside this bundle's bounds [${min}..${max ?? ''}]` +
          (above ? ` (at most ${max}: package it with a larger bound)` : ''));
      const had = seen.get(d);
      if (had && had[0] !== x)
        throw new EdgepackError(`input '${s.name}': dimension ${k} ('${d}') is ${x}, but input '${had[1]}' gives '${d}' = ${had[0]}`);
      seen.set(d, [x, s.name]);
    });
  }

  /** Runs the plan synchronously on the wasm core (whatever the backend). @param {Record<string, Tensor>} feeds
   * @returns {Record<string, {data: any, dims: number[], dtype: string}>} */
  runSync(feeds) {
    this.checkFeeds(feeds);
    if (this.dynamic) this._setShapes(this.inputs.map((s) => Array.from(feeds[s.name].dims, Number)), feeds);
    for (const [i, s] of this.inputs.entries()) {
      if (this._valueInputs.includes(i)) continue;   // written before resolving
      const [ptr, n] = this._span(s.tensor);
      const d = feeds[s.name].data;
      if (d.byteLength !== n) throw new EdgepackError(`input '${s.name}': ${d.byteLength} bytes, the plan expects ${n}`);
      new Uint8Array(this.memory.buffer, ptr, n).set(new Uint8Array(d.buffer, d.byteOffset, n));
    }
    this._check(this.ex.ep_run(), 'running the plan');
    /** @type {Record<string, {data: any, dims: number[], dtype: string}>} */
    const out = {};
    for (const s of this.outputs) {
      const [ptr, n] = this._span(s.tensor);
      // A copy into a plain ArrayBuffer (Uint8Array.slice): valid after later runs, never shared memory.
      const dims = this.dynamic ? this._dims(s.tensor) : /** @type {number[]} */ (s.shape.slice());
      out[s.name] = { data: new ARRAYS[s.dtype](new Uint8Array(this.memory.buffer, ptr, n).slice().buffer), dims, dtype: s.dtype };
    }
    return out;
  }

  /** Runs the model on the session's backend. @param {Record<string, Tensor>} feeds */
  async run(feeds) {
    if (!this._gpu) return this.runSync(feeds);
    this.checkFeeds(feeds);
    return this._gpu.run(feeds);
  }

  /** Frees the GPU resources and stops the worker threads; the session is unusable afterwards. */
  destroy() {
    this._destroyed = true;
    this._gpu?.destroy();
    this._gpu = null;
    this._threads?.terminate();
    this._threads = null;
  }

  /** destroy(), as a promise (the name the first threads API used). */
  async close() {
    this.destroy();
  }
}

/** The threaded builds' file names in a bundle by ISA (built and instantiated by threads.js). */
export const THREADED_WASM = Object.freeze({ simd: 'edgepack-threads.wasm', relaxed: 'edgepack-threads-relaxed.wasm' });
const BACKENDS = ['auto', 'wasm', 'webgpu'];

/** Imports an optional part of the runtime (WebGPU backend, threads) lazily: wasm-only users never fetch it.
 * @param {'webgpu'|'threads'} part @returns {Promise<any>} the module, or null when this build lacks it */
async function optionalPart(part) {
  try {
    // Literal specifiers, so that bundlers emit these as lazy chunks (ts-ignore: a build may lack them).
    // @ts-ignore
    return part === 'webgpu' ? await import('./webgpu/index.js') : await import('./threads.js');
  } catch (e) {
    const msg = String(/** @type {any} */ (e)?.message || e);
    if (/Cannot find module|Failed to fetch dynamically imported module|error loading dynamically imported module|ERR_MODULE_NOT_FOUND|Importing a module script failed/i.test(msg)) return null;
    throw e;
  }
}

/** How many threads 'auto' means here: the cores there are, at most 4 (the kernels split rows; beyond that the
 * memory bandwidth of a phone/laptop is the limit). @returns {Promise<number>} */
async function autoThreads() {
  let n = globalThis.navigator?.hardwareConcurrency;
  if (!n && isNode) n = (await node()).cores();
  return Math.max(1, Math.min(4, n || 1));
}

/** Whether a hardware (not a software/fallback) WebGPU adapter exists: what backend 'auto' needs to pick WebGPU.
 * @returns {Promise<boolean>} */
async function hardwareWebGPU() {
  const gpu = /** @type {any} */ (globalThis.navigator)?.gpu;
  if (!gpu) return false;
  try {
    const a = await gpu.requestAdapter();
    if (!a) return false;
    const info = a.info || {};
    const soft = info.isFallbackAdapter ?? a.isFallbackAdapter ?? false;
    return !soft && !/swiftshader|llvmpipe|software/i.test(`${info.vendor} ${info.architecture} ${info.description}`);
  } catch { return false; }
}

/** Compiles a wasm build, reusing the module compiled for the same (checked) SHA-256.
 * @param {Uint8Array} wasm @param {string} name @param {string|null} hash */
async function compileWasm(wasm, name, hash) {
  if (hash && modules.has(hash)) return /** @type {WebAssembly.Module} */ (modules.get(hash));
  let mod;
  try { mod = await WebAssembly.compile(/** @type {BufferSource} */ (wasm)); } catch (e) { throw new EdgepackError(`${name}: not loadable here (${/** @type {Error} */ (e).message})`); }
  if (hash) modules.set(hash, mod);
  return mod;
}

/** Loads a bundle and opens a session on it. Each file is read once (manifest.json, model.plan and the one wasm
 * build that runs), hashed as it streams when verifying.
 * @param {string|URL|Record<string, string|URL>} source bundle directory (Node), URL (browser), or {file name: URL}
 * @param {{variant?: Variant, backend?: 'auto'|'wasm'|'webgpu', threads?: 'auto'|number, verify?: boolean,
 *   fetch?: typeof fetch, publicKey?: string|Uint8Array, onProgress?: (p: Progress) => void, cache?: string|boolean,
 *   int8Dot?: 'auto'|'pair'|'fused'}} [options]
 * backend: 'auto' (default) is WebGPU only where a hardware adapter exists and this build has the WebGPU backend,
 * else wasm; 'webgpu' fails clearly when it cannot run. threads: 'auto' (default) uses the threaded build where the
 * bundle has one and the page is cross-origin isolated (always in Node), single-threaded otherwise (see session.notes).
 * publicKey: the bundle must be signed by this Ed25519 key (manifest.sig over manifest.json's exact bytes), and
 * every file loaded must match its SHA-256; in Node, a file the manifest does not list is refused too.
 * onProgress: called as bytes arrive. cache: a Cache API cache name (true: 'edgepack') to read the bundle from
 * and store it in, so that a later load needs no network. int8Dot: the relaxed build's int8 dot form, 'auto'
 * (default) timing both once on this engine (session.features.int8Dot says which runs; the same results either way).
 * @returns {Promise<Session>} */
export async function load(source, options = {}) {
  const { variant = 'auto', backend = 'auto', threads = 'auto', publicKey, onProgress, int8Dot = 'auto' } = options;
  if (!['auto', 'pair', 'fused'].includes(int8Dot)) throw new EdgepackError(`unknown int8Dot '${int8Dot}' (choose from auto, pair, fused)`);
  if (!BACKENDS.includes(backend)) throw new EdgepackError(`unknown backend '${backend}' (choose from ${BACKENDS.join(', ')})`);
  if (threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= 64))
    throw new EdgepackError(`threads must be 'auto' or an integer from 1 to 64, not ${JSON.stringify(threads)}`);
  if (typeof threads === 'number' && threads > 1 && variant === 'scalar')
    throw new EdgepackError(`threads: ${threads} uses a threaded SIMD build; it cannot be combined with variant 'scalar'`);
  if (variant !== 'auto' && !Object.hasOwn(VARIANTS, variant))
    throw new EdgepackError(`unknown wasm variant '${variant}' (choose from auto, ${Object.keys(VARIANTS).join(', ')})`);
  if (onProgress !== undefined && typeof onProgress !== 'function') throw new EdgepackError('onProgress must be a function');
  const key = publicKey === undefined || publicKey === null ? null : await importPublicKey(publicKeyBytes(publicKey));
  const verify = key ? true : options.verify ?? true;
  /** @type {string[]} */
  const notes = [];
  const { read, list, commit } = await bundleReader(source, options, notes);
  const mbytes = await read('manifest.json');
  if (key) {   // before parsing anything: the signature covers the manifest's bytes
    let sig;
    try { sig = await read('manifest.sig'); } catch { throw new EdgepackError(`${describe(source)}: bundle is not signed (manifest.sig missing) and a public key is required`); }
    await verifySignature(key, sig, mbytes);
  }
  /** @type {any} */
  let manifest;
  try {
    manifest = JSON.parse(new TextDecoder().decode(mbytes));
  } catch (e) {
    throw new EdgepackError(`${describe(source)}/manifest.json: not valid JSON (${/** @type {Error} */ (e).message})`);
  }
  checkManifest(manifest);
  /** @param {string} n */
  const listed = (n) => Object.hasOwn(manifest.files || {}, n);
  if (key) {
    const names = Object.keys(manifest.files || {});
    const bad = names.find((n) => !n || n.startsWith('/') || n.includes('\\') || n.split('/').some((p) => p === '..' || p === '.' || p === ''));
    if (bad !== undefined) throw new EdgepackError(`manifest lists a file outside the bundle: ${bad}`);
    if (list) {   // a Node directory: nothing unlisted, and every listed file there (the JS too) as signed
      const present = await list();
      const ok = new Set([...names, 'manifest.json', 'manifest.sig']);
      const extra = present.filter((n) => !ok.has(n)).sort();
      if (extra.length) throw new EdgepackError(`${describe(source)}: files not covered by the signed manifest: ${extra.slice(0, 5).join(', ')}`);
      // model.plan is checked as it loads; every other file there too, the unused wasm builds included (a local
      // disk read, and the same answer as the Python and edge runtimes give). An absent file the runtime never
      // loads (model.onnx left out of an npm package) cannot run, so it is not required.
      const here = new Set(present);
      for (const n of names) {
        if (!here.has(n) || n === 'model.plan') continue;
        const b = await read(n), h = await hasher();
        h.update(b);
        if (b.length !== manifest.files[n]?.bytes || h.hex() !== manifest.files[n]?.sha256)
          throw new EdgepackError(`bundle file ${n} does not match its SHA-256 in manifest.json (tampered or corrupt)`);
      }
    }
  }

  const best = detectVariant();
  const v = variant === 'auto' ? best : variant;
  const rank = { scalar: 0, simd: 1, relaxed: 2 };
  if (rank[v] > rank[best]) {
    throw new EdgepackError(`this WebAssembly engine does not support the '${v}' variant (best available: '${best}')` +
      (v === 'relaxed' && isNode ? '; Node 20 needs --experimental-wasm-relaxed-simd' : ''));
  }

  // Which one wasm build runs is decided before anything large is read: the threaded build where it can run,
  // else the single-threaded variant (with a note saying why).
  const nThreads = threads === 'auto' ? (variant === 'auto' ? await autoThreads() : 1) : threads;
  let threadedName = null, part = null;
  if (nThreads > 1) {
    // The threaded build of the chosen ISA; a bundle packaged before the relaxed one existed runs SIMD128 threads.
    const name = v === 'relaxed' && listed(THREADED_WASM.relaxed) ? THREADED_WASM.relaxed : THREADED_WASM.simd;
    const why = v === 'scalar' ? 'this engine has no WebAssembly SIMD (the threaded builds need it)'
      : !listed(name) ? `the bundle has no threaded build (${name})`
      : !isNode && !globalThis.crossOriginIsolated ? 'the page is not cross-origin isolated (serve it with COOP/COEP headers): no SharedArrayBuffer'
        : null;
    part = why ? null : await optionalPart('threads');
    if (why || !part) notes.push(`threads: single-threaded, ${why || 'this build of the runtime has no threads.js'}`);
    else threadedName = name;
  }
  const singleName = VARIANTS[/** @type {keyof VARIANTS} */ (v)];

  // Progress over what this load reads after the manifest (sizes from manifest.json).
  const size = (/** @type {string} */ n) => (Number.isSafeInteger(manifest.files?.[n]?.bytes) ? manifest.files[n].bytes : null);
  const planned = ['model.plan', threadedName || singleName].map(size);
  const bytesTotal = planned.every((b) => b !== null) ? /** @type {number[]} */ (planned).reduce((a, b) => a + b, 0) : null;
  let bytesLoaded = 0;

  /** Reads one file once: hashed as it streams (when verifying), reported to onProgress, never past its listed size.
   * @param {string} name */
  async function readChecked(name) {
    const meta = listed(name) ? manifest.files[name] : null;
    if (verify && (!meta || typeof meta.sha256 !== 'string' || !Number.isSafeInteger(meta.bytes) || meta.bytes < 0))
      throw new EdgepackError(`manifest.json does not list ${name} (with its bytes and sha256)`);
    const h = verify ? await hasher() : null;
    let loaded = 0;
    const total = meta && Number.isSafeInteger(meta.bytes) ? meta.bytes : null;
    const bytes = await read(name, (c) => {
      h?.update(c);
      loaded += c.length;
      bytesLoaded += c.length;
      onProgress?.({ file: name, loaded, total, bytesLoaded, bytesTotal });
    }, verify ? meta.bytes : null);
    if (verify && (bytes.length !== meta.bytes || /** @type {Hasher} */ (h).hex() !== meta.sha256))
      throw new EdgepackError(`bundle file ${name} does not match its SHA-256 in manifest.json (tampered or corrupt)`);
    return bytes;
  }

  const plan = await readChecked('model.plan');
  const hashOf = (/** @type {string} */ n) => (verify ? manifest.files[n].sha256 : null);   // cache only checked modules
  let session = null;
  if (threadedName) {
    const mod = await compileWasm(await readChecked(threadedName), threadedName, hashOf(threadedName));   // a tampered build fails here, always
    let t = null;
    try {
      t = await part.instantiateThreaded(mod, { threads: nThreads });
    } catch (e) {   // e.g. no shared memory in this engine: 'auto' falls back, an explicit count fails
      const msg = `threads: cannot start ${nThreads} threads (${/** @type {Error} */ (e).message})`;
      if (threads !== 'auto') throw new EdgepackError(msg);
      notes.push(`${msg}: single-threaded`);
    }
    if (t) {
      try {
        session = new Session(t.instance, plan, manifest, v, t.memory, t.maxBytes);
      } catch (e) { t.terminate(); throw e; }
      session.features.threads = t.threads;
      // the wasm file, like bundle.py's WASM_VARIANTS; features.simd/relaxed say its ISA
      session.variant = threadedName === THREADED_WASM.relaxed ? 'threads-relaxed' : 'threads';
      session._threads = t;
    }
  }
  if (!session) {
    const mod = await compileWasm(await readChecked(singleName), singleName, hashOf(singleName));
    session = new Session(await WebAssembly.instantiate(mod, {}), plan, manifest, v);
  }
  session.features.int8Dot = chooseInt8Dot(session.ex, int8Dot, notes);
  await commit();   // everything read has been checked (and the plan opened): now it may be cached

  // WebGPU: on request (failing clearly), or for 'auto' where a hardware adapter exists. A version-2 plan (shapes
  // resolved at run time) runs on wasm: the WebGPU backend lays out a fixed arena (docs/webgpu.md).
  const dynamicNote = 'webgpu: not used, this bundle resolves its shapes at run time (plan version 2), which the WebGPU backend does not run yet: running on wasm';
  if (backend === 'auto' && session.dynamic) {
    if (/** @type {any} */ (globalThis.navigator)?.gpu) notes.push(dynamicNote);
  } else if (backend === 'webgpu' || (backend === 'auto' && await hardwareWebGPU())) {
    const part = await optionalPart('webgpu');
    const why = !part ? 'this build of the runtime has no WebGPU backend (webgpu/index.js)'
      : !(await part.webgpuAvailable()) ? 'WebGPU is not available here (no navigator.gpu or no adapter)' : null;
    if (why && backend === 'webgpu') { session.destroy(); throw new EdgepackError(`backend 'webgpu': ${why}`); }
    if (why) notes.push(`webgpu: not used, ${why}`);
    else if (session.dynamic) {
      // Like onnxruntime-web, where what the WebGPU provider cannot run goes to the wasm one: the session runs,
      // on wasm; asked for explicitly, it warns (session.backend and session.notes say it too).
      notes.push(dynamicNote);
      console.warn(`edgepack: backend 'webgpu': ${dynamicNote.slice('webgpu: not used, '.length)}`);
    } else {
      try {
        const gpu = await part.createWebGPUBackend({ plan, manifest, wasm: session });
        session._gpu = gpu;
        session.backend = 'webgpu';
        session.features.webgpu = true;
        session.features.f16 = !!gpu.features?.f16;
        session.adapter = gpu.features?.adapter;
      } catch (e) {
        if (backend === 'webgpu') { session.destroy(); throw e instanceof EdgepackError ? e : new EdgepackError(`backend 'webgpu': ${/** @type {Error} */ (e).message}`); }
        notes.push(`webgpu: not used, ${/** @type {Error} */ (e).message}`);
      }
    }
  }
  session.notes.push(...notes);
  return session;
}

/** @param {string|URL|Record<string, string|URL>} source */
function describe(source) {
  return source && typeof source === 'object' && !(source instanceof URL) ? String(source['manifest.json'] || 'bundle').replace(/\/manifest\.json$/, '') : String(source);
}
