// UNARY, BINARY (numpy broadcasting) and BATCHNORM on float32: one thread per output element.

import { F32, numel, strides } from '../plan.js';
import { MAIN, MATH, UNARY_NPARAMS, floatLoader, unaryExpr } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch */

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function unary(node, ctx) {
  const [X] = node.inputs, y = ctx.t(node.outputs[0]);
  const fn = node.params[0];
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

const BINARY_EXPR = [
  'a + b', 'a - b', 'a * b', 'a / b',
  'select(min(a, b), a + b, a != a || b != b)', 'select(max(a, b), a + b, a != a || b != b)',
  'pow_(a, b)', 'select(a, a * b, a < 0.0)',
];

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function binary(node, ctx) {
  const [Ai, Bi] = node.inputs, y = ctx.t(node.outputs[0]);
  const fn = node.params[0];
  if (fn >= 8 && fn <= 15) return 'bool tensors (comparison / logic)';
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
