// RESIZE (the packager's per-dimension index/weight tables, read from the parameter block) and
// CONV_TRANSPOSE (gathered per output element: no scatter, no atomics). One thread per output element.

import { DTYPE_SIZE, F32, strides } from '../plan.js';
import { MAIN, floatLoader, wordLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

// P: [0] threads, [1] x base, [2] y base, [3] rank, [4] words per element, [5] weighted, [6] extrapolation
// value; per dim k at 8 + 5k: y extent, x stride, K (0 = identity), index table at, weight table at.
// An output reads the extrapolation value when any of its taps is -1, as the core does.
const RESIZE_WGSL = /* wgsl */ `
fn dsc(k: u32, f: u32) -> u32 { return P[8u + 5u * k + f]; }
${MAIN}
  let R = P[3];
  var o: array<u32, 8>;
  var r = t;
  for (var d = i32(R) - 1; d >= 0; d--) { let k = u32(d); o[k] = r % dsc(k, 0u); r /= dsc(k, 0u); }
  var ext = false; var total = 1u;
  for (var k = 0u; k < R; k++) {
    let K = dsc(k, 2u);
    for (var q = 0u; q < K; q++) { if (pi(dsc(k, 3u) + o[k] * K + q) < 0) { ext = true; } }
    total *= max(K, 1u);
  }
  let w = P[4];
  if (ext) { A[P[2] + t] = P[6]; return; }
  var acc = 0.0;
  for (var j = 0u; j < total; j++) {
    var rj = j; var src = 0u; var wt = 1.0;
    for (var d = i32(R) - 1; d >= 0; d--) {
      let k = u32(d); let K = dsc(k, 2u);
      if (K == 0u) { src += o[k] * dsc(k, 1u); continue; }
      let q = rj % K; rj /= K;
      let e = o[k] * K + q;
      src += u32(pi(dsc(k, 3u) + e)) * dsc(k, 1u);
      if (P[5] != 0u) { wt *= pf(dsc(k, 4u) + e); }
    }
    if (P[5] != 0u) { acc += wt * bitcast<f32>(rd(P[1] + src)); }
    else { for (var i = 0u; i < w; i++) { A[P[2] + t * w + i] = rd(P[1] + src * w + i); } }
  }
  if (P[5] != 0u) { A[P[2] + t] = bitcast<u32>(acc); }
}`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function resize(node, ctx) {
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]), pr = node.params;
  const size = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (x.dtype)];
  if ((size !== 4 && size !== 8) || y.dtype !== x.dtype) return 'element size';
  const r = x.rank, weighted = pr[0] === 1, xs = strides(x.dims);
  if (r < 1 || r > 8 || y.rank !== r || (pr[0] !== 0 && pr[0] !== 1) || (weighted && x.dtype !== F32)) ctx.fail('params');
  const p = [y.numel, ctx.src(x.id).base, ctx.src(y.id).base, r, size / 4, weighted ? 1 : 0, pr[1] >>> 0, 0, ...new Array(40).fill(0)];
  let pos = 2, extrap = false;
  for (let k = 0; k < r; k++) {
    const K = pr[pos++];
    if (!(K >= 0 && K <= 1024) || (!weighted && K > 1)) ctx.fail('taps');
    p[8 + 5 * k] = y.dims[k]; p[9 + 5 * k] = xs[k]; p[10 + 5 * k] = K;
    if (K === 0) { if (y.dims[k] !== x.dims[k]) ctx.fail('identity dim changes size'); continue; }
    const cnt = y.dims[k] * K;
    if (pos + cnt * (weighted ? 2 : 1) > pr.length) ctx.fail('tables');
    const idx = pr.subarray(pos, pos + cnt);
    if (idx.some((v) => v < -1 || v >= x.dims[k])) ctx.fail('index outside the input');
    extrap ||= idx.some((v) => v < 0);
    p[11 + 5 * k] = p.length;
    p.push(...idx);
    pos += cnt;
    if (weighted) { p[12 + 5 * k] = p.length; p.push(...pr.subarray(pos, pos + cnt)); pos += cnt; }
  }
  if (pos !== pr.length) ctx.fail('parameter words left over');
  if (extrap && x.dtype !== F32) ctx.fail('extrapolation needs float32');
  return [{ code: wordLoader('rd', ctx.src(x.id)) + RESIZE_WGSL, params: p, threads: y.numel }];
}

