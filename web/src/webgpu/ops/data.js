// Data movement on 4- and 8-byte elements (float32, int32, int64), as raw words: TRANSPOSE, SLICE,
// CONCAT, SPLIT, EXPAND and COPY are one strided-copy shader (dims, read strides, write strides); PAD
// maps every output element to its source (or the constant); GATHER looks its indices up (int32/int64,
// negative ones wrap) and flags an out-of-range index in the error buffer.

import { DTYPE_SIZE, I32, I64, numel, strides } from '../plan.js';
import { MAIN, wordLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

const MAXD = 9;   // rank 8 plus the word-in-element dim of 8-byte types

const COPY_WGSL = /* wgsl */ `${MAIN}
  var r = t; var ri = pi(2); var wi = pi(3);
  for (var d = i32(P[1]) - 1; d >= 0; d--) {
    let dim = P[4u + u32(d)];
    let q = i32(r % dim);
    r /= dim;
    ri += q * pi(13u + u32(d));
    wi += q * pi(22u + u32(d));
  }
  A[u32(wi)] = r0(u32(ri));
}`;

/** Words per element of every tensor of the node (default) or of `ids`, or 0 when some is not 4 or 8 bytes wide.
 * @param {PlanNode} node @param {BuildContext} ctx @param {number[]} [ids] */
function wordsPerElement(node, ctx, ids = [...node.inputs, ...node.outputs]) {
  const sizes = new Set(ids.filter((id) => id >= 0).map((id) => DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (ctx.t(id).dtype)]));
  const [s] = sizes;
  return sizes.size === 1 && (s === 4 || s === 8) ? s / 4 : 0;
}

/** One strided copy dispatch, in elements of \`w\` words: y[wb + Σ i_d·ws_d] = x[rb + Σ i_d·rs_d] over dims.
 * @param {BuildContext} ctx @param {number} src @param {number} dst @param {number} w
 * @param {number[]} dims @param {number[]} rs @param {number[]} ws @param {number} rb @param {number} wb @returns {Dispatch} */
function stridedCopy(ctx, src, dst, w, dims, rs, ws, rb, wb) {
  let D = dims.slice(), R = rs.slice(), S = ws.slice();
  if (w === 2) { D = [...D, 2]; R = [...R.map((v) => 2 * v), 1]; S = [...S.map((v) => 2 * v), 1]; }
  // drop unit dims and merge dims that are contiguous in both the read and the write
  const keep = D.map((_, i) => i).filter((i) => D[i] !== 1);
  /** @type {number[][]} */
  const m = [];
  for (const i of keep) {
    const last = m[m.length - 1];
    if (last && last[1] === R[i] * D[i] && last[2] === S[i] * D[i]) { last[0] *= D[i]; last[1] = R[i]; last[2] = S[i]; }
    else m.push([D[i], R[i], S[i]]);
  }
  if (m.length > MAXD) ctx.fail('rank');
  const s = ctx.src(src);
  const p = [w * numel(dims), m.length, s.base + w * rb, ctx.src(dst).base + w * wb, ...new Array(3 * MAXD).fill(0)];
  m.forEach(([d, r, wr], i) => { p[4 + i] = d; p[13 + i] = r; p[22 + i] = wr; });
  return { code: wordLoader('r0', s) + COPY_WGSL, params: p, threads: p[0] };
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function transpose(node, ctx) {
  const w = wordsPerElement(node, ctx);
  if (!w) return 'element size';
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]), perm = Array.from(node.params);
  if (perm.length !== x.rank || y.rank !== x.rank || perm.some((v, i) => !(v >= 0 && v < x.rank) || y.dims[i] !== x.dims[v]) ||
      new Set(perm).size !== perm.length) ctx.fail('perm does not match the shapes');
  const xs = strides(x.dims);
  return [stridedCopy(ctx, x.id, y.id, w, y.dims, perm.map((v) => xs[v]), strides(y.dims), 0, 0)];
}

/** SLICE's ONNX form on an axis of extent d: [first, length] (the C core's ep_slice_axis).
 * @param {number} d @param {number} s @param {number} e @param {number} st @returns {[number, number]} */
