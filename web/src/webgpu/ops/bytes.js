// Kernels whose output has 1-byte elements (bool): BINARY comparisons and logic, UNARY NOT, CAST to bool.
// WGSL stores whole 32-bit words, so a thread computes 4 consecutive elements and stores their word; the
// spare bytes of a tensor's last word are padding of its 64-byte aligned arena block.

import { BINARY } from '../opcodes.js';
import { F32, I32, I64, strides } from '../plan.js';
import { MAIN, floatLoader, wordLoader } from '../wgsl.js';

/** @typedef {import('../plan.js').PlanNode} PlanNode
 *  @typedef {import('./context.js').BuildContext} BuildContext
 *  @typedef {import('./context.js').Dispatch} Dispatch
 *  @typedef {import('../wgsl.js').Src} Src */

const BOOL = 9, U8 = 2;

/** WGSL reading element i of an operand as a typed value (\`fn name(i) -> T\`), by dtype; null if unsupported.
 * @param {string} name @param {Src} src @param {number} dtype @param {number} baseAt parameter word of its base */
function reader(name, src, dtype, baseAt) {
  if (dtype === F32) return floatLoader(`${name}_`, src) + `fn ${name}(i: u32) -> f32 { return ${name}_(P[${baseAt}] + i); }\n`;
  if (dtype === I32) return wordLoader(`${name}_`, src) + `fn ${name}(i: u32) -> i32 { return bitcast<i32>(${name}_(P[${baseAt}] + i)); }\n`;
  if (dtype === I64) return wordLoader(`${name}_`, src) + `fn ${name}(i: u32) -> vec2<u32> { let b = P[${baseAt}] + 2u * i; return vec2<u32>(${name}_(b), ${name}_(b + 1u)); }\n`;
  if (dtype === BOOL || dtype === U8) {
    return `fn ${name}(i: u32) -> u32 { return (${src.buf}[P[${baseAt}] + (i >> 2u)] >> ((i & 3u) * 8u)) & 0xffu; }\n`;
  }
  return null;
}

const LT64 = 'fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool { return bitcast<i32>(a.y) < bitcast<i32>(b.y) || (a.y == b.y && a.x < b.x); }\n';

/** BINARY fn EQUAL..XOR on (a, b) of one dtype, as a WGSL bool expression. @param {number} fn @param {number} dtype */
function predicate(fn, dtype) {
  if (fn >= BINARY.AND) return dtype === BOOL ? ['(a != 0u) && (b != 0u)', '(a != 0u) || (b != 0u)', '(a != 0u) != (b != 0u)'][fn - BINARY.AND] : null;
  if (dtype === I64) return ['all(a == b)', 'lt64(a, b)', 'lt64(b, a)', '!lt64(b, a)', '!lt64(a, b)'][fn - BINARY.EQUAL];
  return ['a == b', 'a < b', 'a > b', 'a <= b', 'a >= b'][fn - BINARY.EQUAL];
}

/** The shader skeleton: \`one(i)\` gives element i's 0/1; P[0] = words, P[4] = elements, P[3] = output base. */
const PACK = /* wgsl */ `${MAIN}
  var word = 0u;
  for (var e = 0u; e < 4u; e++) {
    let i = t * 4u + e;
    if (i >= P[4]) { break; }
    word |= one(i) << (e * 8u);
  }
  A[P[3] + t] = word;
}`;

/** @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function compare(node, ctx) {
  const [Ai, Bi] = node.inputs, y = ctx.t(node.outputs[0]), fn = node.params[0];
  const dt = ctx.t(Ai).dtype;
  if (y.dtype !== BOOL || ctx.t(Bi).dtype !== dt) return 'dtypes';
  const pred = predicate(fn, dt);
  const ra = reader('ga', ctx.src(Ai), dt, 1), rb = reader('gb', ctx.src(Bi), dt, 2);
  if (!pred || !ra || !rb || y.rank > 8) return `function ${fn} on dtype ${dt}`;
  const r = y.rank, p = [Math.ceil(y.numel / 4), ctx.src(Ai).base, ctx.src(Bi).base, ctx.src(y.id).base, y.numel, r, ...new Array(24).fill(0)];
  y.dims.forEach((d, i) => { p[6 + i] = d; });
  const index = (/** @type {number} */ id, /** @type {number} */ at) => {
    const d = ctx.t(id).dims;
    if (d.length > r) ctx.fail('operand rank exceeds the output rank');
    const pad = [...new Array(r - d.length).fill(1), ...d], s = strides(pad);
    if (pad.some((v, i) => v !== 1 && v !== y.dims[i])) ctx.fail(`operand shape [${d}] does not broadcast to [${y.dims}]`);
    if (pad.every((v, i) => v === y.dims[i])) return 'i';
    pad.forEach((v, i) => { p[at + i] = v === 1 ? 0 : s[i]; });
    return `bidx(i, ${at}u)`;
  };
  const ia = index(Ai, 14), ib = index(Bi, 22);
  const code = ra + rb + (dt === I64 ? LT64 : '') + /* wgsl */ `
fn bidx(t: u32, at: u32) -> u32 {
  var r = t; var o = 0u;
  for (var d = i32(P[5]) - 1; d >= 0; d--) { let dim = P[6u + u32(d)]; o += (r % dim) * P[at + u32(d)]; r /= dim; }
  return o;
}
fn one(i: u32) -> u32 { let a = ga(${ia}); let b = gb(${ib}); return select(0u, 1u, ${pred}); }
` + PACK;
  return [{ code, params: p, threads: p[0] }];
}

/** UNARY NOT and CAST to bool. @param {PlanNode} node @param {BuildContext} ctx @returns {Dispatch[] | string} */
export function toBool(node, ctx) {
  const x = ctx.t(node.inputs[0]), y = ctx.t(node.outputs[0]);
  if (y.dtype !== BOOL || x.numel !== y.numel) return 'dtypes';
  const not = node.params.length === 1;   // UNARY [NOT]; CAST has no parameter words
  const rd = reader('gx', ctx.src(x.id), x.dtype, 1);
  if (!rd || (not && x.dtype !== BOOL)) return `dtype ${x.dtype}`;
  const test = x.dtype === I64 ? 'any(v != vec2<u32>())' : x.dtype === F32 ? 'v != 0.0' : x.dtype === I32 ? 'v != 0' : 'v != 0u';
  const code = rd + `fn one(i: u32) -> u32 { let v = gx(i); return select(0u, 1u, ${not ? `!(${test})` : test}); }\n` + PACK;
  return [{ code, params: [Math.ceil(y.numel / 4), ctx.src(x.id).base, 0, ctx.src(y.id).base, y.numel], threads: Math.ceil(y.numel / 4) }];
}