// P: [0] threads, [1] x, [2] w, [3] bias, [4] y, [5] Cin, [6] Cout, [7] group, [8..11] H, W, OH, OW,
// [12..19] kh, kw, sh, sw, dh, dw, ph, pw (pads signed)
const CT_WGSL = /* wgsl */ `${MAIN}
  let OW = P[11]; let OH = P[10]; let Cout = P[6]; let G = P[7];
  let ox = i32(t % OW); let r1 = t / OW; let oy = i32(r1 % OH); let r2 = r1 / OH; let co = r2 % Cout; let n = r2 / Cout;
  let cog = Cout / G; let cig = P[5] / G; let g = co / cog;
  let kh = P[12]; let kw = P[13]; let sh = i32(P[14]); let sw = i32(P[15]);
  var acc = BIAS;
  for (var c = 0u; c < cig; c++) {
    let ci = g * cig + c;
    let xc = P[1] + (n * P[5] + ci) * P[8] * P[9];
    let wc = P[2] + (ci * cog + co % cog) * kh * kw;
    for (var ky = 0u; ky < kh; ky++) {
      let ny = oy + pi(18) - i32(ky) * i32(P[16]);
      if (ny < 0 || ny % sh != 0 || ny / sh >= i32(P[8])) { continue; }
      for (var kx = 0u; kx < kw; kx++) {
        let nx = ox + pi(19) - i32(kx) * i32(P[17]);
        if (nx < 0 || nx % sw != 0 || nx / sw >= i32(P[9])) { continue; }
        acc += x0(xc + u32(ny / sh) * P[9] + u32(nx / sw)) * xw(wc + ky * kw + kx);
      }
    }
  }
  sA(P[4] + t, acc);
}`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function convTranspose(node, ctx) {
  const [X, Wt, B = -1] = node.inputs, y = ctx.t(node.outputs[0]);
  if (![X, Wt, B].every((id) => id < 0 || ctx.isFloat(id)) || y.dtype !== F32) return 'non-float32 tensors';
  const x = ctx.t(X).dims, w = ctx.t(Wt).dims, pr = node.params, [nsp, G] = pr;
  if (nsp !== 1 && nsp !== 2) return `${nsp} spatial dims`;
  // (+ nsp words: end_adjust, which only the output size depends on: taken from Y here)
  if ((pr.length !== 2 + 3 * nsp && pr.length !== 2 + 4 * nsp) || x.length !== 2 + nsp || w.length !== 2 + nsp || y.rank !== 2 + nsp) ctx.fail('params');
  const Cin = x[1], Cout = y.dims[1];
  if (!(G >= 1) || Cin % G || Cout % G || w[0] !== Cin || w[1] !== Cout / G || y.dims[0] !== x[0]) ctx.fail('shapes');
  if (B >= 0 && ctx.t(B).numel !== Cout) ctx.fail('bias');
  // 1-D: a unit H dim
  const [H, Wd, OH, OW, kh, kw] = nsp === 2 ? [x[2], x[3], y.dims[2], y.dims[3], w[2], w[3]] : [1, x[2], 1, y.dims[2], 1, w[2]];
  const [sh, dh, ph] = nsp === 2 ? pr.slice(2, 5) : [1, 1, 0], [sw, dw, pw] = pr.slice(2 + 3 * (nsp - 1), 5 + 3 * (nsp - 1));
  if (!(sh >= 1 && sw >= 1 && dh >= 1 && dw >= 1)) ctx.fail('stride/dilation');
  const p = [y.numel, ctx.fsrc(X).base, ctx.fsrc(Wt).base, B >= 0 ? ctx.fsrc(B).base : 0, ctx.fsrc(y.id).base, Cin, Cout, G,
    H, Wd, OH, OW, kh, kw, sh, sw, dh, dw, ph >>> 0, pw >>> 0];
  const code = floatLoader('x0', ctx.fsrc(X)) + floatLoader('xw', ctx.fsrc(Wt)) + (B >= 0 ? floatLoader('xb', ctx.fsrc(B)) : '') +
    CT_WGSL.replace('BIAS', B >= 0 ? 'xb(P[3] + co)' : '0.0');
  return [{ code, params: p, threads: y.numel }];
}