function sliceAxis(d, s, e, st) {
  if (s < 0) s += d;
  if (e < 0) e += d;
  let n;
  if (st > 0) {
    s = Math.min(Math.max(s, 0), d); e = Math.min(Math.max(e, 0), d);
    n = e > s ? Math.ceil((e - s) / st) : 0;
  } else {
    s = Math.min(Math.max(s, 0), d - 1); e = Math.min(Math.max(e, -1), d - 1);
    n = s > e ? Math.ceil((s - e) / -st) : 0;
  }
  return [n ? s : 0, n];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function slice(node, ctx) {
  const w = wordsPerElement(node, ctx);
  if (!w) return 'element size';
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]), r = x.rank, onnx = node.params.length === 3 * r;
  if ((node.params.length !== 2 * r && !onnx) || y.rank !== r) ctx.fail('params');
  // [start.., step..]: the normalized form; [start.., end.., step..]: ONNX's, resolved here.
  const pr = onnx ? [...node.params.slice(0, r), ...node.params.slice(2 * r)] : Array.from(node.params);
  for (let i = 0; onnx && i < r; i++) {
    if (pr[r + i] === 0) ctx.fail('step 0');
    const [first, len] = sliceAxis(x.dims[i], node.params[i], node.params[r + i], pr[r + i]);
    if (len !== y.dims[i]) ctx.fail(`dim ${i}: slice length`);
    pr[i] = first;
  }
  const xs = strides(x.dims);
  let rb = 0;
  for (let i = 0; i < r; i++) {
    const [start, step, n] = [pr[i], pr[r + i], y.dims[i]];
    if (n > 0 && (step === 0 || start < 0 || start >= x.dims[i] || start + (n - 1) * step < 0 || start + (n - 1) * step >= x.dims[i])) ctx.fail(`dim ${i}: slice outside the input`);
    rb += start * xs[i];
  }
  return [stridedCopy(ctx, x.id, y.id, w, y.dims, xs.map((s, i) => s * pr[r + i]), strides(y.dims), rb, 0)];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function concat(node, ctx) {
  const w = wordsPerElement(node, ctx);
  if (!w) return 'element size';
  const y = ctx.t(node.outputs[0]), [axis] = node.params, ys = strides(y.dims);
  if (node.params.length !== 1 || !(axis >= 0 && axis < y.rank)) ctx.fail('axis');
  let at = 0;
  /** @type {Dispatch[]} */
  const out = [];
  for (const id of node.inputs) {
    const x = ctx.t(id);
    if (x.rank !== y.rank || x.dims.some((d, i) => i !== axis && d !== y.dims[i])) ctx.fail('input shapes');
    if (x.numel) out.push(stridedCopy(ctx, id, y.id, w, x.dims, strides(x.dims), ys, 0, at * ys[axis]));
    at += x.dims[axis];
  }
  if (at !== y.dims[axis]) ctx.fail('extents along the axis do not sum to the output');
  return out;
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function copy(node, ctx) {
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]);
  if (x.nbytes !== y.nbytes) ctx.fail('sizes differ');
  if (x.nbytes % 4 || x.offset % 4 || y.offset % 4) return 'not word aligned';
  return [stridedCopy(ctx, x.id, y.id, 1, [x.nbytes / 4], [1], [1], 0, 0)];
}

