// edgepack web runtime: loads a bundle (manifest.json, model.plan, one .wasm) and runs it.
// Mirror of packager/runtime/wasm.py + packager/bundle.py. No dependencies; Node >= 20 and browsers.

/** @typedef {'auto'|'simd'|'scalar'|'relaxed'} Variant */
/** @typedef {{name: string, dtype: string, shape: number[], tensor: number}} TensorSpec */
/** @typedef {{data: ArrayBufferView, dims: readonly number[]}} Tensor */

export const VARIANTS = Object.freeze({ simd: 'edgepack.wasm', scalar: 'edgepack-scalar.wasm', relaxed: 'edgepack-relaxed.wasm' });
/** The threaded build (SIMD128 + atomics, shared memory): used when load() is given `threads`. */
export const THREADS_WASM = 'edgepack-threads.wasm';
const FORMAT = 'edgepack-bundle';
const FORMAT_VERSION = 1;
const PAGE = 65536;

/** dtype name (manifest) -> TypedArray constructor that carries it.
 * @type {Record<string, Float32ArrayConstructor | BigInt64ArrayConstructor | Int32ArrayConstructor | Int8ArrayConstructor | Uint8ArrayConstructor | Uint16ArrayConstructor>} */
const ARRAYS = {
  float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array,
  uint8: Uint8Array, bool: Uint8Array, float16: Uint16Array,
};

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
const isNode = typeof process !== 'undefined' && !!process.versions?.node;

/** Reads files of a bundle: a directory path or file: URL in Node, an http(s) URL (or path relative to the page) in browsers.
 * `list` (Node directories only) gives every file's path relative to the bundle, recursively.
 * @param {string|URL} source @param {typeof fetch} [fetchFn]
 * @returns {{read: (name: string) => Promise<Uint8Array>, list?: () => Promise<string[]>}} */
function bundleReader(source, fetchFn) {
  const s = String(source);
  if (isNode && !/^(https?|blob|data):/i.test(s)) {
    const dir = s.startsWith('file:') ? new URL(s.endsWith('/') ? s : s + '/') : null;
    const root = dir || `${s.replace(/\/+$/, '')}/`;
    return {
      read: async (name) => {
        const fs = await import('node:fs/promises');
        try {
          return new Uint8Array(await fs.readFile(dir ? new URL(name, dir) : root + name));
        } catch (e) {
          throw new EdgepackError(`${s}: cannot read bundle file ${name} (${/** @type {any} */ (e).code || e})`);
        }
      },
      list: async () => {
        const fs = await import('node:fs/promises');
        const ents = await fs.readdir(root, { recursive: true, withFileTypes: true });
        return ents.filter((e) => !e.isDirectory()).map((e) => {
          const parent = String(/** @type {any} */ (e).parentPath ?? /** @type {any} */ (e).path);
          const base = dir ? decodeURIComponent(dir.pathname) : root;
          const rel = parent.replace(/\\/g, '/').replace(/\/+$/, '') + '/' + e.name;
          const b = base.replace(/\\/g, '/').replace(/\/+$/, '') + '/';
          return rel.startsWith(b) ? rel.slice(b.length) : e.name;
        });
      },
    };
  }
  const f = fetchFn || globalThis.fetch;
  const base = new URL(s.endsWith('/') ? s : s + '/', globalThis.location?.href);
  return {
    read: async (name) => {
      const url = new URL(name, base);
      let r;
      try { r = await f(url); } catch (e) { throw new EdgepackError(`${url}: fetch failed (${e})`); }
      if (!r.ok) throw new EdgepackError(`${url}: HTTP ${r.status}`);
      return new Uint8Array(await r.arrayBuffer());
    },
  };
}

/** @param {string|Uint8Array} key 64 hex chars or 32 bytes @returns {Uint8Array} */
function publicKeyBytes(key) {
  const raw = typeof key === 'string' && /^[0-9a-fA-F]{64}$/.test(key.trim())
    ? Uint8Array.from(key.trim().match(/../g) || [], (h) => parseInt(h, 16)) : key;
  if (!(raw instanceof Uint8Array) || raw.length !== 32) throw new EdgepackError('publicKey must be an Ed25519 public key: 64 hex characters or 32 bytes');
  return raw;
}

