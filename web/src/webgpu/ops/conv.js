// CONV, WINOGRAD_CONV and DEPTHWISE_CONV with the fused epilogue y = act(acc + bias + residual).
//
// CONV runs as a direct convolution over weights repacked at load time from MR=6 row panels into
// [G][K][Mpad] (K = Cin/G·kh·kw, Mpad = Cout/G rounded up to 8), so a thread computing 8 output channels
// reads its weights of one tap as two vectors; 1×1 stride-1 unpadded convolutions are matrix products.
// WINOGRAD_CONV runs Winograd F(2×2, 3×3) on the plan's transformed filters U; WINOGRAD_CONV_F4 (the core's
// F(4×4, 3×3): its gain is fewer multiplies, a CPU's bottleneck) runs the same shaders on U rebuilt for F(2×2).

import { F32, OP } from '../plan.js';
import { isActivation } from '../opcodes.js';
import { MAIN, actFn, floatLoader, vec4Loader } from '../wgsl.js';
import { matmulDispatch } from './matmul.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

const up8 = (/** @type {number} */ n) => Math.ceil(n / 8) * 8;

/** Spatial geometry from X/Y shapes (rank 3 = 1-D conv, H = 1). @param {number[]} x @param {number[]} y */
function spatial(x, y) {
  if (x.length === 4 && y.length === 4) return { B: x[0], Cin: x[1], H: x[2], W: x[3], Cout: y[1], OH: y[2], OW: y[3] };
  if (x.length === 3 && y.length === 3) return { B: x[0], Cin: x[1], H: 1, W: x[2], Cout: y[1], OH: 1, OW: y[2] };
  return null;
}

/** MR-panel packed [M, K] matrices (G groups) -> [G][K][Mpad] float words.
 * @param {Float32Array} wp @param {number} G @param {number} M @param {number} K @param {number} MR */
function unpackPanels(wp, G, M, K, MR) {
  const Mp = Math.ceil(M / MR) * MR, Mpad = up8(M);
  const out = new Float32Array(G * K * Mpad);
  for (let g = 0; g < G; g++) {
    for (let m = 0; m < M; m++) {
      const src = g * Mp * K + Math.floor(m / MR) * MR * K + (m % MR);
      for (let k = 0; k < K; k++) out[(g * K + k) * Mpad + m] = wp[src + k * MR];
    }
  }
  return out;
}

// A thread computes 8 output channels × 4 adjacent pixels of one output row: every input value loaded
// feeds 8 multiply-adds, every weight vector 4. The tile is unrolled into named registers (no dynamically
// indexed private arrays, which SwiftShader and some drivers spill to memory).
const R4 = [0, 1, 2, 3];
const CONV_WGSL = /* wgsl */ `
fn xat(row: u32, ix: i32) -> f32 {
  if (ix < 0 || ix >= i32(P[8])) { return 0.0; }
  return x0(row + u32(ix));
}
fn store(b: u32, g: u32, m0: u32, n: u32, acc: vec4<f32>) {
  let N = P[10] * P[11];
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + i;
    if (m >= P[21]) { break; }
    let co = g * P[21] + m;
    let yi = (b * P[9] + co) * N + n;
    var v = acc[i];
    BIAS
    RESIDUAL
    sA(P[5] + yi, act(v, pf(26), pf(27)));
  }
}
${MAIN}
  let tilesW = P[25]; let tilesM = P[24]; let G = P[12]; let OH = P[10]; let OW = P[11];
  let tw = t % tilesW; let r1 = t / tilesW; let oh = r1 % OH; let r2 = r1 / OH;
  let tm = r2 % tilesM; let r3 = r2 / tilesM; let g = r3 % G; let b = r3 / G;
  let Mpad = P[23]; let Cg = P[22]; let H = i32(P[7]);
  let kh = P[13]; let kw = P[14]; let dh = i32(P[17]); let dw = i32(P[18]);
  let m0 = tm * 8u; let ow0 = tw * 4u;
  let iy0 = i32(oh * P[15]) - i32(P[19]);
${R4.map((j) => `  let ix${j} = i32((ow0 + ${j}u) * P[16]) - i32(P[20]);
  var a${j} = vec4<f32>(); var c${j} = vec4<f32>();`).join('\n')}
  var wi = P[2] + g * P[28] * Mpad + m0;
  let plane = P[7] * P[8];
  for (var ci = 0u; ci < Cg; ci++) {
    let xc = P[1] + (b * P[6] + g * Cg + ci) * plane;
    for (var ky = 0u; ky < kh; ky++) {
      let iy = iy0 + i32(ky) * dh;
      if (iy < 0 || iy >= H) { wi += kw * Mpad; continue; }
      let row = xc + u32(iy) * P[8];
      for (var kx = 0u; kx < kw; kx++) {
        let wa = wv4(wi); let wb = wv4(wi + 4u);
        wi += Mpad;
        let dx = i32(kx) * dw;
${R4.map((j) => `        let v${j} = xat(row, ix${j} + dx); a${j} += wa * v${j}; c${j} += wb * v${j};`).join('\n')}
      }
    }
  }
  let n = oh * OW + ow0;
${R4.map((j) => `  if (ow0 + ${j}u < OW) { store(b, g, m0, n + ${j}u, a${j}); store(b, g, m0 + 4u, n + ${j}u, c${j}); }`).join('\n')}
}`;

