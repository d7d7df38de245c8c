// What an op builder sees while turning a plan node into GPU dispatches: the plan's tensors, where each
// operand lives on the GPU (arena word offset, or a slot in the GPU weights buffer filled at load time,
// possibly with a repacked layout), and a way to refuse bad plans with a clear error.
// Constants are the weights plus the outputs of prologue nodes (e.g. float16 weights widened to float32
// once, when the wasm core binds its arena): their bytes are known at load time, so they are handled as
// weights (repacked, uploaded to the weights buffer) and no GPU work recomputes them.

import { EdgepackError } from '../../runtime.js';
import { ARENA, F16, F32, WEIGHTS, halfToFloat, opName, weightBytes, weightFloats } from '../plan.js';

/** @typedef {import('../plan.js').Plan} Plan
 *  @typedef {import('../plan.js').PlanTensor} PlanTensor
 *  @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('../wgsl.js').Src} Src
 *  @typedef {{code: string, params: number[], threads: number}} Dispatch one compute dispatch: WGSL source
 *    (without the shared prelude), its parameter words (P[0] = thread count) and its thread count */

export class BuildContext {
  /** @param {Plan} plan @param {boolean} half store float constants exactly representable in float16 as float16 */
  constructor(plan, half = false) {
    this.plan = plan;
    this.half = half;
    /** @type {Uint32Array[]} */
    this.chunks = [];
    this.words = 0;
    /** @type {Map<string, Src>} */
    this.cache = new Map();
    /** @type {PlanNode | null} */
    this.node = null;
    /** @type {Map<number, Uint8Array>} prologue outputs: tensor id -> bytes */
    this.constants = new Map();
    this.scratchWords = 0;
  }

  /** The GPU scratch buffer (shared by all nodes, which run one after another) from word 0, \`words\` long.
   * @param {number} words @returns {Src} */
  scratch(words) {
    this.scratchWords = Math.max(this.scratchWords, words);
    return { buf: 'S', base: 0 };
  }

  /** @param {number} id @returns {PlanTensor} */
  t(id) {
    if (!(id >= 0 && id < this.plan.tensors.length)) this.fail(`missing operand (tensor id ${id})`);
    return this.plan.tensors[id];
  }

  /** A weight or a prologue output: values known at load time. @param {number} id */
  isWeight(id) { return this.t(id).storage === WEIGHTS || this.constants.has(id); }

  /** float32, or a float16 weight (converted to float32 when loaded). @param {number} id */
  isFloat(id) {
    const t = this.t(id);
    return t.dtype === F32 || (t.dtype === F16 && t.storage === WEIGHTS);
  }

  /** A constant's values as float32 (float16 weights converted). @param {number} id @returns {Float32Array} */
  floats(id) {
    const t = this.t(id), c = this.constants.get(id);
    if (!c) return weightFloats(this.plan, t);
    if (t.dtype !== F32) this.fail(`tensor ${id} is not float32`);
    const a = c.byteOffset % 4 ? c.slice() : c;
    return new Float32Array(a.buffer, a.byteOffset, t.numel);
  }

  /** Throws a clear error naming the node. @param {string} msg @returns {never} */
  fail(msg) {
    const n = this.node;
    throw new EdgepackError(`model.plan: node ${n?.index} (${n ? opName(n.op) : '?'}): ${msg}`);
  }

  /** Where tensor \`id\` is on the GPU. Arena tensors: their arena offset in words. Weights: copied into
   * the GPU weights buffer once per (tensor, layout); \`make\` builds a non-default layout, the default
   * being the tensor's words (float16 converted to float32).
   * @param {number} id @param {string} [layout] @param {() => Float32Array | Uint32Array} [make] @returns {Src} */
  src(id, layout = 'raw', make) {
    const t = this.t(id);
    if (t.storage === ARENA && !this.constants.has(id)) {
      if (t.offset % 4) this.fail(`tensor ${id} is not 4-byte aligned in the arena`);
      return { buf: 'A', base: t.offset / 4 };
    }
    const key = `${id}:${layout}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const data = make ? make() : this.rawWords(t);
    const words = data instanceof Uint32Array ? data : new Uint32Array(data.buffer, data.byteOffset, data.length);
    const src = /** @type {Src} */ ({ buf: 'W', base: this.words });
    this.chunks.push(words);
    this.words += Math.ceil(words.length / 4) * 4;   // 16-byte aligned slots
    this.cache.set(key, src);
    return src;
  }

  /** Like src(), for operands read as floats: with float16 storage on, a float constant whose values
   * are all exact in float16 gets a float16 slot (an 'H' source, base in halves).
   * @param {number} id @param {string} [layout] @param {() => Float32Array} [make] @returns {Src} */
  fsrc(id, layout = 'raw', make) {
    const t = this.t(id);
    if (!this.half || !this.isWeight(id) || (t.dtype !== F32 && t.dtype !== F16)) return this.src(id, layout, make);
    const key = `${id}:${layout}:f16`;
    let hit = this.cache.get(key);
    if (!hit) {
      const f = make ? make() : this.floats(id);
      const h = toHalves(f);
      if (!h) {   // not exact in float16: a float32 slot
        hit = this.src(id, layout, () => f);
      } else {
        hit = { buf: 'H', base: 2 * this.words };
        this.chunks.push(new Uint32Array(h.buffer, 0, h.length / 2));
        this.words += Math.ceil(h.length / 8) * 4;
      }
      this.cache.set(key, hit);
    }
    return hit;
  }

  /** @param {PlanTensor} t @returns {Uint32Array} */
  rawWords(t) {
    if (t.dtype === F16) {
      const f = weightFloats(this.plan, t);
      return new Uint32Array(f.buffer, f.byteOffset, f.length);
    }
    const b = this.constants.get(t.id) || weightBytes(this.plan, t);
    if (t.nbytes % 4 || b.byteOffset % 4) {   // 1-byte elements (bool conditions): zero-padded words
      const c = new Uint8Array(Math.ceil(t.nbytes / 4) * 4);
      c.set(b);
      return new Uint32Array(c.buffer);
    }
    return new Uint32Array(b.buffer, b.byteOffset, t.nbytes / 4);
  }

  /** The GPU weights buffer's contents. @returns {Uint32Array} */
  weights() {
    const out = new Uint32Array(Math.max(4, this.words));
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += Math.ceil(c.length / 4) * 4;
    }
    return out;
  }
}

const F = new Float32Array(1), U = new Uint32Array(F.buffer);

/** float32 -> binary16 bits, for values exact in float16 (the caller checks the round trip). @param {number} v */
function half(v) {
  F[0] = v;
  const x = U[0], sign = (x >>> 16) & 0x8000, e = ((x >>> 23) & 0xff) - 112, m = x & 0x7fffff;
  if (e >= 31) return sign | 0x7c00 | (m ? 0x200 : 0);
  if (e <= 0) return e < -10 ? sign : sign | ((m | 0x800000) >>> (14 - e));
  return sign | (e << 10) | (m >>> 13);
}

/** Float16 bits of \`f\` (padded to a multiple of 2), or null when a value is not exact in float16.
 * @param {Float32Array} f @returns {Uint16Array | null} */
function toHalves(f) {
  const out = new Uint16Array(f.length + (f.length & 1));
  for (let i = 0; i < f.length; i++) {
    const h = half(f[i]);
    if (halfToFloat(h) !== f[i] && !(f[i] !== f[i])) return null;
    out[i] = h;
  }
  return out;
}
