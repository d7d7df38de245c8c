// UNARY, BINARY (numpy broadcasting) and BATCHNORM on float32, WHERE and CAST on 4- and 8-byte elements
// (bool conditions and sources are read as bytes): one thread per output element.

import { DTYPE_SIZE, F32, I32, I64, numel, strides } from '../plan.js';
import { BINARY, UNARY, UNARY_NPARAMS } from '../opcodes.js';
import { MAIN, MATH, floatLoader, unaryExpr, wordLoader } from '../wgsl.js';
import { compare, toBool } from './bytes.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function unary(node, ctx) {
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const fn = node.params[0];
  if (fn === UNARY.NOT) return toBool(node, ctx);
  const expr = unaryExpr(fn);
  if (expr === null) return `function ${fn}`;
  if (!ctx.isFloat(X) || y.dtype !== F32) return 'non-float32 tensors';
  const np = /** @type {Record<number, number>} */ (UNARY_NPARAMS)[fn] ?? 0;
  if (node.params.length !== 1 + np) ctx.fail(`function ${fn} takes ${np} parameter words`);
  if (ctx.t(X).numel !== y.numel) ctx.fail('input and output sizes differ');
  const p = [y.numel, ctx.fsrc(X).base, ctx.fsrc(y.id).base, node.params[1] ?? 0, node.params[2] ?? 0];
  const code = floatLoader('x0', ctx.fsrc(X)) + MATH + `fn f(v: f32, a: f32, b: f32) -> f32 { return ${expr}; }\n` +
    `${MAIN}\n  sA(P[2] + t, f(x0(P[1] + t), pf(3), pf(4)));\n}`;
  return [{ code, params: p, threads: y.numel }];
}

/** WGSL of the float32 BINARY functions, indexed by code (ADD .. PRELU). */
const BINARY_EXPR = [
  'a + b', 'a - b', 'a * b', 'a / b',
  'select(min(a, b), a + b, a != a || b != b)', 'select(max(a, b), a + b, a != a || b != b)',
  'pow_(a, b)', 'select(a, a * b, a < 0.0)',
];

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function binary(node, ctx) {
  const [Ai, Bi] = node.inputs, y = ctx.t(node.outputs[0]);
  const fn = node.params[0];
  if (fn >= BINARY.EQUAL && fn <= BINARY.XOR) return compare(node, ctx);
  if (!(fn >= 0 && fn < BINARY_EXPR.length)) return `function ${fn}`;
  if (!ctx.isFloat(Ai) || !ctx.isFloat(Bi) || y.dtype !== F32) return 'non-float32 tensors';
  const r = y.dims.length;
  if (r > 8) return 'rank';
  const p = [y.numel, ctx.fsrc(Ai).base, ctx.fsrc(Bi).base, ctx.fsrc(y.id).base, 0, r, ...new Array(24).fill(0)];
  y.dims.forEach((d, i) => { p[6 + i] = d; });
  // Each operand is read in place (same shape), as a scalar, or through broadcast strides.
  const index = (/** @type {number} */ id, /** @type {number} */ at) => {
    const d = ctx.t(id).dims;
    if (d.length > r) ctx.fail('operand rank exceeds the output rank');
    const pad = [...new Array(r - d.length).fill(1), ...d];
    if (pad.some((v, i) => v !== 1 && v !== y.dims[i])) ctx.fail(`operand shape [${d}] does not broadcast to [${y.dims}]`);
    if (numel(d) === 1) return '0u';
    if (pad.every((v, i) => v === y.dims[i])) return 't';
    const s = strides(pad);
    pad.forEach((v, i) => { p[at + i] = v === 1 ? 0 : s[i]; });
    return `bidx(t, ${at}u)`;
  };
  const ia = index(Ai, 14), ib = index(Bi, 22);
  const code = floatLoader('xa', ctx.fsrc(Ai)) + floatLoader('xb', ctx.fsrc(Bi)) + MATH + /* wgsl */ `
fn bidx(t: u32, at: u32) -> u32 {
  var r = t; var o = 0u;
  for (var d = i32(P[5]) - 1; d >= 0; d--) {
    let dim = P[6u + u32(d)];
    o += (r % dim) * P[at + u32(d)];
    r /= dim;
  }
  return o;
}
${MAIN}
  let a = xa(P[1] + ${ia}); let b = xb(P[2] + ${ib});
  sA(P[3] + t, ${BINARY_EXPR[fn]});
}`;
  return [{ code, params: p, threads: y.numel }];
}

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function batchnorm(node, ctx) {
  const [X, ...rest] = node.inputs, y = ctx.t(node.outputs[0]);
  const folded = node.inputs.length === 3;
  if (!folded && node.inputs.length !== 5) return 'arity';
  if (![X, ...rest].every((id) => id >= 0 && ctx.isFloat(id)) || y.dtype !== F32) return 'non-float32 tensors';
  const d = ctx.t(X).dims;
  if (d.length < 2 || ctx.t(X).numel !== y.numel) ctx.fail('shape');
  const C = d[1], S = numel(d.slice(2));
  if (rest.some((id) => ctx.t(id).numel !== C)) ctx.fail('per-channel operands must hold C values');
  const p = [y.numel, ctx.fsrc(X).base, ctx.fsrc(y.id).base, C, S, ...rest.map((id) => ctx.fsrc(id).base), 0, 0, 0, 0];
  let code = floatLoader('x0', ctx.fsrc(X)) + rest.map((id, i) => floatLoader(`c${i}`, ctx.fsrc(id))).join('');
  let expr;
  if (folded) {
    expr = 'x * c0(P[5] + c) + c1(P[6] + c)';
  } else {
    if (node.params.length !== 1) ctx.fail('unfolded form takes epsilon');
    p[9] = node.params[0] >>> 0;
    expr = '(x - c2(P[7] + c)) * (c0(P[5] + c) / sqrt(c3(P[8] + c) + pf(9))) + c1(P[6] + c)';
  }
  code += `${MAIN}\n  let c = (t / P[4]) % P[3]; let x = x0(P[1] + t);\n  sA(P[2] + t, ${expr});\n}`;
  return [{ code, params: p, threads: y.numel }];
}