/** Ed25519 signature `sig` of `msg` under `key` (WebCrypto). Throws EdgepackError unless it verifies.
 * @param {Uint8Array} key @param {Uint8Array} sig @param {Uint8Array} msg */
async function verifySignature(key, sig, msg) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new EdgepackError('WebCrypto (crypto.subtle) is unavailable here (a non-secure http: page?): cannot verify the bundle signature');
  if (sig.length !== 64) throw new EdgepackError('manifest.sig is not a 64-byte Ed25519 signature');
  let ok;
  try {
    const k = await subtle.importKey('raw', /** @type {BufferSource} */ (key), { name: 'Ed25519' }, false, ['verify']);
    ok = await subtle.verify({ name: 'Ed25519' }, k, /** @type {BufferSource} */ (sig), /** @type {BufferSource} */ (msg));
  } catch (e) {
    throw new EdgepackError(`cannot verify the bundle signature here (Ed25519 in WebCrypto: ${/** @type {Error} */ (e).message})`);
  }
  if (!ok) throw new EdgepackError('signature does not verify with the given public key (manifest.json tampered, or signed by another key)');
}

/** @param {Uint8Array} bytes @returns {Promise<string>} lowercase hex SHA-256 */
async function sha256(bytes) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new EdgepackError('WebCrypto (crypto.subtle) is unavailable here (a non-secure http: page?): cannot verify the bundle; serve it over https or pass {verify: false}');
  const d = new Uint8Array(await subtle.digest('SHA-256', /** @type {BufferSource} */ (bytes)));
  return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** @param {any} manifest @param {string} name @param {Uint8Array} bytes */
async function checkFile(manifest, name, bytes) {
  const meta = Object.hasOwn(manifest.files || {}, name) ? manifest.files[name] : undefined;
  if (!meta) throw new EdgepackError(`manifest.json does not list ${name}`);
  if (meta.bytes !== bytes.length || (await sha256(bytes)) !== meta.sha256)
    throw new EdgepackError(`bundle file ${name} does not match its SHA-256 in manifest.json (tampered or corrupt)`);
}

/** @param {any} m */
function checkManifest(m) {
  if (!m || m.format !== FORMAT) throw new EdgepackError('manifest.json: not an edgepack bundle manifest');
  if (m.target !== 'web') throw new EdgepackError(`manifest.json: bundle was packaged for target '${m.target}', not 'web': package it with --target web`);
  if (m.format_version !== FORMAT_VERSION) throw new EdgepackError(`manifest.json: bundle format ${m.format_version} not supported (this runtime reads ${FORMAT_VERSION})`);
  for (const s of [...(m.inputs || []), ...(m.outputs || [])]) {
    if (typeof s.name !== 'string' || !(s.dtype in ARRAYS) || !Array.isArray(s.shape) || !Number.isInteger(s.tensor))
      throw new EdgepackError(`manifest.json: bad input/output entry ${JSON.stringify(s)}`);
  }
}

/** Compiled modules by wasm SHA-256: every bundle ships its own copy of the same runtime. */
const modules = new Map();

