// GEMM (with its fused epilogue) and MATMUL (batched, broadcast batch dims) as one strided WGSL shader:
// Y[b,m,n] = act(alpha · Σ_k A[b,m,k]·B[b,k,n] + beta·C[m,n] + R[b,m,n]); each thread computes a 4×4 tile.
// Transposes and broadcast batch dims are strides, so no operand is copied.

import { F32, numel, strides } from '../plan.js';
import { isActivation } from '../opcodes.js';
import { MAIN, actFn, floatLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

// A thread computes a 4×4 tile, or 4×8 when B's rows are read as vectors (weights), unrolled into named
// registers: SwiftShader (and some drivers) spill dynamically indexed private arrays to memory.
const R4 = [0, 1, 2, 3];
/** @param {string} bvec WGSL of B's 4 values at row k (columns n0..n0+3) @param {string | null} bvec2 the next 4 (4×8 tile)
 * @param {string | null} avec A's 4 values at column k (rows m0..m0+3) as one vector, when A is read so */
const mmMain = (bvec, bvec2, avec) => /* wgsl */ `
${MAIN}
  let tilesN = P[22]; let tilesM = P[21];
  let tn = t % tilesN; let r1 = t / tilesN; let tm = r1 % tilesM; let bt = r1 / tilesM;
  let M = P[6]; let N = P[7]; let K = P[8];
  let m0 = tm * 4u; let n0 = tn * ${bvec2 ? 8 : 4}u;
  var abase = P[1]; var bbase = P[2]; var rb = bt;
  for (var d = i32(P[23]) - 1; d >= 0; d--) {   // batch index -> operand offsets (broadcast dims: stride 0)
    let dim = P[24u + u32(d)]; let q = rb % dim; rb /= dim;
    abase += q * P[30u + u32(d)]; bbase += q * P[36u + u32(d)];
  }
${R4.map((i) => `  let a${i} = abase + min(m0 + ${i}u, M - 1u) * P[10];
  let b${i} = bbase + min(n0 + ${i}u, N - 1u) * P[14];`).join('\n')}
  let aks = P[11]; let bks = P[13];
${R4.map((i) => `  var acc${i} = vec4<f32>(); var acd${i} = vec4<f32>();`).join('\n')}
  for (var k = 0u; k < K; k++) {
    let kb = k * bks; let ka = k * aks;
    let bv = ${bvec};
${bvec2 ? `    let bw = ${bvec2};\n` : ''}${avec ? `    let av = ${avec};\n` : ''}${R4.map((i) => `    let x${i} = ${avec ? `av[${i}]` : `xa(a${i} + ka)`}; acc${i} += x${i} * bv;${bvec2 ? ` acd${i} += x${i} * bw;` : ''}`).join('\n')}
  }
  let alpha = pf(17); let beta = pf(18); let a = pf(19); let b = pf(20);
${R4.map((i) => `  if (m0 + ${i}u < M) {
    store(bt, m0 + ${i}u, n0, acc${i}, alpha, beta, a, b);${bvec2 ? `\n    store(bt, m0 + ${i}u, n0 + 4u, acd${i}, alpha, beta, a, b);` : ''}
  }`).join('\n')}
}`;

const MM_STORE = /* wgsl */ `
fn store(bt: u32, m: u32, n0: u32, acc: vec4<f32>, alpha: f32, beta: f32, a: f32, b: f32) {
  let M = P[6]; let N = P[7];
  for (var j = 0u; j < 4u; j++) {
    let n = n0 + j;
    if (n >= N) { break; }
    let yi = (bt * M + m) * N + n;
    var v = alpha * acc[j];
    BIAS
    RESIDUAL
    sY(P[5] + yi, act(v, a, b));
  }
}`;

/** @typedef {{M: number, N: number, K: number, batch: number[][], a: number[], b: number[], c?: number[],
 *   alpha: number, beta: number, act: number, p0: number, p1: number,
 *   A: Src, B: Src, C?: Src, R?: Src, Y: Src}} MatmulGeometry batch = [Y batch dims, A's strides along them,
 *   B's strides] (≤ 6 dims each, stride 0 = broadcast); strides a = [m, k], b = [k, n], c = [m, n] (bias C,
 *   read when given); R is a residual shaped like Y; alpha/beta/p0/p1 are f32 bit patterns
 *  @typedef {import('../wgsl.js').Src} Src */

/** The dispatch of one (batched) matrix product. Also used by CONV for 1×1 stride-1 unpadded convolutions.
 * g.panels: B stored in 16-column panels (b = [16, 1]), which the caller reads as vectors 8 columns a thread
 * (its N % 8 = 0, B aligned weights: see matmul()). @param {MatmulGeometry & {panels?: boolean}} g @returns {Dispatch[]} */
export function matmulDispatch(g) {
  const [dims, sa, sb] = g.batch;
  // B rows of aligned weights are read as vectors, and then a thread takes 8 columns when N allows
  const vec = (g.B.buf === 'W' || g.B.buf === 'H') && g.b[1] === 1 && g.N % 4 === 0 && g.b[0] % 4 === 0 && sb.every((v) => v % 4 === 0) && g.B.base % 4 === 0;
  const wide = vec && g.N % 8 === 0;
  const tilesM = Math.ceil(g.M / 4), tilesN = Math.ceil(g.N / (wide ? 8 : 4));
  const p = [numel(dims) * tilesM * tilesN, g.A.base, g.B.base, g.C?.base ?? 0, g.R?.base ?? 0, g.Y.base, g.M, g.N, g.K,
    0, ...g.a, 0, ...g.b, ...(g.c || [0, 0]), g.alpha >>> 0, g.beta >>> 0, g.p0 >>> 0, g.p1 >>> 0, tilesM, tilesN,
    dims.length, ...[dims, sa, sb].flatMap((v) => [...v, ...new Array(6 - v.length).fill(0)])];
  let code = floatLoader('xa', g.A) + floatLoader('xb', g.B) + actFn(g.act) +
    `fn sY(i: u32, v: f32) { s${g.Y.buf}(i, v); }\n`;
  let bias = '', residual = '';
  if (g.C && g.c) {
    code += floatLoader('xc', g.C);
    bias = 'v += beta * xc(P[3] + m * P[15] + n * P[16]);';
  }
  if (g.R) {
    code += floatLoader('xr', g.R);
    residual = 'v += xr(P[4] + yi);';
  }
  const col = g.panels ? '(n0 >> 4u) * K * 16u + (n0 & 15u)' : 'n0';
  const bvec = vec ? `f${g.B.buf}4(bbase + ${col} + kb)` : 'vec4<f32>(xb(b0 + kb), xb(b1 + kb), xb(b2 + kb), xb(b3 + kb))';
  // likewise A's columns, when its rows are contiguous and padded to 4 (CONV's repacked weights)
  const avec = (g.A.buf === 'W' || g.A.buf === 'H') && g.a[0] === 1 && g.a[1] % 4 === 0 && g.a[1] >= Math.ceil(g.M / 4) * 4 &&
    sa.every((v) => v % 4 === 0) && g.A.base % 4 === 0;
  const main = mmMain(bvec, wide ? `f${g.B.buf}4(bbase + ${col} + 4u + kb)` : null, avec ? `f${g.A.buf}4(abase + m0 + ka)` : null);
  return [{ code: code + MM_STORE.replace('BIAS', bias).replace('RESIDUAL', residual) + main, params: p, threads: p[0] }];
}

/** An operand's strides along Y's batch dims `yb`, numpy-style broadcast: its (right-aligned) batch dims are each 1
 * (stride 0) or Y's; `size` = the elements of one of its matrices.
 * @param {BuildContext} ctx @param {number[]} yb @returns {(d: number[], size: number) => number[]} */
const broadcastStrides = (ctx, yb) => (d, size) => {
  const b = [...new Array(yb.length - (d.length - 2)).fill(1), ...d.slice(0, -2)];
  const st = strides(b).map((v) => v * size);
  if (b.some((v, i) => v !== 1 && v !== yb[i])) ctx.fail('batch dims do not broadcast');
  return b.map((v, i) => (v === 1 ? 0 : st[i]));
};

/** Sources of a node's operands: A, B, C?, R? and Y. @param {BuildContext} ctx @param {PlanNode} node */
function operands(ctx, node) {
  const [A, B, C, R] = node.inputs;
  const opt = (/** @type {number | undefined} */ id) => (id !== undefined && id >= 0 ? ctx.fsrc(id) : undefined);
  return { A: ctx.fsrc(A), B: ctx.fsrc(B), C: opt(C), R: opt(R), Y: ctx.fsrc(node.outputs[0]) };
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
  if (!isActivation(act)) return `activation ${act}`;
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
  return matmulDispatch({ M, N, K, batch: [[], [], []], a: [transA ? 1 : K, transA ? M : 1], b: [transB ? 1 : N, transB ? K : 1],
    alpha, beta, act, p0, p1, c, ...operands(ctx, node) });
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function matmul(node, ctx) {
  const [A, B, C, R] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  if (!ctx.isFloat(A) || !ctx.isFloat(B) || y.dtype !== F32) return 'non-float32 tensors';
  if ((C !== undefined && C >= 0 && !ctx.isFloat(C)) || (R !== undefined && R >= 0 && !ctx.isFloat(R))) return 'non-float32 tensors';
  // params: none, or the fused epilogue [bias mode (0, or 2: C has N elements), act, p0, p1], or that and B's
  // layout 1: a constant B stored as 16-column panels [ceil(N/16), K, 16] (docs/plan-format.md), then N (Y's last dim)
  const pr = node.params;
  if (pr.length !== 0 && pr.length !== 4 && pr.length !== 5 && pr.length !== 6) return 'params';
  const panels = pr.length >= 5;
  if (panels && pr[4] !== 1) return `B layout ${pr[4]}`;
  const [mode, act, p0, p1] = pr.length ? pr : [0, 0, 0, 0];
  if (!isActivation(act)) return `activation ${act}`;
  const hasC = C !== undefined && C >= 0, hasR = R !== undefined && R >= 0;
  if (mode !== (hasC ? 2 : 0) || (!pr.length && (hasC || hasR))) ctx.fail(`bias mode ${mode}`);
  const a = ctx.t(A).dims, b = ctx.t(B).dims, yd = y.dims;
  if (a.length < 2 || b.length < 2 || yd.length < 2) return 'rank';
  const M = a[a.length - 2], K = a[a.length - 1], N = panels ? yd[yd.length - 1] : b[b.length - 1];
  if (panels ? b.length !== 3 || b[0] !== Math.ceil(N / 16) || b[1] !== K || b[2] !== 16 : b[b.length - 2] !== K) ctx.fail('operand shapes do not agree');
  if (yd[yd.length - 2] !== M || yd[yd.length - 1] !== N || (pr.length === 6 && pr[5] !== N)) ctx.fail('operand shapes do not agree');
  // batch dims broadcast numpy-style: each operand's (right-aligned) dim is 1 (stride 0) or Y's
  const yb = yd.slice(0, -2);
  if (yb.length > 6) return 'rank';
  const batchStrides = broadcastStrides(ctx, yb);
  if (hasC && ctx.t(C).numel !== N) ctx.fail(`bias has ${ctx.t(C).numel} elements, needs ${N}`);
  if (hasR && ctx.t(R).numel !== y.numel) ctx.fail('residual shape');
  const batch = [yb, batchStrides(a, M * K), panels ? yb.map(() => 0) : batchStrides(b, K * N)];
  const ops = operands(ctx, node);
  // B panels: a thread's 8 columns are half of one panel (row stride 16), read as vectors (matmulDispatch's wide case)
  if (panels && !((ops.B.buf === 'W' || ops.B.buf === 'H') && N % 8 === 0 && ops.B.base % 4 === 0)) return 'B panels not readable as vectors';
  return matmulDispatch({ M, N, K, batch, a: [K, 1], b: panels ? [16, 1] : [N, 1], panels, alpha: 0x3f800000, beta: 0x3f800000, act, p0, p1,
    c: hasC ? [0, 1] : undefined, ...ops, C: hasC ? ops.C : undefined, R: hasR ? ops.R : undefined });
}

const f32bits = new Float32Array(1), u32bits = new Uint32Array(f32bits.buffer);
/** The f32 bit pattern of 1 / (the f32 whose bits are b). @param {number} b */
const reciprocalBits = (b) => { u32bits[0] = b; f32bits[0] = 1 / f32bits[0]; return u32bits[0]; };

/** Rows of the scratch buffer replaced by their softmax, one thread a row (in place: a row is read before it is
 * written); first, with a mask, the mask's row added (xm), with causal, fill added past the row's diagonal.
 * P: [rows, base, L, Lq, mask base, mask row stride, Lk - Lq + diag, fill, batch rank, batch dims[6], mask strides[6]]
 * @param {boolean} mask @param {boolean} causal */
const scratchSoftmax = (mask, causal) => /* wgsl */ `${MAIN}
  let L = P[2]; let base = P[1] + t * L;
${mask || causal ? `  let i = t % P[3]; var rb = t / P[3]; var mo = P[4] + i * P[5];
  for (var d = i32(P[8]) - 1; d >= 0; d--) {   // head index -> the mask's batch offset (broadcast dims: stride 0)
    let dim = P[9u + u32(d)]; mo += (rb % dim) * P[15u + u32(d)]; rb /= dim;
  }
  for (var l = 0u; l < L; l++) {
    var x = fS(base + l);
${mask ? '    x += xm(mo + l);\n' : ''}${causal ? '    if (i32(l) > i32(i) + pi(6)) { x += pf(7); }\n' : ''}    sS(base + l, x);
  }
` : ''}  var mx = fS(base);
  for (var l = 1u; l < L; l++) { mx = max(mx, fS(base + l)); }
  var s = 0.0;
  for (var l = 0u; l < L; l++) { s += exp(fS(base + l) - mx); }
  let inv = 1.0 / s;
  for (var l = 0u; l < L; l++) { sS(base + l, exp(fS(base + l) - mx) * inv); }
}`;

/** ATTENTION: softmax(scale · Q·Kt + mask [+ causal fill])·V as the wasm kernel computes it, here as three
 * dispatches through the scratch buffer (all heads' scores at once: the GPU has the memory the wasm kernel saves).
 * @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function attention(node, ctx) {
  const [Q, Kt, V, M] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  const hasMask = M !== undefined && M >= 0;
  if (![Q, Kt, V, ...(hasMask ? [M] : [])].every((id) => ctx.isFloat(id)) || y.dtype !== F32) return 'non-float32 tensors';
  const [kind, scale, , causal, diag, fill] = node.params;
  if ((node.params.length !== 3 && node.params.length !== 6) || kind < 0 || kind > 2 || (causal !== undefined && causal !== 0 && causal !== 1)) ctx.fail('params');
  const q = ctx.t(Q).dims, k = ctx.t(Kt).dims, v = ctx.t(V).dims, yd = y.dims;
  if (q.length < 2 || k.length < 2 || v.length < 2 || yd.length < 2 || yd.length > 8) return 'rank';
  const S = q[q.length - 2], D = q[q.length - 1], T = k[k.length - 1], DV = v[v.length - 1];
  if (k[k.length - 2] !== D || v[v.length - 2] !== T || yd[yd.length - 2] !== S || yd[yd.length - 1] !== DV) ctx.fail('operand shapes do not agree');
  const yb = yd.slice(0, -2);
  if (yb.length > 6) return 'rank';
  const batchStrides = broadcastStrides(ctx, yb);
  const heads = numel(yb), scores = ctx.scratch(heads * S * T);
  const alpha = kind === 0 ? 0x3f800000 : kind === 1 ? scale >>> 0 : reciprocalBits(scale >>> 0);
  const plain = { beta: 0x3f800000, act: 0, p0: 0, p1: 0 };
  const qk = matmulDispatch({ M: S, N: T, K: D, batch: [yb, batchStrides(q, S * D), batchStrides(k, D * T)], a: [D, 1], b: [T, 1],
    alpha, ...plain, A: ctx.fsrc(Q), B: ctx.fsrc(Kt), Y: scores });
  // the mask [..., Lq | 1, Lk] right-aligned to the scores [...yb, S, T]: a dim of 1 repeats (stride 0)
  let maskWords = [0, 0], maskStrides = yb.map(() => 0), code = '';
  if (hasMask) {
    const md = ctx.t(M).dims;
    if (md.length < 1 || md.length > yd.length || md[md.length - 1] !== T) ctx.fail('mask shape');
    const full = [...new Array(yd.length - md.length).fill(1), ...md];
    if (full[full.length - 2] !== 1 && full[full.length - 2] !== S) ctx.fail('mask shape');
    maskStrides = batchStrides(full, full[full.length - 2] * T);
    const src = ctx.fsrc(M);
    maskWords = [src.base, full[full.length - 2] === 1 ? 0 : T];
    code = floatLoader('xm', src);
  }
  const pad6 = (/** @type {number[]} */ a) => [...a, ...new Array(6 - a.length).fill(0)];
  const softmaxRows = { code: code + scratchSoftmax(hasMask, causal === 1),
    params: [heads * S, scores.base, T, S, ...maskWords, (T - S + (causal === 1 ? diag | 0 : 0)) >>> 0, causal === 1 ? fill >>> 0 : 0,
      yb.length, ...pad6(yb), ...pad6(maskStrides)], threads: heads * S };
  const pv = matmulDispatch({ M: S, N: DV, K: T, batch: [yb, strides(yb).map((x) => x * S * T), batchStrides(v, T * DV)], a: [T, 1], b: [DV, 1],
    alpha: 0x3f800000, ...plain, A: scores, B: ctx.fsrc(V), Y: ctx.fsrc(node.outputs[0]) });
  return [...qk, softmaxRows, ...pv];
}