// WINOGRAD_CONV as Winograd F(2×2, 3×3) in three dispatches over the GPU scratch buffer: the input
// transform V_k = Bᵀ d B of every 4×4 input patch ([16][Cin][T], T = batch · output tiles), 16 matrix
// products M_k = U_k V_k ([16][Cout][T], the matrix-product shader), and the output transform
// Y = Aᵀ M A with the fused epilogue. U is the plan's, repacked from MR panels to [16][Cin][Mpad].
const IDX4 = [0, 1, 2, 3];
const WG_IN = /* wgsl */ `${MAIN}
  let T = P[10]; let tile = t % T; let ci = t / T;
  let tx = tile % P[7]; let r1 = tile / P[7]; let ty = r1 % P[6]; let b = r1 / P[6];
  let iy = i32(ty * 2u) - i32(P[8]); let ix = i32(tx * 2u) - i32(P[9]);
  let base = P[1] + (b * P[3] + ci) * P[4] * P[5];
${IDX4.map((r) => IDX4.map((c) => `  let d${r}${c} = xin(base, iy + ${r}, ix + ${c});`).join('\n')).join('\n')}
${IDX4.map((c) => `  let e0${c} = d0${c} - d2${c}; let e1${c} = d1${c} + d2${c}; let e2${c} = d2${c} - d1${c}; let e3${c} = d1${c} - d3${c};`).join('\n')}
  let v = P[2] + ci * T + tile; let plane = P[3] * T;
${IDX4.map((i) => `  sS(v + ${4 * i}u * plane, e${i}0 - e${i}2); sS(v + ${4 * i + 1}u * plane, e${i}1 + e${i}2);
  sS(v + ${4 * i + 2}u * plane, e${i}2 - e${i}1); sS(v + ${4 * i + 3}u * plane, e${i}1 - e${i}3);`).join('\n')}
}`;

const WG_OUT = /* wgsl */ `
fn put(b: u32, co: u32, oy: u32, ox: u32, acc: f32) {
  if (oy >= P[4] || ox >= P[5]) { return; }
  let yi = ((b * P[3] + co) * P[4] + oy) * P[5] + ox;
  var v = acc;
  BIAS
  RESIDUAL
  sA(P[2] + yi, act(v, pf(11), pf(12)));
}
${MAIN}
  let T = P[8]; let tile = t % T; let co = t / T;
  let tx = tile % P[7]; let r1 = tile / P[7]; let ty = r1 % P[6]; let b = r1 / P[6];
  let m = P[1] + co * T + tile; let plane = P[3] * T;
${[...Array(16).keys()].map((k) => `  let s${k} = fS(m + ${k}u * plane);`).join('\n')}
${IDX4.map((j) => `  let a0${j} = s${j} + s${4 + j} + s${8 + j}; let a1${j} = s${4 + j} - s${8 + j} - s${12 + j};`).join('\n')}
  let oy = ty * 2u; let ox = tx * 2u;
  put(b, co, oy, ox, a00 + a01 + a02); put(b, co, oy, ox + 1u, a01 - a02 - a03);
  put(b, co, oy + 1u, ox, a10 + a11 + a12); put(b, co, oy + 1u, ox + 1u, a11 - a12 - a13);
}`;

/** U (nk MR-panel [Cout × Cin] matrices) -> [16][Cin][Mpad], Mpad = Cout rounded up to 4. nk = 36 (F(4×4)'s U):
 * each filter g = P U Pᵀ (P G₄ = I: rows 0, 1-2 and 5 of U hold g exactly), then U₂ = G₂ g G₂ᵀ.
 * @param {Float32Array} u @param {number} Cout @param {number} Cin @param {number} MR @param {16 | 36} nk */
