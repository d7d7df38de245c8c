// CONV, WINOGRAD_CONV and DEPTHWISE_CONV as WGSL direct convolutions with the fused epilogue
// y = act(acc + bias + residual).
//
// Weights are repacked at load time into one GPU layout, [G][K][Mpad] (K = Cin/G·kh·kw, Mpad = Cout/G
// rounded up to 8), so a thread computing 8 output channels reads its weights of one tap as two vectors.
// CONV's MR=6 row panels are unpacked; WINOGRAD_CONV's transformed filters U = G g Gᵀ are turned back into the 3×3 filters g = L U Lᵀ with the exact left inverse
// L = [[1,0,0,0],[0,1,-1,0],[0,0,0,1]] of G (rows 0 and 3 of G g are g's rows 0 and 2, rows 1 - 2 are
// its row 1), so a Winograd node runs the same direct-conv shader as CONV.

import { F32 } from '../plan.js';
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

/** WINOGRAD_CONV's U (16 MR-panel matrices [Cout × Cin]) -> 3×3 filters in [1][Cin·9][Mpad].
 * @param {Float32Array} u @param {number} Cout @param {number} Cin @param {number} MR */
function winogradToFilters(u, Cout, Cin, MR) {
  const Mp = Math.ceil(Cout / MR) * MR, Mpad = up8(Cout);
  const out = new Float32Array(Cin * 9 * Mpad);
  const L = [[1, 0, 0, 0], [0, 1, -1, 0], [0, 0, 0, 1]];
  const U = new Float64Array(16);
  for (let co = 0; co < Cout; co++) {
    for (let ci = 0; ci < Cin; ci++) {
      const at = Math.floor(co / MR) * MR * Cin + ci * MR + (co % MR);
      for (let k = 0; k < 16; k++) U[k] = u[k * Mp * Cin + at];
      for (let a = 0; a < 3; a++) {
        for (let c = 0; c < 3; c++) {
          let s = 0;
          for (let i = 0; i < 4; i++) {
            if (!L[a][i]) continue;
            for (let j = 0; j < 4; j++) if (L[c][j]) s += L[a][i] * L[c][j] * U[4 * i + j];
          }
          out[(ci * 9 + a * 3 + c) * Mpad + co] = s;
        }
      }
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

/** Checks shared by the conv family; returns a reason to fall back, or null. @param {PlanNode} node @param {BuildContext} ctx */
function convOperandsOk(node, ctx) {
  const [x, w, bias, res] = node.inputs;
  const y = ctx.t(node.outputs[0]);
  if (ctx.t(x).dtype !== F32 || y.dtype !== F32) return 'non-float32 tensors';
  if (!ctx.isWeight(w)) return 'weights computed at run time';
  if (bias !== undefined && bias >= 0 && ctx.t(bias).numel !== y.dims[1]) return 'bias size';
  if (res !== undefined && res >= 0 && ctx.t(res).numel !== y.numel) return 'residual size';
  return null;
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function conv(node, ctx) {
  const why = convOperandsOk(node, ctx);
  if (why) return why;
  const x = ctx.t(node.inputs[0]), w = ctx.t(node.inputs[1]), y = ctx.t(node.outputs[0]);
  const s = spatial(x.dims, y.dims);
  if (!s) return 'rank';
  const pr = node.params;
  let G, MR, kh, kw, sh, sw, dh, dw, pt, pl, act, a0, a1, winograd = node.op === 25;
  if (winograd) {
    if (pr.length !== 15) return 'params';
    [MR, kh, kw, sh, sw, dh, dw, pt, pl] = pr;
    G = 1; [act, a0, a1] = [pr[12], pr[13], pr[14]];
    if (kh !== 3 || kw !== 3 || sh !== 1 || sw !== 1 || dh !== 1 || dw !== 1) return 'winograd geometry';
  } else {
    if (pr.length !== 16) return 'params';
    [G, MR, kh, kw, sh, sw, dh, dw, pt, pl] = pr;
    [act, a0, a1] = [pr[13], pr[14], pr[15]];
  }
  if (act < 0 || act > 3) return `activation ${act}`;
  if (!(G >= 1 && MR >= 1 && s.Cin % G === 0 && s.Cout % G === 0)) return 'group';
  const Mg = s.Cout / G, Cg = s.Cin / G, K = Cg * kh * kw, Mpad = up8(Mg);
  const wantW = winograd ? 16 * Math.ceil(s.Cout / MR) * MR * s.Cin : G * Math.ceil(Mg / MR) * MR * K;
  if (w.numel !== wantW) ctx.fail(`packed weights hold ${w.numel} values, expected ${wantW}`);
  const key = winograd ? 'winograd' : 'conv';
  const ws = ctx.fsrc(w.id, key, () => winograd
    ? winogradToFilters(ctx.floats(w.id), s.Cout, s.Cin, MR)
    : unpackPanels(ctx.floats(w.id), G, Mg, K, MR));
  const N = s.OH * s.OW, tilesM = Mpad / 8, tilesW = Math.ceil(s.OW / 4);
  const [bias, res] = [node.inputs[2] ?? -1, node.inputs[3] ?? -1];
  if (G === 1 && kh === 1 && kw === 1 && sh === 1 && sw === 1 && !pt && !pl && !pr[10] && !pr[11] && N === s.H * s.W) {
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
  const why = convOperandsOk(node, ctx);
  if (why) return why;
  const x = ctx.t(node.inputs[0]), w = ctx.t(node.inputs[1]), y = ctx.t(node.outputs[0]);
  const s = spatial(x.dims, y.dims);
  if (!s) return 'rank';
  const pr = node.params;
  if (pr.length !== 13) return 'params';
  const [kh, kw, sh, sw, dh, dw, pt, pl, , , act, a0, a1] = pr;
  if (act < 0 || act > 3) return `activation ${act}`;
  if (s.Cin !== s.Cout || w.numel !== s.Cin * kh * kw) ctx.fail('depthwise weights do not match the channels');
  const ws = ctx.fsrc(w.id);
  const p = [y.numel, ctx.fsrc(x.id).base, ws.base, 0, 0, ctx.fsrc(y.id).base, s.Cin, s.H, s.W, s.OH, s.OW,
    kh, kw, sh, sw, dh, dw, pt, pl, a0 >>> 0, a1 >>> 0];
  const ep = epilogue(node, ctx, p, 3, 4, 'c', 't');
  const code = floatLoader('x0', ctx.fsrc(x.id)) + floatLoader('xw', ws) + ep.code + actFn(act) +
    DW_WGSL.replace('BIAS', ep.bias).replace('RESIDUAL', ep.residual);
  return [{ code, params: p, threads: y.numel }];
}