const GATHER_WGSL = /* wgsl */ `${MAIN}
  let innerW = P[5]; let J = P[6]; let n = P[4];
  let iw = t % innerW; let r1 = t / innerW; let j = r1 % J; let o = r1 / J;
  var idx = 0u; var ok = false;
  IDX
  if (!ok) { atomicMin(&E[0], P[7]); idx = 0u; }
  A[P[3] + t] = rd(P[1] + (o * n + idx) * innerW + iw);
}`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function gather(node, ctx) {
  const [D, I] = node.inputs, y = ctx.t(node.outputs[0]);
  const [axis, mode] = node.params;
  if (mode !== 0) return 'GatherElements';
  const d = ctx.t(D), ix = ctx.t(I);
  const esz = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (d.dtype)];
  if (esz % 4 || y.dtype !== d.dtype) return 'element size';
  if (ix.dtype !== I32 && ix.dtype !== I64) ctx.fail('indices must be int32 or int64');
  if (!(axis >= 0 && axis < d.rank)) ctx.fail('axis');
  const want = [...d.dims.slice(0, axis), ...ix.dims, ...d.dims.slice(axis + 1)];
  if (want.length !== y.rank || want.some((v, i) => v !== y.dims[i])) ctx.fail('output shape');
  const w = esz / 4, n = d.dims[axis], innerW = w * numel(d.dims.slice(axis + 1)), J = ix.numel;
  if (!y.numel) return [];
  if (n === 0) return 'empty axis';
  const p = [y.numel * w, ctx.src(D).base, ctx.src(I).base, ctx.src(y.id).base, n, innerW, J, node.index];
  const idx = ix.dtype === I32
    ? `let v = bitcast<i32>(ri(P[2] + j));
  ok = v >= -i32(n) && v < i32(n);
  idx = u32(select(v, v + i32(n), v < 0));`
    : `let lo = ri(P[2] + 2u * j); let hi = ri(P[2] + 2u * j + 1u);
  if (hi == 0u && lo < n) { ok = true; idx = lo; }
  if (hi == 0xffffffffu && lo >= 0u - n && lo != 0u) { ok = true; idx = lo + n; }`;
  const code = wordLoader('rd', ctx.src(D)) + wordLoader('ri', ctx.src(I)) + GATHER_WGSL.replace('IDX', idx);
  return [{ code, params: p, threads: p[0] }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function split(node, ctx) {
  const w = wordsPerElement(node, ctx);
  if (!w) return 'element size';
  const x = ctx.t(node.inputs[0]), [axis] = node.params, xs = strides(x.dims), np = node.params.length;
  // [axis], [axis, sizes...] or [axis, -1]: the output dims say the same (the C core checks they agree)
  if (!(np === 1 || np === 2 || np === 1 + node.outputs.length) || !(axis >= 0 && axis < x.rank)) ctx.fail('axis');
  let at = 0;
  /** @type {Dispatch[]} */
  const out = [];
  for (const id of node.outputs) {
    const y = ctx.t(id);
    if (y.rank !== x.rank || y.dims.some((d, i) => i !== axis && d !== x.dims[i])) ctx.fail('output shapes');
    if (y.numel) out.push(stridedCopy(ctx, x.id, id, w, y.dims, xs, strides(y.dims), at * xs[axis], 0));
    at += y.dims[axis];
  }
  if (at !== x.dims[axis]) ctx.fail('extents along the axis do not sum to the input');
  return out;
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function expand(node, ctx) {
  const w = wordsPerElement(node, ctx, [node.inputs[0], node.outputs[0]]);   // input 1 (the int64 shape) is not read
  if (!w) return 'element size';
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]);
  if (x.rank > y.rank) ctx.fail('input rank exceeds the output rank');
  const pad = [...new Array(y.rank - x.rank).fill(1), ...x.dims], ps = strides(pad);
  if (pad.some((d, i) => d !== 1 && d !== y.dims[i])) ctx.fail(`[${x.dims}] does not broadcast to [${y.dims}]`);
  return [stridedCopy(ctx, x.id, y.id, w, y.dims, pad.map((d, i) => (d === 1 ? 0 : ps[i])), strides(y.dims), 0, 0)];
}

const PAD_WGSL = /* wgsl */ `${MAIN}
  let w = P[4]; let R = P[5];
  var r = t; var src = 0u; var inside = true;
  for (var d = i32(R) - 1; d >= 0; d--) {
    let k = u32(d);
    let yd = P[8u + k]; let q = i32(r % yd); r /= yd;
    let n = i32(P[16u + k]);
    var s = q - pi(24u + k);
    if (s < 0 || s >= n) {
      MODE
    }
    src += u32(s) * P[32u + k];
  }
  for (var j = 0u; j < w; j++) {
    A[P[3] + t * w + j] = select(P[6u + j], rd(P[2] + src * w + j), inside);
  }
}`;
const PAD_MODES = [
  'inside = false; s = 0;',
  'if (n == 1) { s = 0; } else { let p = 2 * (n - 1); let m = ((s % p) + p) % p; s = select(m, p - m, m >= n); }',
  's = clamp(s, 0, n - 1);',
  's = ((s % n) + n) % n;',
];

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function pad(node, ctx) {
  if (node.inputs.length > 1 && node.inputs[1] !== -1) return 'runtime pads';
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]);
  const w = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (x.dtype)] / 4;
  if ((w !== 1 && w !== 2) || y.dtype !== x.dtype) return 'element size';
  const [mode, lo, hi] = node.params, r = x.rank;
  if ((node.params.length !== 3 + r && node.params.length !== 3 + 2 * r) || y.rank !== r || !(mode >= 0 && mode <= 3) || r > 8) ctx.fail('params');
  if (mode !== 0 && y.dims.some((d, i) => d > 0 && x.dims[i] === 0)) ctx.fail('empty input dim');
  const p = [y.numel, 0, ctx.src(x.id).base, ctx.src(y.id).base, w, r, lo >>> 0, hi >>> 0, ...new Array(32).fill(0)];
  const xs = strides(x.dims);
  for (let i = 0; i < r; i++) { p[8 + i] = y.dims[i]; p[16 + i] = x.dims[i]; p[24 + i] = node.params[3 + i] >>> 0; p[32 + i] = xs[i]; }
  return [{ code: wordLoader('rd', ctx.src(x.id)) + PAD_WGSL.replace('MODE', PAD_MODES[mode]), params: p, threads: y.numel }];
}