const BOOL = 9, U8 = 2;

/** Broadcast strides of operand \`id\` over output dims \`y\` (0 on broadcast dims), or null when it is the
 * same shape. @param {BuildContext} ctx @param {number} id @param {number[]} y */
function bstrides(ctx, id, y) {
  const d = ctx.t(id).dims;
  if (d.length > y.length) ctx.fail('operand rank exceeds the output rank');
  const pad = [...new Array(y.length - d.length).fill(1), ...d], s = strides(pad);
  if (pad.some((v, i) => v !== 1 && v !== y[i])) ctx.fail(`operand shape [${d}] does not broadcast to [${y}]`);
  return pad.map((v, i) => (v === 1 ? 0 : s[i]));
}

/** A byte reader over a source's words (bool / uint8 tensors). @param {string} name @param {import('../wgsl.js').Src} src */
const byteLoader = (name, src) => `fn ${name}(base: u32, i: u32) -> u32 { return (${src.buf}[base + (i >> 2u)] >> ((i & 3u) * 8u)) & 0xffu; }\n`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function where(node, ctx) {
  const [C, X, Y] = node.inputs, z = ctx.t(node.outputs[0]);
  const size = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (z.dtype)];
  if (ctx.t(C).dtype !== BOOL || (size !== 4 && size !== 8) || ctx.t(X).dtype !== z.dtype || ctx.t(Y).dtype !== z.dtype) return 'element size';
  const r = z.rank, w = size / 4;
  if (r > 8) return 'rank';
  const p = [z.numel, ctx.src(C).base, ctx.src(X).base, ctx.src(Y).base, ctx.src(z.id).base, r, w, 0, ...new Array(32).fill(0)];
  z.dims.forEach((d, i) => { p[8 + i] = d; });
  [C, X, Y].forEach((id, k) => bstrides(ctx, id, z.dims).forEach((v, i) => { p[16 + 8 * k + i] = v; }));
  const code = byteLoader('cb', ctx.src(C)) + wordLoader('rx', ctx.src(X)) + wordLoader('ry', ctx.src(Y)) + /* wgsl */ `${MAIN}
  var r = t; var ci = 0u; var xi = 0u; var yi = 0u;
  for (var d = i32(P[5]) - 1; d >= 0; d--) {
    let k = u32(d); let dim = P[8u + k]; let q = r % dim; r /= dim;
    ci += q * P[16u + k]; xi += q * P[24u + k]; yi += q * P[32u + k];
  }
  let take = cb(P[1], ci) != 0u; let w = P[6];
  for (var j = 0u; j < w; j++) {
    A[P[4] + t * w + j] = select(ry(P[3] + yi * w + j), rx(P[2] + xi * w + j), take);
  }
}`;
  return [{ code, params: p, threads: z.numel }];
}

