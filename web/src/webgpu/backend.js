// Executes a plan on the GPU: one arena buffer laid out like the wasm arena, one buffer of (repacked)
// weights, one compute dispatch (or a few) per node, in plan order. Nodes without a shader run on the
// wasm core (ep_run_node) with only the tensors they touch moved: their inputs downloaded unless the
// wasm arena already holds them, their outputs uploaded.

import { EdgepackError } from '../runtime.js';
import { ARENA, opName } from './plan.js';
import { BuildContext } from './ops/context.js';
import { BUILDERS } from './ops/index.js';
import { Ranges, words } from './ranges.js';
import { grid, prelude } from './wgsl.js';

/** @typedef {import('./plan.js').Plan} Plan
 *  @typedef {import('./plan.js').PlanNode} PlanNode
 *  @typedef {{kind: 'gpu', node: PlanNode, dispatches: {pipeline: GPUComputePipeline, bindGroup: GPUBindGroup, grid: number[]}[]}
 *    | {kind: 'wasm', node: PlanNode, why: string}} Step
 *  @typedef {{data: ArrayBufferView, dims: readonly number[]}} Tensor
 *  @typedef {{node: number, op: string, on: 'gpu'|'wasm'|'prologue', why?: string}} Placement where a node runs:
 *    GPU shader, wasm core (why: no shader for this case), or once at load (prologue: its outputs are constants) */

const ARRAYS = /** @type {Record<string, any>} */ ({
  float32: Float32Array, int64: BigInt64Array, int32: Int32Array, int8: Int8Array,
  uint8: Uint8Array, bool: Uint8Array, float16: Uint16Array,
});

/** @param {string} m */
const fail = (m) => new EdgepackError(`WebGPU backend: ${m}`);

/** Checks that the wasm session opened this very plan (same tensor table and arena layout) and returns
 * the wasm address of the arena. @param {Plan} plan @param {any} wasm @returns {number} */
function arenaAddress(plan, wasm) {
  const ex = wasm?.ex;
  if (!ex || !wasm.memory || typeof ex.ep_run_node !== 'function') throw fail('a wasm Session (with .ex exports and .memory) is needed for fallback nodes');
  if ((ex.ep_num_nodes() >>> 0) !== plan.nodes.length) throw fail('the wasm session holds a different plan');
  let base = -1;
  for (const t of plan.tensors) {
    if ((ex.ep_tensor_nbytes(t.id) >>> 0) !== t.nbytes) throw fail(`the wasm session holds a different plan (tensor ${t.id})`);
    if (t.storage !== ARENA || !t.nbytes) continue;
    const b = (ex.ep_tensor_data(t.id) >>> 0) - t.offset;
    if (base >= 0 && b !== base) throw fail('the wasm session holds a different arena layout');
    base = b;
  }
  return Math.max(base, 0);
}

export class WebGPUBackend {
  /** @param {GPUDevice} device @param {Plan} plan @param {any} manifest @param {any} wasm
   * @param {{f16: boolean, adapter: string, f16Weights?: boolean}} features */
  constructor(device, plan, manifest, wasm, features) {
    this.device = device;
    this.plan = plan;
    this.manifest = manifest;
    this.wasm = wasm;
    this.features = features;
    this.arenaPtr = arenaAddress(plan, wasm);
    /** @type {Step[]} */
    this.steps = [];
    /** @type {Placement[]} */
    this.placement = [];
    /** @type {[number, number][]} arena bytes of prologue outputs: constant, held by the wasm arena */
    this.prologue = [];
    /** @type {GPUBuffer[]} */
    this.buffers = [];
    // created by build(): the arena, the weights, the parameter words, the error flags, the scratch of
    // multi-pass kernels and the one mappable read-back buffer
    const none = /** @type {GPUBuffer} */ (/** @type {unknown} */ (null));
    this.arena = none; this.weights = none; this.params = none; this.errors = none; this.scratch = none; this.staging = none;
    this.memory = { arenaBytes: 0, weightBytes: 0, scratchBytes: 0 };
    this.destroyed = false;
    this.lost = /** @type {string | null} */ (null);
    device.lost.then((/** @type {GPUDeviceLostInfo} */ info) => { this.lost = info.message || String(info.reason); });
    /** @type {Promise<unknown>} the run in flight: runs share the arena, so they queue */
    this.queue = Promise.resolve();
  }

