// WGSL building blocks shared by every shader: the four bindings, typed loads over the raw-word buffers,
// the thread index, and the activation / unary function bodies (codes of docs/plan-format.md, UNARY).
//
// Memory model: binding 0 is the GPU arena, laid out exactly like the wasm arena (same tensor offsets,
// so views and lifetime reuse work unchanged); binding 1 holds the weights the GPU nodes read, repacked
// at load time; binding 2 the node's parameter words; binding 3 run-time error flags (Gather indices).
// Buffers are arrays of u32 words so one binding carries float32, int32 and int64 tensors alike.

import { isActivation, UNARY } from './opcodes.js';

export const WG = 64;   // workgroup size of every shader

const PRELUDE = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> A: array<u32>;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> P: array<u32>;
@group(0) @binding(3) var<storage, read_write> E: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read> W4: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read_write> S: array<u32>;
fn fA(i: u32) -> f32 { return bitcast<f32>(A[i]); }
fn fW(i: u32) -> f32 { return bitcast<f32>(W[i]); }
fn fW4(i: u32) -> vec4<f32> { return bitcast<vec4<f32>>(W4[i >> 2u]); }   // i: a multiple of 4
fn sA(i: u32, v: f32) { A[i] = bitcast<u32>(v); }
fn fS(i: u32) -> f32 { return bitcast<f32>(S[i]); }
fn sS(i: u32, v: f32) { S[i] = bitcast<u32>(v); }
fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
fn pi(i: u32) -> i32 { return bitcast<i32>(P[i]); }
// ±infinity: WGSL constant expressions cannot be infinite, so mix in a run-time zero.
fn ninf() -> f32 { return bitcast<f32>(0xff800000u | (P[0] & 0u)); }
fn pinf() -> f32 { return bitcast<f32>(0x7f800000u | (P[0] & 0u)); }
`;

const HALF_NATIVE = /* wgsl */ `
@group(0) @binding(5) var<storage, read> H: array<f16>;
@group(0) @binding(6) var<storage, read> H4: array<vec4<f16>>;
fn fH(i: u32) -> f32 { return f32(H[i]); }
fn fH4(i: u32) -> vec4<f32> { return vec4<f32>(H4[i >> 2u]); }   // i: a multiple of 4
`;
const HALF_UNPACK = /* wgsl */ `
fn fH(i: u32) -> f32 { return unpack2x16float(W[i >> 1u])[i & 1u]; }
fn fH4(i: u32) -> vec4<f32> { let j = i >> 1u; return vec4<f32>(unpack2x16float(W[j]), unpack2x16float(W[j + 1u])); }
`;

/** The declarations every shader starts with. @param {boolean} nativeF16 shader-f16 is enabled */
export const prelude = (nativeF16) => (nativeF16 ? `enable f16;\n${PRELUDE}${HALF_NATIVE}` : PRELUDE + HALF_UNPACK);

/** Entry point header: \`t\` is the flat thread index, P[0] the thread count. */
export const MAIN = /* wgsl */ `
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.x + gid.y * nwg.x * ${WG}u;
  if (t >= P[0]) { return; }`;

/** @typedef {{buf: 'A'|'W'|'H'|'S', base: number}} Src where a tensor's first element is: a 32-bit word of
 * the arena (A), the weights buffer (W) or the scratch buffer (S), or a 16-bit half of the weights buffer
 * (H, float16 storage) */

/** A float accessor named \`name\` reading from src's buffer. @param {string} name @param {Src} src */
export const floatLoader = (name, src) => `fn ${name}(i: u32) -> f32 { return f${src.buf}(i); }\n`;
/** A vec4 accessor (index a multiple of 4) over weights. @param {string} name @param {Src} src */
export const vec4Loader = (name, src) => {
  if (src.buf !== 'W' && src.buf !== 'H') throw new Error('vector loads read weights only');
  return `fn ${name}(i: u32) -> vec4<f32> { return f${src.buf}4(i); }\n`;
};
/** A raw-word accessor. @param {string} name @param {Src} src */
export const wordLoader = (name, src) => `fn ${name}(i: u32) -> u32 { return ${src.buf}[i]; }\n`;

// Helpers some unary functions need. Erf: Taylor series near 0 (relative accuracy), Abramowitz-Stegun
// 7.1.26 elsewhere (absolute error < 1.5e-7).
export const MATH = /* wgsl */ `
fn erf_(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.5) {
    let z = x * x;
    return x * 1.1283791670955126 * (1.0 + z * (-0.3333333333 + z * (0.1 + z * (-0.0238095238 + z * (0.0046296296 - z * 0.00075757576)))));
  }
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return select(-y, y, x >= 0.0);
}
fn tanh_(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
fn softplus_(x: f32) -> f32 { return select(log(1.0 + exp(x)), x, x > 20.0); }
fn pow_(x: f32, y: f32) -> f32 {
  if (y == 0.0) { return 1.0; }
  if (y == 1.0) { return x; }
  if (y == 2.0) { return x * x; }
  if (y == 3.0) { return x * x * x; }
  if (y == -1.0) { return 1.0 / x; }
  if (y == floor(y)) {
    let r = pow(abs(x), y);
    let odd = abs(y) < 16777216.0 && (i32(y) & 1) == 1;
    return select(r, -r, x < 0.0 && odd);
  }
  return pow(x, y);
}
`;

/** WGSL expression of UNARY function \`fn\` applied to \`v\`, parameters in \`a\`, \`b\` (f32 values);
 * null when the function has no shader (NOT is bool). @param {number} fn @returns {string|null} */
export function unaryExpr(fn) {
  switch (fn) {
    case UNARY.NONE: return 'v';
    case UNARY.RELU: return 'max(v, 0.0)';
    case UNARY.LEAKY_RELU: return 'select(v * a, v, v >= 0.0)';
    case UNARY.CLIP: return 'min(max(v, a), b)';
    case UNARY.SIGMOID: return '1.0 / (1.0 + exp(-v))';
    case UNARY.HARDSIGMOID: return 'clamp(a * v + b, 0.0, 1.0)';
    case UNARY.HARDSWISH: return 'v * clamp(v / 6.0 + 0.5, 0.0, 1.0)';
    case UNARY.TANH: return 'tanh_(v)';
    case UNARY.GELU: return '0.5 * v * (1.0 + erf_(v * 0.70710678118654752))';
    case UNARY.GELU_TANH: return '0.5 * v * (1.0 + tanh_(0.7978845608028654 * (v + 0.044715 * v * v * v)))';
    case UNARY.ERF: return 'erf_(v)';
    case UNARY.EXP: return 'exp(v)';
    case UNARY.LOG: return 'log(v)';
    case UNARY.SQRT: return 'sqrt(v)';
    case UNARY.RECIPROCAL: return '1.0 / v';
    case UNARY.NEG: return '-v';
    case UNARY.ABS: return 'abs(v)';
    case UNARY.FLOOR: return 'floor(v)';
    case UNARY.CEIL: return 'ceil(v)';
    case UNARY.ROUND: return 'round(v)';
    case UNARY.SIGN: return 'sign(v)';
    case UNARY.ELU: return 'select(a * (exp(v) - 1.0), v, v > 0.0)';
    case UNARY.SELU: return 'b * select(a * (exp(v) - 1.0), v, v > 0.0)';
    case UNARY.CELU: return 'max(v, 0.0) + min(0.0, a * (exp(v / a) - 1.0))';
    case UNARY.SOFTPLUS: return 'softplus_(v)';
    case UNARY.SOFTSIGN: return 'v / (1.0 + abs(v))';
    case UNARY.MISH: return 'v * tanh_(softplus_(v))';
    case UNARY.THRESHOLDED_RELU: return 'select(0.0, v, v > a)';
    case UNARY.SIN: return 'sin(v)';
    case UNARY.COS: return 'cos(v)';
    case UNARY.POW: return 'pow_(v, a)';
    case UNARY.TAN: return 'tan(v)';
    case UNARY.ASIN: return 'asin(v)';
    case UNARY.ACOS: return 'acos(v)';
    case UNARY.ATAN: return 'atan(v)';
    case UNARY.SINH: return 'sinh(v)';
    case UNARY.COSH: return 'cosh(v)';
    case UNARY.ASINH: return 'asinh(v)';
    case UNARY.ACOSH: return 'acosh(v)';
    case UNARY.ATANH: return 'atanh(v)';
    case UNARY.SILU: return 'v * (1.0 / (1.0 + exp(-v)))';   /* Sigmoid then Mul */
    default: return null;   /* NOT, ISNAN, ISINF (bool outputs): the wasm core runs them */
  }
}

/** The fused epilogue of CONV/DEPTHWISE/WINOGRAD/GEMM: \`fn act(v, a, b)\` for a fusable activation code,
 * the UNARY functions of the same codes (with their helpers past CLIP).
 * @param {number} code @returns {string} */
export function actFn(code) {
  const e = isActivation(code) ? unaryExpr(code) : null;
  if (e === null) throw new Error(`activation code ${code}`);
  return `${code > UNARY.CLIP ? MATH : ''}fn act(v: f32, a: f32, b: f32) -> f32 { return ${e}; }\n`;
}

/** Workgroup counts for \`threads\` invocations (2-D beyond 65535 workgroups). @param {number} threads */
export function grid(threads) {
  const groups = Math.max(1, Math.ceil(threads / WG));
  if (groups <= 65535) return [groups, 1];
  const y = Math.ceil(groups / 65535);
  return [Math.ceil(groups / y), y];
}
