// Row-wise kernels: SOFTMAX, LAYERNORM, REDUCE, POOL, GLOBAL_POOL (float32). One thread per output row;
// SOFTMAX and LAYERNORM with few, long contiguous rows use one workgroup per row instead (a tree reduction
// in workgroup memory), so a hundred rows still spread over a GPU. (Barriers are costly on SwiftShader,
// so rows that are many enough to fill a GPU by themselves keep a thread each.)

import { F32, numel, strides } from '../plan.js';
import { MAIN, MATH, WG, floatLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

/** Rows at least this long, when fewer than MANY_ROWS, get a workgroup each. */
const LONG_ROW = 128, MANY_ROWS = 1024;

// Workgroup-per-row skeleton: \`row\` (uniform), \`li\` (lane), \`red(v, op)\` reduces across the lanes.
const ROW_MAIN = /* wgsl */ `
var<workgroup> wsum: array<f32, ${WG}>;
fn red(v: f32, is_max: bool, li: u32) -> f32 {
  wsum[li] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (li < s) { wsum[li] = select(wsum[li] + wsum[li + s], max(wsum[li], wsum[li + s]), is_max); }
    workgroupBarrier();
  }
  let r = wsum[0];
  workgroupBarrier();
  return r;
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= P[0]) { return; }`;

const NEG_INF = 'ninf()';
const POS_INF = 'pinf()';

/** @param {PlanNode} node @param {BuildContext} ctx */
const floats = (node, ctx) => [...node.inputs, ...node.outputs].every((id) => id < 0 || ctx.isFloat(id)) && ctx.t(node.outputs[0]).dtype === F32;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function softmax(node, ctx) {
  if (!floats(node, ctx)) return 'non-float32 tensors';
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const [kind, a0, a1] = node.params;
  const d = ctx.t(X).dims;
  if (node.params.length !== 3 || (kind !== 0 && kind !== 1) || !(a0 >= 0 && a0 < a1 && a1 <= d.length) || y.numel !== ctx.t(X).numel) ctx.fail('params');
  const L = numel(d.slice(a0, a1)), inner = numel(d.slice(a1)), outer = numel(d.slice(0, a0));
  const write = kind === 1 ? 'x0(i) - mx - log(s)' : 'exp(x0(i) - mx) * inv';
  if (inner === 1 && L >= LONG_ROW && outer < MANY_ROWS) {
    const code = floatLoader('x0', ctx.fsrc(X)) + /* wgsl */ `${ROW_MAIN}
  let L = P[3]; let base = row * L;
  var m = ${NEG_INF};
  for (var l = li; l < L; l += ${WG}u) { m = max(m, x0(P[1] + base + l)); }
  let mx = red(m, true, li);
  var a = 0.0;
  for (var l = li; l < L; l += ${WG}u) { a += exp(x0(P[1] + base + l) - mx); }
  let s = red(a, false, li);
  let inv = 1.0 / s;
  for (var l = li; l < L; l += ${WG}u) { let i = P[1] + base + l; sA(P[2] + base + l, ${write}); }
}`;
    return [{ code, params: [outer, ctx.fsrc(X).base, ctx.fsrc(y.id).base, L, 1], threads: outer * WG }];
  }
  const code = floatLoader('x0', ctx.fsrc(X)) + /* wgsl */ `${MAIN}
  let L = P[3]; let inner = P[4];
  let base = (t / inner) * L * inner + t % inner;
  var mx = ${NEG_INF};
  for (var l = 0u; l < L; l++) { mx = max(mx, x0(P[1] + base + l * inner)); }
  var s = 0.0;
  for (var l = 0u; l < L; l++) { s += exp(x0(P[1] + base + l * inner) - mx); }
  let inv = 1.0 / s;
  for (var l = 0u; l < L; l++) {
    let i = P[1] + base + l * inner;
    sA(P[2] + base + l * inner, ${write});
  }
}`;
  return [{ code, params: [outer * inner, ctx.fsrc(X).base, ctx.fsrc(y.id).base, L, inner], threads: outer * inner }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function layernorm(node, ctx) {
  if (!floats(node, ctx)) return 'non-float32 tensors';
  const [X, S = -1, B = -1] = node.inputs, [Y, Mn = -1, Iv = -1] = node.outputs;
  const d = ctx.t(X).dims, [axis, eps] = node.params;
  if (node.params.length !== 2 || !(axis >= 0 && axis < d.length)) ctx.fail('params');
  const rows = numel(d.slice(0, axis)), D = numel(d.slice(axis));
  if (ctx.t(Y).numel !== rows * D) ctx.fail('output shape');
  if ((S >= 0 && ctx.t(S).numel !== D) || (B >= 0 && ctx.t(B).numel !== D)) ctx.fail('scale/bias must hold D values');
  if ((Mn >= 0 && ctx.t(Mn).numel !== rows) || (Iv >= 0 && ctx.t(Iv).numel !== rows)) ctx.fail('mean/inv-std outputs');
  const p = [rows, ctx.fsrc(X).base, ctx.fsrc(Y).base, D, 0, 0, 0, 0, eps >>> 0];
  let code = floatLoader('x0', ctx.fsrc(X));
  let term = '(x0(P[1] + base + j) - mean) * inv';
  if (S >= 0) { p[4] = ctx.fsrc(S).base; code += floatLoader('xs', ctx.fsrc(S)); term += ' * xs(P[4] + j)'; }
  if (B >= 0) { p[5] = ctx.fsrc(B).base; code += floatLoader('xb', ctx.fsrc(B)); term += ' + xb(P[5] + j)'; }
  let stats = '';
  if (Mn >= 0) { p[6] = ctx.fsrc(Mn).base; stats += 'sA(P[6] + t, mean);'; }
  if (Iv >= 0) { p[7] = ctx.fsrc(Iv).base; stats += 'sA(P[7] + t, inv);'; }
  if (D >= LONG_ROW && rows < MANY_ROWS) {
    code += /* wgsl */ `${ROW_MAIN}
  let D = P[3]; let base = row * D; let t = row;
  var a = 0.0;
  for (var j = li; j < D; j += ${WG}u) { a += x0(P[1] + base + j); }
  let mean = red(a, false, li) / f32(D);
  var q = 0.0;
  for (var j = li; j < D; j += ${WG}u) { let c = x0(P[1] + base + j) - mean; q += c * c; }
  let inv = 1.0 / sqrt(red(q, false, li) / f32(D) + pf(8));
  for (var j = li; j < D; j += ${WG}u) { sA(P[2] + base + j, ${term}); }
  if (li == 0u) { ${stats} }
}`;
    return [{ code, params: p, threads: rows * WG }];
  }
  code += /* wgsl */ `${MAIN}
  let D = P[3]; let base = t * D;
  var s = 0.0;
  for (var j = 0u; j < D; j++) { s += x0(P[1] + base + j); }
  let mean = s / f32(D);
  var q = 0.0;
  for (var j = 0u; j < D; j++) { let c = x0(P[1] + base + j) - mean; q += c * c; }
  let inv = 1.0 / sqrt(q / f32(D) + pf(8));
  for (var j = 0u; j < D; j++) { sA(P[2] + base + j, ${term}); }
  ${stats}
}`;
  return [{ code, params: p, threads: rows }];
}

// REDUCE kinds: [accumulator init, per-element update of acc with v, final value of acc]
const REDUCE = [
  ['0.0', 'acc + v', 'acc'], ['0.0', 'acc + v', 'acc / f32(P[5])'], [NEG_INF, 'max(acc, v)', 'acc'],
  [POS_INF, 'min(acc, v)', 'acc'], ['1.0', 'acc * v', 'acc'], ['0.0', 'acc + abs(v)', 'acc'],
  ['0.0', 'acc + v * v', 'sqrt(acc)'], ['0.0', 'acc + v * v', 'acc'], ['0.0', 'acc + v', 'log(acc)'],
];

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function reduce(node, ctx) {
  if (!floats(node, ctx)) return 'non-float32 tensors';
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const [kind, mask] = node.params;
  const d = ctx.t(X).dims, xs = strides(d);
  if (node.params.length !== 2 || !(kind >= 0 && kind <= 9)) ctx.fail('params');
  const kept = d.map((_, i) => i).filter((i) => !(mask >> i & 1));
  const red = d.map((_, i) => i).filter((i) => mask >> i & 1);
  const R = numel(red.map((i) => d[i]));
  if (numel(kept.map((i) => d[i])) !== y.numel) ctx.fail('output size');
  if (R === 0) return 'empty reduction';
  const p = [y.numel, ctx.fsrc(X).base, ctx.fsrc(y.id).base, kept.length, red.length, R, ...new Array(32).fill(0)];
  kept.forEach((i, k) => { p[6 + k] = d[i]; p[14 + k] = xs[i]; });
  red.forEach((i, k) => { p[22 + k] = d[i]; p[30 + k] = xs[i]; });
  const lse = kind === 9;
  const [init, upd, fin] = lse ? ['0.0', 'acc + exp(v - mx)', 'log(acc) + mx'] : REDUCE[kind];
  const code = floatLoader('x0', ctx.fsrc(X)) + /* wgsl */ `
fn at(base: u32, j: u32) -> u32 {
  var r = j; var o = base;
  for (var d = i32(P[4]) - 1; d >= 0; d--) { let dim = P[22u + u32(d)]; o += (r % dim) * P[30u + u32(d)]; r /= dim; }
  return o;
}
${MAIN}
  var r = t; var base = P[1];
  for (var d = i32(P[3]) - 1; d >= 0; d--) { let dim = P[6u + u32(d)]; base += (r % dim) * P[14u + u32(d)]; r /= dim; }
  ${lse ? `var mx = ${NEG_INF};\n  for (var j = 0u; j < P[5]; j++) { mx = max(mx, x0(at(base, j))); }` : ''}
  var acc = ${init};
  for (var j = 0u; j < P[5]; j++) { let v = x0(at(base, j)); acc = ${upd}; }
  sA(P[2] + t, ${fin});
}`;
  return [{ code, params: p, threads: y.numel }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function pool(node, ctx) {
  if (!floats(node, ctx)) return 'non-float32 tensors';
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const pr = node.params, [kind, nsp, cip, lp] = pr;
  const x = ctx.t(X).dims;
  if (nsp !== 1 && nsp !== 2) return `${nsp} spatial dims`;
  // (+ 1 word: ceil_mode, which only the output size depends on: taken from Y here)
  if ((pr.length !== 4 + 5 * nsp && pr.length !== 5 + 5 * nsp) || x.length !== 2 + nsp || y.dims.length !== 2 + nsp || !(kind >= 0 && kind <= 2)) ctx.fail('params');
  // [kernel, stride, dilation, pad_begin, pad_end] per spatial dim; 1-D pools get a unit H dim.
  const dimsH = nsp === 2 ? pr.slice(4, 9) : [1, 1, 1, 0, 0], dimsW = pr.slice(4 + 5 * (nsp - 1), 9 + 5 * (nsp - 1));
  const [H, W] = nsp === 2 ? [x[2], x[3]] : [1, x[2]], [OH, OW] = nsp === 2 ? [y.dims[2], y.dims[3]] : [1, y.dims[2]];
  if (x[0] !== y.dims[0] || x[1] !== y.dims[1]) ctx.fail('shape');
  const p = [y.numel, ctx.fsrc(X).base, ctx.fsrc(y.id).base, H, W, OH, OW, dimsH[0], dimsW[0], dimsH[1], dimsW[1],
    dimsH[2], dimsW[2], dimsH[3], dimsW[3], dimsH[4], dimsW[4], lp];
  const [init, upd, fin] = [
    [NEG_INF, 'acc = max(acc, v);', 'acc'],
    ['0.0', 'acc += v;', 'acc / f32(cnt)'],
    ['0.0', 'acc += pow_(abs(v), f32(P[17]));', 'pow(acc, 1.0 / f32(P[17]))'],
  ][kind];
  // count_include_pad counts taps inside [-pad_begin, in + pad_end); otherwise taps inside the input.
  const countPad = kind === 1 && cip === 1;
  const code = floatLoader('x0', ctx.fsrc(X)) + MATH + /* wgsl */ `${MAIN}
  let OW = P[6]; let OH = P[5]; let H = i32(P[3]); let Wd = i32(P[4]);
  let ow = t % OW; let r1 = t / OW; let oh = r1 % OH; let nc = r1 / OH;
  let iy0 = i32(oh * P[9]) - i32(P[13]); let ix0 = i32(ow * P[10]) - i32(P[14]);
  let xc = P[1] + nc * P[3] * P[4];
  var acc = ${init}; var cnt = 0u;
  for (var ky = 0u; ky < P[7]; ky++) {
    let iy = iy0 + i32(ky * P[11]);
    for (var kx = 0u; kx < P[8]; kx++) {
      let ix = ix0 + i32(kx * P[12]);
      ${countPad ? 'if (iy < H + i32(P[15]) && ix < Wd + i32(P[16])) { cnt++; }' : ''}
      if (iy >= 0 && iy < H && ix >= 0 && ix < Wd) {
        let v = x0(xc + u32(iy) * P[4] + u32(ix));
        ${upd}
        ${countPad ? '' : 'cnt++;'}
      }
    }
  }
  sA(P[2] + t, ${fin});
}`;
  return [{ code, params: p, threads: y.numel }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function globalPool(node, ctx) {
  if (!floats(node, ctx)) return 'non-float32 tensors';
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const x = ctx.t(X).dims, [kind] = node.params;
  if (x.length < 2 || node.params.length !== 1 || (kind !== 0 && kind !== 1) || y.numel !== x[0] * x[1]) ctx.fail('params');
  const S = numel(x.slice(2));
  if (S === 0) return 'empty spatial extent';
  const code = floatLoader('x0', ctx.fsrc(X)) + /* wgsl */ `${MAIN}
  let S = P[3]; let base = P[1] + t * S;
  var acc = ${kind === 0 ? NEG_INF : '0.0'};
  for (var i = 0u; i < S; i++) { let v = x0(base + i); acc = ${kind === 0 ? 'max(acc, v)' : 'acc + v'}; }
  sA(P[2] + t, ${kind === 0 ? 'acc' : 'acc / f32(S)'});
}`;
  return [{ code, params: [y.numel, ctx.fsrc(X).base, ctx.fsrc(y.id).base, S], threads: y.numel }];
}
