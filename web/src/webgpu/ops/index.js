// Kernel id -> the builder that turns a plan node into WGSL dispatches. A builder returns its dispatches,
// or a string saying why this node runs on the wasm core instead (dtype, rank, a mode without a shader).

import { OP } from '../plan.js';
import { conv, depthwise } from './conv.js';
import { concat, copy, expand, gather, pad, slice, split, transpose } from './data.js';
import { batchnorm, binary, cast, unary, where } from './elementwise.js';
import { attention, gemm, matmul } from './matmul.js';
import { globalPool, layernorm, pool, reduce, softmax } from './reduce.js';
import { convTranspose, resize } from './upsample.js';

/** @typedef {(node: import('../plan.js').PlanNode, ctx: import('./context.js').BuildContext) =>
 *   import('./context.js').Dispatch[] | string} Builder */

/** @type {Record<number, Builder>} */
export const BUILDERS = {
  [OP.CONV]: conv, [OP.WINOGRAD_CONV]: conv, [OP.WINOGRAD_CONV_F4]: conv, [OP.DEPTHWISE_CONV]: depthwise,
  [OP.GEMM]: gemm, [OP.MATMUL]: matmul, [OP.ATTENTION]: attention,
  [OP.UNARY]: unary, [OP.BINARY]: binary, [OP.BATCHNORM]: batchnorm,
  [OP.SOFTMAX]: softmax, [OP.LAYERNORM]: layernorm, [OP.REDUCE]: reduce,
  [OP.POOL]: pool, [OP.GLOBAL_POOL]: globalPool,
  [OP.GATHER]: gather, [OP.TRANSPOSE]: transpose, [OP.SLICE]: slice, [OP.CONCAT]: concat, [OP.COPY]: copy,
  [OP.SPLIT]: split, [OP.EXPAND]: expand, [OP.PAD]: pad, [OP.WHERE]: where, [OP.CAST]: cast,
  [OP.RESIZE]: resize, [OP.CONV_TRANSPOSE]: convTranspose,
};
