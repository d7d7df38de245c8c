// Reads model.plan (docs/plan-format.md) for the WebGPU backend. The bytes are hostile: every section,
// offset and length is bounds-checked before use. Kernel-level shape checks are the wasm core's check()
// (it opens the same plan); the op builders re-check what their index math relies on.

import { EdgepackError } from '../runtime.js';
import { DTYPES } from '../dtypes.js';
import { MAX_IO, OP } from './opcodes.js';

/** Kernel ids, generated from wasm_kernels/spec/ops.json (opcodes.js). */
export { OP };

const NAMES = Object.freeze(Object.fromEntries(Object.entries(OP).map(([k, v]) => [v, k])));
/** A kernel's name; an id outside the spec reads 'kernel N' (the wasm core, which knows every id it runs,
 * validates them when it opens the plan). @param {number} op */
export const opName = (op) => NAMES[op] ?? `kernel ${op}`;

/** Element size per ONNX dtype code the plan may carry. */
export const DTYPE_SIZE = Object.freeze(Object.fromEntries(Object.entries(DTYPES).map(([c, t]) => [c, t.bytes])));
export const F32 = 1, I32 = 6, I64 = 7, F16 = 10;
export const ARENA = 0, WEIGHTS = 1;

const MAGIC = 0x4e4c5045;   // "EPLN" little-endian
const HEADER = 64, TENSOR = 48, NODE = 32, MAX_RANK = 8;
const PROLOGUE = 1;   // node flag: runs once when the arena is bound

/**
 * @typedef {{id: number, dtype: number, storage: number, rank: number, offset: number, nbytes: number,
 *   dims: number[], numel: number}} PlanTensor
 * @typedef {{index: number, op: number, inputs: number[], outputs: number[], params: Int32Array,
 *   scratchOff: number, scratchBytes: number, prologue: boolean}} PlanNode prologue: node flag bit 0, a node
 *   that reads only weights and runs once when the arena is bound (e.g. CAST of a float16 weight)
 * @typedef {{bytes: Uint8Array, tensors: PlanTensor[], nodes: PlanNode[], inputs: number[], outputs: number[],
 *   weightsOff: number, weightsBytes: number, arenaBytes: number}} Plan
 */

/** @param {string} msg */
const bad = (msg) => new EdgepackError(`model.plan: ${msg}`);

