// GEMM (with its fused epilogue) and MATMUL (batched, broadcast batch dims) as one strided WGSL shader:
// Y[b,m,n] = act(alpha · Σ_k A[b,m,k]·B[b,k,n] + beta·C[m,n] + R[b,m,n]); each thread computes a 4×4 tile.
// Transposes and broadcast batches are strides, so no operand is copied.

import { F32, numel } from '../plan.js';
import { MAIN, actFn, floatLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

const MM_WGSL = /* wgsl */ `
${MAIN}
  let tilesN = P[22]; let tilesM = P[21];
  let tn = t % tilesN; let r1 = t / tilesN; let tm = r1 % tilesM; let bt = r1 / tilesM;
  let M = P[6]; let N = P[7]; let K = P[8];
  let m0 = tm * 4u; let n0 = tn * 4u;
  var ar: array<u32, 4>; var bc: array<u32, 4>;
  for (var i = 0u; i < 4u; i++) {
    ar[i] = P[1] + bt * P[9] + min(m0 + i, M - 1u) * P[10];
    bc[i] = P[2] + bt * P[12] + min(n0 + i, N - 1u) * P[14];
  }
  let aks = P[11]; let bks = P[13];
  var acc: array<vec4<f32>, 4>;
  for (var k = 0u; k < K; k++) {
    let bv = vec4<f32>(xb(bc[0] + k * bks), xb(bc[1] + k * bks), xb(bc[2] + k * bks), xb(bc[3] + k * bks));
    for (var i = 0u; i < 4u; i++) { acc[i] += xa(ar[i] + k * aks) * bv; }
  }
  let alpha = pf(17); let beta = pf(18); let a = pf(19); let b = pf(20);
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + i;
    if (m >= M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + j;
      if (n >= N) { break; }
      let yi = (bt * M + m) * N + n;
      var v = alpha * acc[i][j];
      BIAS
      RESIDUAL
      sA(P[5] + yi, act(v, a, b));
    }
  }
}`;

/** @param {BuildContext} ctx @param {PlanNode} node @param {{M: number, N: number, K: number, batch: number,
 *  a: number[], b: number[], alpha: number, beta: number, act: number, p0: number, p1: number, c?: number[]}} g
 *  strides a = [batch, m, k], b = [batch, k, n], c = [m, n] @returns {Dispatch[]} */
function dispatch(ctx, node, g) {
  const [A, B, C, R] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  const tilesM = Math.ceil(g.M / 4), tilesN = Math.ceil(g.N / 4);
  const p = [g.batch * tilesM * tilesN, ctx.src(A).base, ctx.src(B).base, 0, 0, ctx.src(y.id).base, g.M, g.N, g.K,
    ...g.a, ...g.b, ...(g.c || [0, 0]), g.alpha >>> 0, g.beta >>> 0, g.p0 >>> 0, g.p1 >>> 0, tilesM, tilesN];
  let code = floatLoader('xa', ctx.src(A)) + floatLoader('xb', ctx.src(B)) + actFn(g.act);
  let bias = '', residual = '';
  if (g.c && C !== undefined && C >= 0) {
    const s = ctx.src(C);
    p[3] = s.base;
    code += floatLoader('xc', s);
    bias = 'v += beta * xc(P[3] + m * P[15] + n * P[16]);';
  }
  if (R !== undefined && R >= 0) {
    const s = ctx.src(R);
    p[4] = s.base;
    code += floatLoader('xr', s);
    residual = 'v += xr(P[4] + yi);';
  }
  return [{ code: code + MM_WGSL.replace('BIAS', bias).replace('RESIDUAL', residual), params: p, threads: p[0] }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function gemm(node, ctx) {
  const [A, B, C, R] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  if (!ctx.isFloat(A) || !ctx.isFloat(B) || y.dtype !== F32) return 'non-float32 tensors';
  if ((C !== undefined && C >= 0 && !ctx.isFloat(C)) || (R !== undefined && R >= 0 && !ctx.isFloat(R))) return 'non-float32 tensors';
  const pr = node.params;
  if (pr.length !== 8) return 'params';
  const [transA, transB, alpha, beta, mode, act, p0, p1] = pr;
  if (act < 0 || act > 3) return `activation ${act}`;
  const a = ctx.t(A).dims, b = ctx.t(B).dims;
  if (a.length !== 2 || b.length !== 2 || y.dims.length !== 2) return 'rank';
  const [M, N] = y.dims, K = transA ? a[0] : a[1];
  if ((transA ? a[1] : a[0]) !== M || (transB ? b[1] : b[0]) !== K || (transB ? b[0] : b[1]) !== N) ctx.fail('operand shapes do not agree');
  if (R !== undefined && R >= 0 && ctx.t(R).numel !== M * N) ctx.fail('residual shape');
  /** @type {Record<number, [number, number, number]>} bias mode -> element count, strides (m, n) */
  const modes = { 1: [M, 1, 0], 2: [N, 0, 1], 3: [M * N, N, 1], 4: [1, 0, 0] };
  let c;
  if (mode !== 0) {
    const m = modes[mode];
    if (!m || C === undefined || C < 0) ctx.fail(`bias mode ${mode}`);
    if (ctx.t(C).numel !== m[0]) ctx.fail(`bias has ${ctx.t(C).numel} elements, mode ${mode} needs ${m[0]}`);
    c = [m[1], m[2]];
  }
  return dispatch(ctx, node, { M, N, K, batch: 1, a: [0, transA ? 1 : K, transA ? M : 1], b: [0, transB ? 1 : N, transB ? K : 1],
    alpha, beta, act, p0, p1, c });
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function matmul(node, ctx) {
  const [A, B] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  if (node.inputs.length !== 2 || !ctx.isFloat(A) || !ctx.isFloat(B) || y.dtype !== F32) return 'non-float32 tensors';
  const a = ctx.t(A).dims, b = ctx.t(B).dims, yd = y.dims;
  if (a.length < 2 || b.length < 2 || yd.length < 2) return 'rank';
  const M = a[a.length - 2], K = a[a.length - 1], N = b[b.length - 1];
  if (b[b.length - 2] !== K || yd[yd.length - 2] !== M || yd[yd.length - 1] !== N) ctx.fail('operand shapes do not agree');
  const batch = numel(yd.slice(0, -2));
  // A batch operand is either broadcast whole (one matrix) or matches Y's batch exactly; mixed broadcasts
  // (e.g. [2,1] x [1,3]) fall back to the wasm core.
  const stride = (/** @type {number[]} */ d, /** @type {number} */ size) => {
    const n = numel(d.slice(0, -2));
    return n === 1 ? 0 : n === batch ? size : -1;
  };
  const sa = stride(a, M * K), sb = stride(b, K * N);
  if (sa < 0 || sb < 0) return 'mixed batch broadcast';
  return dispatch(ctx, node, { M, N, K, batch, a: [sa, K, 1], b: [sb, N, 1], alpha: 0x3f800000, beta: 0, act: 0, p0: 0, p1: 0 });
}