  /** @param {GPUBufferDescriptor} d */
  buffer(d) {
    const b = this.device.createBuffer(d);
    this.buffers.push(b);
    return b;
  }

  /** Builds every node's dispatches (or its fallback), the weights, params and pipelines.
   * @param {Set<string>} wasmOps kernel names forced onto the wasm core
   * @param {boolean} half keep float constants that are exact in float16 as float16 on the GPU */
  async build(wasmOps, half) {
    const { device, plan } = this;
    const ctx = new BuildContext(plan, half);
    const native = this.features.f16;
    if (plan.tensors.some((t) => t.storage === ARENA && t.offset % 4)) throw fail('arena tensors must be 4-byte aligned (the packager aligns them to 64)');
    /** @type {{node: PlanNode, dispatches: import('./ops/context.js').Dispatch[] | null, why?: string}[]} */
    const built = [];
    const mem = new Uint8Array(this.wasm.memory.buffer);
    for (const node of plan.nodes) {
      ctx.node = node;
      if (node.prologue) {   // computed by the wasm core when it bound its arena: take its outputs as constants
        for (const id of node.outputs) {
          const t = plan.tensors[id];
          ctx.constants.set(id, mem.slice(this.arenaPtr + t.offset, this.arenaPtr + t.offset + t.nbytes));
          this.prologue.push(words(t.offset, t.offset + t.nbytes));
        }
        this.placement.push({ node: node.index, op: opName(node.op), on: 'prologue' });
        continue;
      }
      if (node.outputs.every((id) => plan.tensors[id].nbytes === 0)) continue;   // nothing to compute
      const builder = BUILDERS[node.op];
      /** @type {import('./ops/context.js').Dispatch[] | string} */
      let r;
      try {
        r = wasmOps.has(opName(node.op)) ? 'forced onto wasm' : builder ? builder(node, ctx) : 'no shader';
      } catch (e) {
        // The wasm core validated this node when it opened the plan: a builder that disagrees has a
        // limitation, not a reason to refuse the model. The node runs on the core, which re-checks it.
        if (!(e instanceof EdgepackError)) throw e;
        r = e.message;
      }
      built.push(typeof r === 'string' ? { node, dispatches: null, why: r } : { node, dispatches: r });
      this.placement.push(typeof r === 'string' ? { node: node.index, op: opName(node.op), on: 'wasm', why: r }
        : { node: node.index, op: opName(node.op), on: 'gpu' });
    }
    const usage = GPUBufferUsage;
    this.arena = this.buffer({ size: Math.max(16, (plan.arenaBytes + 3) & ~3), usage: usage.STORAGE | usage.COPY_SRC | usage.COPY_DST });
    const w = ctx.weights();
    const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
    for (const [what, n] of /** @type {[string, number][]} */ ([['arena', plan.arenaBytes], ['weights', w.byteLength]])) {
      if (n > limit) throw fail(`the model's ${what} needs ${n} bytes in one buffer; this adapter allows ${limit}`);
    }
    this.weights = this.buffer({ size: w.byteLength, usage: usage.STORAGE | usage.COPY_DST });
    this.memory = { arenaBytes: this.arena.size, weightBytes: w.byteLength, scratchBytes: 4 * ctx.scratchWords };
    this.features.f16Weights = half;
    device.queue.writeBuffer(this.weights, 0, /** @type {Uint32Array<ArrayBuffer>} */ (w));
    this.errors = this.buffer({ size: 16, usage: usage.STORAGE | usage.COPY_SRC | usage.COPY_DST });
    if (4 * ctx.scratchWords > limit) throw fail(`scratch of ${4 * ctx.scratchWords} bytes exceeds this adapter's ${limit}`);
    this.scratch = this.buffer({ size: Math.max(16, 4 * ctx.scratchWords), usage: usage.STORAGE });

    const align = device.limits.minStorageBufferOffsetAlignment;
    const all = built.flatMap((b) => b.dispatches || []);
    let size = 0;
    const at = all.map((d) => { const o = size; size += Math.ceil((d.params.length * 4) / align) * align; return o; });
    const params = new Uint32Array(Math.max(size, 16) / 4);
    all.forEach((d, i) => params.set(Uint32Array.from(d.params, (v) => v >>> 0), at[i] / 4));
    this.params = this.buffer({ size: params.byteLength, usage: usage.STORAGE | usage.COPY_DST });
    device.queue.writeBuffer(this.params, 0, params);

    const layout = device.createBindGroupLayout({
      entries: [
        { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
        { binding: 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
        { binding: 2, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
        { binding: 3, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
        { binding: 4, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } },
        { binding: 7, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'storage' } },
        ...(native ? [5, 6].map((binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type: /** @type {const} */ ('read-only-storage') } })) : []),
      ],
    });
    const pipelineLayout = device.createPipelineLayout({ bindGroupLayouts: [layout] });
    /** @type {Map<string, Promise<GPUComputePipeline>>} one pipeline per distinct shader source */
    const pipelines = new Map();
    /** @param {string} code @param {PlanNode} node @returns {Promise<GPUComputePipeline>} */
    const pipeline = (code, node) => {
      const hit = pipelines.get(code);
      if (hit) return hit;
      const module = device.createShaderModule({ code: prelude(native) + code });
      const p = device.createComputePipelineAsync({ layout: pipelineLayout, compute: { module, entryPoint: 'main' } }).catch(async (/** @type {Error} */ e) => {
        const info = await module.getCompilationInfo();
        const msgs = info.messages.filter((/** @type {GPUCompilationMessage} */ m) => m.type === 'error')
          .map((/** @type {GPUCompilationMessage} */ m) => `${m.lineNum}:${m.linePos} ${m.message}`);
        throw fail(`node ${node.index} (${opName(node.op)}): shader does not compile: ${msgs.join('; ') || e.message}`);
      });
      pipelines.set(code, p);
      return p;
    };
    let k = 0;
    for (const b of built) {
      if (!b.dispatches) { this.steps.push({ kind: 'wasm', node: b.node, why: b.why || '' }); continue; }
      const ds = [];
      for (const d of b.dispatches) {
        const off = at[k++];
        const bindGroup = device.createBindGroup({
          layout,
          entries: [
            { binding: 0, resource: { buffer: this.arena } },
            { binding: 1, resource: { buffer: this.weights } },
            { binding: 2, resource: { buffer: this.params, offset: off, size: d.params.length * 4 } },
            { binding: 3, resource: { buffer: this.errors } },
            { binding: 4, resource: { buffer: this.weights } },
            { binding: 7, resource: { buffer: this.scratch } },
            ...(native ? [5, 6].map((binding) => ({ binding, resource: { buffer: this.weights } })) : []),
          ],
        });
        ds.push({ pipeline: await pipeline(d.code, b.node), bindGroup, grid: grid(d.threads) });
      }
      this.steps.push({ kind: 'gpu', node: b.node, dispatches: ds });
    }
    // One mappable buffer for every read-back: a fallback node's inputs, or the graph outputs.
    let most = 16;
    for (const s of this.steps) {
      if (s.kind === 'wasm') most = Math.max(most, this.arenaInputs(s.node).reduce((a, [lo, hi]) => a + hi - lo, 0));
    }
    most = Math.max(most, plan.outputs.reduce((a, id) => a + ((plan.tensors[id].nbytes + 3) & ~3), 16));
    this.staging = this.buffer({ size: most, usage: usage.MAP_READ | usage.COPY_DST });
  }