// CAST bodies: \`i\` the element, \`o\` the output word base; loads via rx (words) or cb (bytes)
const F2I = 'select(select(select(i32(v), -2147483647 - 1, v <= -2147483648.0), 2147483647, v >= 2147483648.0), 0, v != v)';
const CASTS = /** @type {Record<string, string>} */ ({
  [`${F32}:${I32}`]: `let v = bitcast<f32>(rx(P[1] + i)); A[o] = bitcast<u32>(${F2I});`,
  [`${I32}:${F32}`]: 'A[o] = bitcast<u32>(f32(bitcast<i32>(rx(P[1] + i))));',
  [`${I32}:${I64}`]: 'let v = rx(P[1] + i); A[o] = v; A[o + 1u] = select(0u, 0xffffffffu, bitcast<i32>(v) < 0);',
  [`${I64}:${I32}`]: 'A[o] = rx(P[1] + 2u * i);',
  // values in int32 (and uint32) range: one rounding, like the core; beyond (|v| >= 2^32) the two words are
  // converted separately, within 2 float32 ulps
  [`${I64}:${F32}`]: `let lo = rx(P[1] + 2u * i); let hi = rx(P[1] + 2u * i + 1u);
  var v = f32(bitcast<i32>(hi)) * 4294967296.0 + f32(lo);
  if (hi == select(0u, 0xffffffffu, bitcast<i32>(lo) < 0)) { v = f32(bitcast<i32>(lo)); }
  else if (hi == 0u) { v = f32(lo); }
  A[o] = bitcast<u32>(v);`,
  [`${F32}:${I64}`]: `let v = trunc(bitcast<f32>(rx(P[1] + i)));
  var lo = 0u; var hi = 0u;
  if (v != v) { lo = 0u; hi = 0u; }
  else if (v >= 9223372036854775808.0) { lo = 0xffffffffu; hi = 0x7fffffffu; }
  else if (v < -9223372036854775808.0) { lo = 0u; hi = 0x80000000u; }
  else if (abs(v) < 2147483648.0) { let k = i32(v); lo = bitcast<u32>(k); hi = select(0u, 0xffffffffu, k < 0); }
  else { let h = floor(v / 4294967296.0); hi = bitcast<u32>(i32(h)); lo = u32(v - h * 4294967296.0); }
  A[o] = lo; A[o + 1u] = hi;`,
  [`${BOOL}:${F32}`]: 'A[o] = bitcast<u32>(f32(cb(P[1], i)));',
  [`${BOOL}:${I32}`]: 'A[o] = cb(P[1], i);',
  [`${BOOL}:${I64}`]: 'A[o] = cb(P[1], i); A[o + 1u] = 0u;',
  [`${U8}:${F32}`]: 'A[o] = bitcast<u32>(f32(cb(P[1], i)));',
});

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function cast(node, ctx) {
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]);
  if (y.dtype === BOOL) return toBool(node, ctx);
  const body = CASTS[`${x.dtype}:${y.dtype}`];
  if (!body) return `cast ${x.dtype} -> ${y.dtype}`;
  if (x.numel !== y.numel) ctx.fail('shapes differ');
  const w = DTYPE_SIZE[/** @type {keyof DTYPE_SIZE} */ (y.dtype)] / 4;
  const code = wordLoader('rx', ctx.src(x.id)) + byteLoader('cb', ctx.src(x.id)) +
    `${MAIN}\n  let i = t; let o = P[2] + t * ${w}u;\n  ${body}\n}`;
  return [{ code, params: [y.numel, ctx.src(x.id).base, ctx.src(y.id).base], threads: y.numel }];
}