/** Parses and bounds-checks a plan. @param {Uint8Array} bytes @returns {Plan} */
export function parsePlan(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new EdgepackError('plan must be a Uint8Array');
  if (bytes.length < HEADER) throw bad('truncated: shorter than its 64-byte header');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (/** @type {number} */ o) => dv.getUint32(o, true);
  if (u32(0) !== MAGIC) throw bad('not an edgepack plan (bad magic)');
  if (u32(4) !== 1) {
    throw bad(`version ${u32(4)} not supported (this backend reads 1${u32(4) === 2 ? ': shapes resolved at run time run on the wasm backend' : ''})`);
  }
  if (u32(8) !== HEADER) throw bad(`header_bytes ${u32(8)}, expected 64`);
  if (u32(12) !== bytes.length) throw bad(`plan_bytes ${u32(12)} but the buffer holds ${bytes.length}`);
  const [nT, nN, nIn, nOut, tOff, nOff, iOff, iCnt, wOff, wBytes, arenaBytes] =
    [16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56].map(u32);
  const within = (/** @type {number} */ off, /** @type {number} */ size, /** @type {string} */ what) => {
    if (off % 4 || off + size > bytes.length) throw bad(`${what} section [${off}, ${off + size}) out of bounds or misaligned`);
  };
  within(tOff, nT * TENSOR, 'tensor');
  within(nOff, nN * NODE, 'node');
  within(iOff, iCnt * 4, 'int pool');
  within(wOff, wBytes, 'weights');
  if (wOff % 64) throw bad('weights section not 64-byte aligned');
  const ints = (/** @type {number} */ at, /** @type {number} */ n, /** @type {string} */ what) => {
    if (at + n > iCnt) throw bad(`${what}: int pool range [${at}, ${at + n}) outside its ${iCnt} words`);
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = dv.getInt32(iOff + 4 * (at + i), true);
    return out;
  };

  /** @type {PlanTensor[]} */
  const tensors = [];
  for (let i = 0; i < nT; i++) {
    const o = tOff + i * TENSOR;
    const dtype = dv.getUint8(o), storage = dv.getUint8(o + 1), rank = dv.getUint8(o + 2);
    const offset = u32(o + 4), nbytes = u32(o + 8);
    if (!(dtype in DTYPE_SIZE)) throw bad(`tensor ${i}: unknown dtype ${dtype}`);
    if (storage !== ARENA && storage !== WEIGHTS) throw bad(`tensor ${i}: unknown storage ${storage}`);
    if (rank > MAX_RANK) throw bad(`tensor ${i}: rank ${rank} > ${MAX_RANK}`);
    const dims = [];
    let numel = 1;
    for (let d = 0; d < rank; d++) {
      const v = dv.getInt32(o + 12 + 4 * d, true);
      if (v < 0) throw bad(`tensor ${i}: negative dim ${v}`);
      dims.push(v);
      numel *= v;
    }
    const size = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (dtype)];
    if (numel * size > 0xffffffff || numel * size !== nbytes) throw bad(`tensor ${i}: nbytes ${nbytes} does not match dims [${dims}]`);
    if (offset % size) throw bad(`tensor ${i}: offset ${offset} not a multiple of its element size`);
    const limit = storage === ARENA ? arenaBytes : wBytes;
    if (offset + nbytes > limit) throw bad(`tensor ${i}: bytes [${offset}, ${offset + nbytes}) outside its ${storage === ARENA ? 'arena' : 'weights'} (${limit} bytes)`);
    tensors.push({ id: i, dtype, storage, rank, offset, nbytes, dims, numel });
  }
  const tensorId = (/** @type {number} */ id, /** @type {string} */ what, optional = false) => {
    if (optional && id === -1) return -1;
    if (!(id >= 0 && id < nT)) throw bad(`${what}: tensor id ${id} out of range (${nT} tensors)`);
    return id;
  };
  const graphIo = Array.from(ints(0, nIn + nOut, 'graph inputs/outputs'), (id, i) => {
    tensorId(id, i < nIn ? `graph input ${i}` : `graph output ${i - nIn}`);
    if (tensors[id].storage !== ARENA) throw bad(`graph input/output tensor ${id} is not in the arena`);
    return id;
  });

  /** @type {PlanNode[]} */
  const nodes = [];
  for (let i = 0; i < nN; i++) {
    const o = nOff + i * NODE;
    const op = dv.getUint16(o, true), nI = dv.getUint8(o + 2), nO = dv.getUint8(o + 3);
    const ioAt = u32(o + 4), pAt = u32(o + 8), nP = u32(o + 12), scratchOff = u32(o + 16), scratchBytes = u32(o + 20);
    const flags = u32(o + 24);
    if (flags & ~PROLOGUE || u32(o + 28)) throw bad(`node ${i}: unknown node flags ${flags}`);
    if (nI > MAX_IO || nO > MAX_IO || nO < 1) throw bad(`node ${i} (${opName(op)}): ${nI} inputs / ${nO} outputs out of bounds`);
    if (scratchOff + scratchBytes > arenaBytes) throw bad(`node ${i}: scratch outside the arena`);
    const io = ints(ioAt, nI + nO, `node ${i} io`);
    const inputs = Array.from(io.subarray(0, nI), (id) => tensorId(id, `node ${i} input`, true));
    const outputs = Array.from(io.subarray(nI), (id) => {
      tensorId(id, `node ${i} output`);
      if (tensors[id].storage !== ARENA) throw bad(`node ${i}: output tensor ${id} is not in the arena`);
      return id;
    });
    const prologue = !!(flags & PROLOGUE);
    if (prologue && (i && !nodes[i - 1].prologue || inputs.some((id) => id >= 0 && tensors[id].storage !== WEIGHTS))) {
      throw bad(`node ${i}: a prologue node must read only weights and follow only prologue nodes`);
    }
    nodes.push({ index: i, op, inputs, outputs, params: ints(pAt, nP, `node ${i} params`), scratchOff, scratchBytes, prologue });
  }
  return { bytes, tensors, nodes, inputs: graphIo.slice(0, nIn), outputs: graphIo.slice(nIn), weightsOff: wOff, weightsBytes: wBytes, arenaBytes };
}

/** A weights tensor's bytes (a view into the plan; copied when unaligned for its element type).
 * @param {Plan} plan @param {PlanTensor} t @returns {Uint8Array} */
export function weightBytes(plan, t) {
  if (t.storage !== WEIGHTS) throw bad(`tensor ${t.id} is not a weight`);
  return plan.bytes.subarray(plan.weightsOff + t.offset, plan.weightsOff + t.offset + t.nbytes);
}

/** A float32/float16 weights tensor as float32 values (float16 converted).
 * @param {Plan} plan @param {PlanTensor} t @returns {Float32Array} */
export function weightFloats(plan, t) {
  const b = weightBytes(plan, t);
  const copy = b.byteOffset % 4 ? b.slice() : b;
  if (t.dtype === F32) return new Float32Array(copy.buffer, copy.byteOffset, t.numel);
  if (t.dtype === F16) {
    const h = b.byteOffset % 2 ? new Uint16Array(b.slice().buffer) : new Uint16Array(b.buffer, b.byteOffset, t.numel);
    const out = new Float32Array(t.numel);
    for (let i = 0; i < out.length; i++) out[i] = halfToFloat(h[i]);
    return out;
  }
  throw bad(`tensor ${t.id}: dtype ${t.dtype} is not a float weight`);
}

/** IEEE-754 binary16 bits to a number. @param {number} h */
export function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Row-major strides. @param {number[]} dims */
export function strides(dims) {
  const s = new Array(dims.length).fill(1);
  for (let i = dims.length - 2; i >= 0; i--) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

/** @param {number[]} dims */
export const numel = (dims) => dims.reduce((a, d) => a * d, 1);