function unpackU(u, Cout, Cin, MR, nk) {
  const Mp = Math.ceil(Cout / MR) * MR, Mpad = Math.ceil(Cout / 4) * 4;
  const out = new Float32Array(16 * Cin * Mpad);
  const at = (/** @type {number} */ k, /** @type {number} */ co, /** @type {number} */ ci) =>
    u[k * Mp * Cin + Math.floor(co / MR) * MR * Cin + (co % MR) + ci * MR];
  const g = new Float64Array(9), t = new Float64Array(12);
  /** U row i times Pᵀ: the 3 values of g's columns it holds. @param {number} i @param {number} co @param {number} ci */
  const rowP = (i, co, ci) => [4 * at(6 * i, co, ci), 3 * (at(6 * i + 2, co, ci) - at(6 * i + 1, co, ci)), at(6 * i + 5, co, ci)];
  for (let co = 0; co < Cout; co++) {
    for (let ci = 0; ci < Cin; ci++) {
      if (nk === 16) {
        for (let k = 0; k < 16; k++) out[(k * Cin + ci) * Mpad + co] = at(k, co, ci);
        continue;
      }
      const [r0, r1, r2, r5] = [rowP(0, co, ci), rowP(1, co, ci), rowP(2, co, ci), rowP(5, co, ci)];
      for (let b = 0; b < 3; b++) { g[b] = 4 * r0[b]; g[3 + b] = 3 * (r2[b] - r1[b]); g[6 + b] = r5[b]; }   // g = P U Pᵀ
      for (let b = 0; b < 3; b++) {   // G₂ g: rows g0, (g0+g1+g2)/2, (g0-g1+g2)/2, g2
        t[b] = g[b]; t[3 + b] = (g[b] + g[3 + b] + g[6 + b]) / 2; t[6 + b] = (g[b] - g[3 + b] + g[6 + b]) / 2; t[9 + b] = g[6 + b];
      }
      for (let i = 0; i < 4; i++) {   // (G₂ g) G₂ᵀ
        const [a, b, c] = [t[3 * i], t[3 * i + 1], t[3 * i + 2]];
        const v = [a, (a + b + c) / 2, (a - b + c) / 2, c];
        for (let j = 0; j < 4; j++) out[((4 * i + j) * Cin + ci) * Mpad + co] = v[j];
      }
    }
  }
  return out;
}

/** @param {PlanNode} node @param {BuildContext} ctx @param {ReturnType<typeof spatial> & {}} s
 * @param {number[]} pads [pt, pl] @param {number[]} act [code, p0, p1] @param {number} MR @param {16 | 36} nk U's matrices
 * @returns {Dispatch[]} */
function winogradDispatches(node, ctx, s, pads, act, MR, nk) {
  const x = ctx.t(node.inputs[0]), w = ctx.t(node.inputs[1]), y = ctx.t(node.outputs[0]);
  const [pt, pl] = pads, TH = Math.ceil(s.OH / 2), TW = Math.ceil(s.OW / 2), T = s.B * TH * TW;
  const Mpad = Math.ceil(s.Cout / 4) * 4;
  const U = ctx.fsrc(w.id, 'winograd-u', () => unpackU(ctx.floats(w.id), s.Cout, s.Cin, MR, nk));
  const vWords = 16 * s.Cin * T, S = ctx.scratch(vWords + 16 * s.Cout * T);
  const xs = ctx.fsrc(x.id);
  const xin = /* wgsl */ `fn xin(base: u32, iy: i32, ix: i32) -> f32 {
  if (iy < 0 || ix < 0 || iy >= i32(P[4]) || ix >= i32(P[5])) { return 0.0; }
  return x0(base + u32(iy) * P[5] + u32(ix));
}\n`;
  const input = { code: floatLoader('x0', xs) + xin + WG_IN,
    params: [s.Cin * T, xs.base, S.base, s.Cin, s.H, s.W, TH, TW, pt, pl, T], threads: s.Cin * T };
  const [gemm] = matmulDispatch({ M: s.Cout, N: T, K: s.Cin, batch: [[16], [s.Cin * Mpad], [s.Cin * T]], a: [1, Mpad], b: [T, 1],
    alpha: 0x3f800000, beta: 0, act: 0, p0: 0, p1: 0, A: U, B: S, Y: { buf: 'S', base: S.base + vWords } });
  const p = [s.Cout * T, S.base + vWords, ctx.fsrc(y.id).base, s.Cout, s.OH, s.OW, TH, TW, T, 0, 0, act[1] >>> 0, act[2] >>> 0];
  const ep = epilogue(node, ctx, p, 9, 10, 'co', 'yi');
  const output = { code: ep.code + actFn(act[0]) + WG_OUT.replace('BIAS', ep.bias).replace('RESIDUAL', ep.residual),
    params: p, threads: s.Cout * T };
  return [input, gemm, output];
}