  /** A fallback node's arena inputs as word-aligned byte ranges. @param {PlanNode} node @returns {[number, number][]} */
  arenaInputs(node) {
    return node.inputs.filter((id) => id >= 0 && this.plan.tensors[id].storage === ARENA && this.plan.tensors[id].nbytes)
      .map((id) => { const t = this.plan.tensors[id]; return words(t.offset, t.offset + t.nbytes); });
  }

  /** Runs the plan; runs are serialized (they share the arena).
   * @param {Record<string, Tensor>} feeds @returns {Promise<Record<string, {data: any, dims: number[], dtype: string}>>} */
  run(feeds) {
    const r = this.queue.then(() => this.runNow(feeds));
    this.queue = r.catch(() => {});
    return r;
  }

  /** Runs once, waiting for the GPU after every node: per-node wall time in ms (slower than run()).
   * @param {Record<string, Tensor>} feeds @returns {Promise<{node: number, op: string, on: string, ms: number}[]>} */
  profile(feeds) {
    /** @type {{node: number, op: string, on: string, ms: number}[]} */
    const times = [];
    const r = this.queue.then(() => this.runNow(feeds, times)).then(() => times);
    this.queue = r.catch(() => {});
    return r;
  }

  /** @param {Record<string, Tensor>} feeds @param {{node: number, op: string, on: string, ms: number}[]} [times] */
  async runNow(feeds, times) {
    if (this.destroyed) throw fail('backend destroyed');
    if (this.lost) throw fail(`GPU device lost (${this.lost})`);
    this.device.pushErrorScope('validation');
    /** @type {unknown} */
    let failure = null;
    let result;
    try {
      result = await this.execute(feeds, times);
    } catch (e) {
      failure = e;
    }
    const err = await this.device.popErrorScope();
    if (failure) throw failure;
    if (err) throw fail(`GPU error while running: ${err.message}`);
    return /** @type {Record<string, {data: any, dims: number[], dtype: string}>} */ (result);
  }