/** One wasm instance holding one plan and its arena (like packager.runtime.wasm.WasmPlan). */
export class Session {
  /** @param {WebAssembly.Instance} instance @param {Uint8Array} plan @param {any} manifest @param {string} variant */
  constructor(instance, plan, manifest, variant) {
    const ex = /** @type {any} */ (instance.exports);
    this.ex = ex;
    /** @type {WebAssembly.Memory} */
    this.memory = ex.memory;
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
    const arenaBytes = ex.ep_arena_bytes() >>> 0;
    const arenaPtr = align(planPtr + plan.length);
    this._reserve(arenaPtr + arenaBytes);
    this._check(ex.ep_bind(arenaPtr, arenaBytes), 'binding the arena');
    this.vec = this._cstr(ex.ep_vec_name() >>> 0);
    // The plan, not only the manifest, names the graph's inputs/outputs: both must agree.
    const agree = (/** @type {TensorSpec[]} */ specs, /** @type {number} */ n, /** @type {(i: number) => number} */ id) => specs.length === n && specs.every((s, i) => id(i) === s.tensor &&
      (ex.ep_tensor_nbytes(s.tensor) >>> 0) === s.shape.reduce((a, d) => a * d, 1) * ARRAYS[s.dtype].BYTES_PER_ELEMENT);
    if (!agree(this.inputs, ex.ep_num_inputs(), ex.ep_input_id) || !agree(this.outputs, ex.ep_num_outputs(), ex.ep_output_id))
      throw new EdgepackError('manifest.json inputs/outputs do not match model.plan');
  }

  /** @param {number} end */
  _reserve(end) {
    const have = this.memory.buffer.byteLength;
    if (end > have) this.memory.grow(Math.ceil((end - have) / PAGE));
  }

  /** @param {number} ptr */
  _cstr(ptr) {
    // a copy: TextDecoder refuses views of a shared (threaded) memory
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
    if (!feeds || typeof feeds !== 'object') throw new EdgepackError('run() takes an object {inputName: {data, dims}}');
    const names = this.inputs.map((s) => s.name);
    const unknown = Object.keys(feeds).filter((k) => !names.includes(k));
    if (unknown.length) throw new EdgepackError(`unknown input(s) ${unknown.map((k) => `'${k}'`).join(', ')}; this model takes ${names.map((k) => `'${k}'`).join(', ')}`);
    const missing = names.filter((k) => !(k in feeds));
    if (missing.length) throw new EdgepackError(`missing input(s) ${missing.map((k) => `'${k}'`).join(', ')}`);
    for (const s of this.inputs) {
      const t = feeds[s.name];
      const want = ARRAYS[s.dtype].name;
      const data = t?.data;
      const got = ArrayBuffer.isView(data) ? /** @type {any} */ (data)[Symbol.toStringTag] || 'DataView' : typeof data;
      if (got !== want) throw new EdgepackError(`input '${s.name}': data is ${got}, expected ${want} (dtype ${s.dtype})`);
      const dims = t.dims;
      if (!Array.isArray(dims) && !ArrayBuffer.isView(dims)) throw new EdgepackError(`input '${s.name}': dims missing, expected [${s.shape}]`);
      if (dims.length !== s.shape.length || s.shape.some((d, i) => Number(dims[i]) !== d))
        throw new EdgepackError(`input '${s.name}': shape [${Array.from(dims)}], expected [${s.shape}]`);
      const n = s.shape.reduce((a, d) => a * d, 1);
      if (/** @type {any} */ (data).length !== n) throw new EdgepackError(`input '${s.name}': ${/** @type {any} */ (data).length} elements for shape [${s.shape}], expected ${n}`);
    }
  }

  /** Runs the plan synchronously. @param {Record<string, Tensor>} feeds
   * @returns {Record<string, {data: any, dims: number[], dtype: string}>} */
  runSync(feeds) {
    this.checkFeeds(feeds);
    for (const s of this.inputs) {
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
      out[s.name] = { data: new ARRAYS[s.dtype](new Uint8Array(this.memory.buffer, ptr, n).slice().buffer), dims: s.shape.slice(), dtype: s.dtype };
    }
    return out;
  }

  /** Runs the plan. @param {Record<string, Tensor>} feeds */
  async run(feeds) {
    return this.runSync(feeds);
  }

  /** Stops the worker threads of a threaded session (nothing to do otherwise). */
  async close() {
    await this._threads?.terminate();
  }
}