/** Conv epilogue operands: bias (input 2) and residual (input 3), both optional.
 * @param {PlanNode} node @param {BuildContext} ctx @param {number[]} p @param {number} bAt @param {number} rAt
 * @param {string} coExpr @param {string} yExpr */
function epilogue(node, ctx, p, bAt, rAt, coExpr, yExpr) {
  let code = '';
  const [bias, res] = [node.inputs[2] ?? -1, node.inputs[3] ?? -1];
  if (bias >= 0) {
    const s = ctx.fsrc(bias);
    code += floatLoader('xb', s);
    p[bAt] = s.base;
  }
  if (res >= 0) {
    const s = ctx.fsrc(res);
    code += floatLoader('xr', s);
    p[rAt] = s.base;
  }
  return {
    code,
    bias: bias >= 0 ? `v += xb(P[${bAt}] + ${coExpr});` : '',
    residual: res >= 0 ? `v += xr(P[${rAt}] + ${yExpr});` : '',
  };
}

/** The conv family's operands and spatial sizes after the checks they share, or a reason to fall back.
 * @param {PlanNode} node @param {BuildContext} ctx */
function convOperands(node, ctx) {
  const [xi, wi, bias, res] = node.inputs;
  const x = ctx.t(xi), w = ctx.t(wi), y = ctx.t(node.outputs[0]);
  if (x.dtype !== F32 || y.dtype !== F32) return 'non-float32 tensors';
  if (!ctx.isWeight(wi)) return 'weights computed at run time';
  if (bias !== undefined && bias >= 0 && ctx.t(bias).numel !== y.dims[1]) return 'bias size';
  if (res !== undefined && res >= 0 && ctx.t(res).numel !== y.numel) return 'residual size';
  const s = spatial(x.dims, y.dims);
  return s ? { x, w, y, s } : 'rank';
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function conv(node, ctx) {
  const o = convOperands(node, ctx);
  if (typeof o === 'string') return o;
  const { x, w, y, s } = o;
  const pr = node.params;
  if (node.op === OP.WINOGRAD_CONV || node.op === OP.WINOGRAD_CONV_F4) {
    if (pr.length !== 15 && pr.length !== 16) return 'params';   // (16: word 15 = Cout)
    const [MR, kh, kw, sh, sw, dh, dw, pt, pl, pb, pR, , act, a0, a1] = pr;
    if (kh !== 3 || kw !== 3 || sh !== 1 || sw !== 1 || dh !== 1 || dw !== 1) return 'winograd geometry';
    if (!isActivation(act) || x.dims.length !== 4 || !(MR >= 1)) return 'params';
    const nk = node.op === OP.WINOGRAD_CONV ? 16 : 36, want = nk * Math.ceil(s.Cout / MR) * MR * s.Cin;
    if (w.numel !== want) ctx.fail(`U holds ${w.numel} values, expected ${want}`);
    if (s.OH !== s.H + pt + pb - 2 || s.OW !== s.W + pl + pR - 2 || s.OH < 1 || s.OW < 1) ctx.fail('output size does not match the pads');
    return winogradDispatches(node, ctx, s, [pt, pl], [act, a0, a1], MR, nk);
  }
  if (pr.length !== 16 && pr.length !== 17) return 'params';   // (17: word 16 = Cout)
  const [G, MR, kh, kw, sh, sw, dh, dw, pt, pl, pb, pR, , act, a0, a1] = pr;
  if (!isActivation(act)) return `activation ${act}`;
  if (!(G >= 1 && MR >= 1 && s.Cin % G === 0 && s.Cout % G === 0)) return 'group';
  const Mg = s.Cout / G, Cg = s.Cin / G, K = Cg * kh * kw, Mpad = up8(Mg);
  if (w.numel !== G * Math.ceil(Mg / MR) * MR * K) ctx.fail(`packed weights hold ${w.numel} values, expected ${G * Math.ceil(Mg / MR) * MR * K}`);
  const ws = ctx.fsrc(w.id, 'conv', () => unpackPanels(ctx.floats(w.id), G, Mg, K, MR));
  const N = s.OH * s.OW, tilesM = Mpad / 8, tilesW = Math.ceil(s.OW / 4);
  const [bias, res] = [node.inputs[2] ?? -1, node.inputs[3] ?? -1];
  if (G === 1 && kh === 1 && kw === 1 && sh === 1 && sw === 1 && !pt && !pl && !pb && !pR && N === s.H * s.W) {
    // 1×1, stride 1, no pads: Y[b] = Wᵀ·X[b], a matrix product over the [K][Mpad] weights
    return matmulDispatch({ M: Mg, N, K, batch: [[s.B], [0], [K * N]], a: [1, Mpad], b: [N, 1], c: [1, 0],
      alpha: 0x3f800000, beta: 0x3f800000, act, p0: a0, p1: a1, A: ws, B: ctx.fsrc(x.id),
      C: bias >= 0 ? ctx.fsrc(bias) : undefined, R: res >= 0 ? ctx.fsrc(res) : undefined, Y: ctx.fsrc(y.id) });
  }
  const p = [s.B * G * tilesM * s.OH * tilesW, ctx.fsrc(x.id).base, ws.base, 0, 0, ctx.fsrc(y.id).base,
    s.Cin, s.H, s.W, s.Cout, s.OH, s.OW, G, kh, kw, sh, sw, dh, dw, pt, pl, Mg, Cg, Mpad, tilesM, tilesW,
    a0 >>> 0, a1 >>> 0, K];
  const ep = epilogue(node, ctx, p, 3, 4, 'co', 'yi');
  const code = floatLoader('x0', ctx.fsrc(x.id)) + vec4Loader('wv4', ws) + ep.code + actFn(act) +
    CONV_WGSL.replace('BIAS', ep.bias).replace('RESIDUAL', ep.residual);
  return [{ code, params: p, threads: p[0] }];
}

const DW_WGSL = /* wgsl */ `
${MAIN}
  let OW = P[10]; let OH = P[9];
  let ox = t % OW; let r1 = t / OW; let oy = r1 % OH; let bc = r1 / OH; let c = bc % P[6];
  let kh = P[11]; let kw = P[12];
  let iy0 = i32(oy * P[13]) - i32(P[17]); let ix0 = i32(ox * P[14]) - i32(P[18]);
  let H = i32(P[7]); let Wd = i32(P[8]);
  let xc = P[1] + bc * P[7] * P[8];
  var v = 0.0;
  var wi = P[2] + c * kh * kw;
  for (var ky = 0u; ky < kh; ky++) {
    let iy = iy0 + i32(ky * P[15]);
    for (var kx = 0u; kx < kw; kx++) {
      let ix = ix0 + i32(kx * P[16]);
      if (iy >= 0 && iy < H && ix >= 0 && ix < Wd) { v += xw(wi) * x0(xc + u32(iy) * P[8] + u32(ix)); }
      wi++;
    }
  }
  BIAS
  RESIDUAL
  sA(P[5] + t, act(v, pf(19), pf(20)));
}`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function depthwise(node, ctx) {
  const o = convOperands(node, ctx);
  if (typeof o === 'string') return o;
  const { x, w, y, s } = o;
  const pr = node.params;
  if (pr.length !== 13) return 'params';
  const [kh, kw, sh, sw, dh, dw, pt, pl, , , act, a0, a1] = pr;
  if (!isActivation(act)) return `activation ${act}`;
  if (s.Cin !== s.Cout || w.numel !== s.Cin * kh * kw) ctx.fail('depthwise weights do not match the channels');
  const ws = ctx.fsrc(w.id);
  const p = [y.numel, ctx.fsrc(x.id).base, ws.base, 0, 0, ctx.fsrc(y.id).base, s.Cin, s.H, s.W, s.OH, s.OW,
    kh, kw, sh, sw, dh, dw, pt, pl, a0 >>> 0, a1 >>> 0];
  const ep = epilogue(node, ctx, p, 3, 4, 'c', 't');
  const code = floatLoader('x0', ctx.fsrc(x.id)) + floatLoader('xw', ws) + ep.code + actFn(act) +
    DW_WGSL.replace('BIAS', ep.bias).replace('RESIDUAL', ep.residual);
  return [{ code, params: p, threads: y.numel }];
}