  /** @param {Record<string, Tensor>} feeds @param {{node: number, op: string, on: string, ms: number}[]} [times] */
  async execute(feeds, times) {
    const { device, plan, wasm } = this;
    const q = device.queue;
    wasm.checkFeeds(feeds);
    const valid = new Ranges();   // wasm-arena bytes the wasm side may read as they are
    for (const [lo, hi] of this.prologue) valid.add(lo, hi);   // GPU nodes read these from the weights buffer
    const mem = () => new Uint8Array(wasm.memory.buffer);
    for (const s of this.manifest.inputs) {
      const t = plan.tensors[s.tensor], d = feeds[s.name].data;
      const bytes = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      if (bytes.length !== t.nbytes) throw fail(`input '${s.name}': ${bytes.length} bytes, the plan expects ${t.nbytes}`);
      mem().set(bytes, this.arenaPtr + t.offset);
      const [lo, hi] = words(t.offset, t.offset + t.nbytes);
      q.writeBuffer(this.arena, lo, mem(), this.arenaPtr + lo, hi - lo);
      valid.add(lo, hi);
    }
    q.writeBuffer(this.errors, 0, new Uint32Array([0xffffffff, 0, 0, 0]));
    let enc = device.createCommandEncoder();
    /** @type {GPUComputePassEncoder | null} */
    let pass = null;
    for (const step of this.steps) {
      const t0 = performance.now();
      if (step.kind === 'gpu') {
        pass ??= enc.beginComputePass();
        for (const d of step.dispatches) {
          pass.setPipeline(d.pipeline);
          pass.setBindGroup(0, d.bindGroup);
          pass.dispatchWorkgroups(d.grid[0], d.grid[1]);
        }
        for (const id of step.node.outputs) valid.remove(...words(plan.tensors[id].offset, plan.tensors[id].offset + plan.tensors[id].nbytes));
        if (times) {
          pass.end(); pass = null;
          q.submit([enc.finish()]);
          enc = device.createCommandEncoder();
          await q.onSubmittedWorkDone();
          times.push({ node: step.node.index, op: opName(step.node.op), on: 'gpu', ms: performance.now() - t0 });
        }
        continue;
      }
      // wasm fallback: bring its missing inputs down, run it, send its outputs up
      if (pass) { pass.end(); pass = null; }
      const need = this.arenaInputs(step.node).filter(([lo, hi]) => !valid.covers(lo, hi));
      const got = await this.readBack(enc, need);
      enc = device.createCommandEncoder();
      const m = mem();
      let at = 0;
      for (const [lo, hi] of need) {
        m.set(got.subarray(at, at + hi - lo), this.arenaPtr + lo);
        at += hi - lo;
        valid.add(lo, hi);
      }
      const n = step.node;
      const status = wasm.ex.ep_run_node(n.index);
      if (status !== 0) {
        const msg = wasm._cstr ? wasm._cstr(wasm.ex.ep_status_str(status) >>> 0) : `status ${status}`;
        throw new EdgepackError(`edgepack runtime refused node ${n.index} (${opName(n.op)}): ${msg} (status ${status})`, status);
      }
      if (n.scratchBytes) valid.remove(...words(n.scratchOff, n.scratchOff + n.scratchBytes));
      for (const id of n.outputs) {
        const t = plan.tensors[id];
        const [lo, hi] = words(t.offset, t.offset + t.nbytes);
        if (hi > lo) q.writeBuffer(this.arena, lo, mem(), this.arenaPtr + lo, hi - lo);
        valid.add(lo, hi);
      }
      if (times) times.push({ node: n.index, op: opName(n.op), on: 'wasm', ms: performance.now() - t0 });
    }
    if (pass) pass.end();
    const outs = this.manifest.outputs.map((/** @type {any} */ s) => {
      const t = plan.tensors[s.tensor];
      return words(t.offset, t.offset + t.nbytes);
    });
    enc.copyBufferToBuffer(this.errors, 0, this.staging, 0, 4);
    const got = await this.readBack(enc, outs, 16);
    const bad = new Uint32Array(got.buffer, got.byteOffset, 1)[0];
    if (bad !== 0xffffffff) {
      const n = plan.nodes[bad];
      throw new EdgepackError(`node ${bad} (${n ? opName(n.op) : '?'}): index out of range`);
    }
    /** @type {Record<string, {data: any, dims: number[], dtype: string}>} */
    const result = {};
    let at = 16;
    this.manifest.outputs.forEach((/** @type {any} */ s, /** @type {number} */ i) => {
      const t = plan.tensors[s.tensor];
      const [lo, hi] = outs[i];
      const skip = t.offset - lo;
      const bytes = got.slice(at + skip, at + skip + t.nbytes);
      at += hi - lo;
      result[s.name] = { data: new ARRAYS[s.dtype](bytes.buffer), dims: s.shape.slice(), dtype: s.dtype };
    });
    return result;
  }

  /** Submits \`enc\` after appending copies of the arena ranges into the staging buffer (from byte
   * \`start\`), waits, and returns a copy of the staged bytes (empty when nothing is read).
   * @param {GPUCommandEncoder} enc @param {[number, number][]} ranges @param {number} [start] */
  async readBack(enc, ranges, start = 0) {
    let at = start;
    for (const [lo, hi] of ranges) {
      if (hi > lo) enc.copyBufferToBuffer(this.arena, lo, this.staging, at, hi - lo);
      at += hi - lo;
    }
    this.device.queue.submit([enc.finish()]);
    if (at === 0) return new Uint8Array(0);
    await this.staging.mapAsync(GPUMapMode.READ, 0, at);
    const out = new Uint8Array(this.staging.getMappedRange(0, at).slice(0));
    this.staging.unmap();
    return out;
  }

  destroy() {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const b of this.buffers) b.destroy();
    this.device.destroy();
  }
}