/** Loads a bundle and opens a session on it.
 * @param {string|URL} source bundle directory (Node) or URL (browser)
 * @param {{variant?: Variant, verify?: boolean, fetch?: typeof fetch, publicKey?: string|Uint8Array, threads?: number}} [options]
 * threads: run edgepack-threads.wasm with this many threads (workers + the caller; needs shared memory).
 * publicKey: the bundle must be signed by this Ed25519 key (manifest.sig over manifest.json's exact bytes), and
 * every file the manifest lists must match its SHA-256; in Node, a file the manifest does not list is refused too.
 * @returns {Promise<Session>} */
export async function load(source, options = {}) {
  const { variant = 'auto', publicKey } = options;
  const key = publicKey === undefined || publicKey === null ? null : publicKeyBytes(publicKey);
  const verify = key ? true : options.verify ?? true;
  const { read, list } = bundleReader(source, options.fetch);
  const mbytes = await read('manifest.json');
  if (key) {   // before parsing anything: the signature covers the manifest's bytes
    let sig;
    try { sig = await read('manifest.sig'); } catch { throw new EdgepackError(`${source}: bundle is not signed (manifest.sig missing) and a public key is required`); }
    await verifySignature(key, sig, mbytes);
  }
  let manifest;
  try {
    manifest = JSON.parse(new TextDecoder().decode(mbytes));
  } catch (e) {
    throw new EdgepackError(`${source}/manifest.json: not valid JSON (${/** @type {Error} */ (e).message})`);
  }
  checkManifest(manifest);
  if (key) {
    const names = Object.keys(manifest.files || {});
    const bad = names.find((n) => !n || n.startsWith('/') || n.includes('\\') || n.split('/').some((p) => p === '..' || p === '.' || p === ''));
    if (bad !== undefined) throw new EdgepackError(`manifest lists a file outside the bundle: ${bad}`);
    if (list) {
      const listed = new Set([...names, 'manifest.json', 'manifest.sig']);
      const extra = (await list()).filter((n) => !listed.has(n)).sort();
      if (extra.length) throw new EdgepackError(`${source}: files not covered by the signed manifest: ${extra.slice(0, 5).join(', ')}`);
    }
    for (const n of names) await checkFile(manifest, n, await read(n));
  }
  const best = detectVariant();
  const v = variant === 'auto' ? best : variant;
  if (!(v in VARIANTS)) throw new EdgepackError(`unknown wasm variant '${variant}' (choose from auto, ${Object.keys(VARIANTS).join(', ')})`);
  const rank = { scalar: 0, simd: 1, relaxed: 2 };
  if (rank[v] > rank[best]) {
    throw new EdgepackError(`this WebAssembly engine does not support the '${v}' variant (best available: '${best}')` +
      (v === 'relaxed' && isNode ? '; Node 20 needs --experimental-wasm-relaxed-simd' : ''));
  }
  const threads = options.threads;
  const wasmName = threads ? THREADS_WASM : VARIANTS[/** @type {keyof VARIANTS} */ (v)];
  const [plan, wasm] = await Promise.all([read('model.plan'), read(wasmName)]);
  if (verify) await Promise.all([checkFile(manifest, 'model.plan', plan), checkFile(manifest, wasmName, wasm)]);
  const hash = verify ? manifest.files[wasmName].sha256 : null;   // cache only binaries whose hash was checked
  /** @type {WebAssembly.Module | undefined} */
  let mod = hash ? modules.get(hash) : undefined;
  if (!mod) {
    try { mod = await WebAssembly.compile(/** @type {BufferSource} */ (wasm)); } catch (e) { throw new EdgepackError(`${wasmName}: not loadable here (${/** @type {Error} */ (e).message})`); }
    if (hash) modules.set(hash, mod);
  }
  if (threads) {
    const { instantiateThreaded } = await import('./threads.js');
    const t = await instantiateThreaded(mod, { threads });
    try {
      const s = new Session(t.instance, plan, manifest, 'threads');
      s._threads = t;
      return s;
    } catch (e) {
      await t.terminate();
      throw e;
    }
  }
  const instance = await WebAssembly.instantiate(mod, {});
  return new Session(instance, plan, manifest, v);
}
