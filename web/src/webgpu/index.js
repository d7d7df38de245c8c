// WebGPU backend of the edgepack web runtime: WGSL compute shaders executing model.plan with tensors
// resident on the GPU; nodes without a shader run on the wasm core. See docs/webgpu.md.

import { EdgepackError } from '../runtime.js';
import { WebGPUBackend } from './backend.js';
import { OP, parsePlan } from './plan.js';

/** @typedef {{data: ArrayBufferView, dims: readonly number[]}} Tensor */

/** Whether this environment has WebGPU with an adapter. @returns {Promise<boolean>} */
export async function webgpuAvailable() {
  try {
    const gpu = /** @type {any} */ (globalThis.navigator)?.gpu;
    return !!(gpu && (await gpu.requestAdapter()));
  } catch {
    return false;
  }
}

/**
 * Opens a plan on the GPU.
 * @param {{plan: Uint8Array, manifest: any, wasm: any, wasmOps?: string[], f16Weights?: boolean,
 *   powerPreference?: GPUPowerPreference}} options
 *   plan: model.plan's bytes; manifest: the parsed manifest.json; wasm: a Session (web/src/runtime.js) opened
 *   on the same plan, used for nodes without a shader; wasmOps: kernel names (e.g. 'SOFTMAX') to run on
 *   the wasm core anyway (testing, or working around a driver); f16Weights: keep float weights that are
 *   exact in float16 (those of an fp16 bundle) as float16 in GPU memory, default: when shader-f16 is
 *   enabled (the adapter has it and the manifest's precision is fp16); without shader-f16 they are
 *   decoded with unpack2x16float.
 * @returns {Promise<{run: (feeds: Record<string, {data: ArrayBufferView, dims: readonly number[]}>) =>
 *   Promise<Record<string, {data: any, dims: number[], dtype: string}>>,
 *   profile: (feeds: Record<string, Tensor>) => Promise<{node: number, op: string, on: string, ms: number}[]>,
 *   features: {f16: boolean, adapter: string, f16Weights?: boolean},
 *   memory: {arenaBytes: number, weightBytes: number, scratchBytes: number},
 *   placement: {node: number, op: string, on: 'gpu'|'wasm'|'prologue', why?: string}[], destroy: () => void}>}
 */
export async function createWebGPUBackend({ plan, manifest, wasm, wasmOps = [], f16Weights, powerPreference }) {
  const gpu = /** @type {any} */ (globalThis.navigator)?.gpu;
  if (!gpu) throw new EdgepackError('WebGPU is not available here (navigator.gpu is missing)');
  const unknown = wasmOps.filter((n) => !Object.hasOwn(OP, n));
  if (unknown.length) throw new EdgepackError(`wasmOps: unknown kernel(s) ${unknown.join(', ')}`);
  const parsed = parsePlan(plan);
  /** @type {GPUAdapter | null} */
  const adapter = await gpu.requestAdapter(powerPreference ? { powerPreference } : undefined);
  if (!adapter) throw new EdgepackError('WebGPU: no adapter available');
  // shader-f16 serves float16 weight storage (native f16 loads); arithmetic stays float32 (docs/webgpu.md)
  const precision = manifest?.precision;
  const f16 = (precision === 'fp16' || precision?.mode === 'fp16') && adapter.features.has('shader-f16');
  const lim = adapter.limits;
  const device = await adapter.requestDevice({
    requiredFeatures: f16 ? ['shader-f16'] : [],
    requiredLimits: { maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize, maxBufferSize: lim.maxBufferSize },
  });
  const info = /** @type {any} */ (adapter).info || {};
  const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' ') || 'unknown';
  const backend = new WebGPUBackend(device, parsed, manifest, wasm, { f16, adapter: name });
  device.pushErrorScope('validation');
  try {
    await backend.build(new Set(wasmOps), f16Weights ?? f16);
  } catch (e) {
    await device.popErrorScope();
    backend.destroy();
    throw e;
  }
  const err = await device.popErrorScope();
  if (err) {
    backend.destroy();
    throw new EdgepackError(`WebGPU backend: GPU error while loading: ${err.message}`);
  }
  return {
    run: (/** @type {Record<string, Tensor>} */ feeds) => backend.run(feeds),
    profile: (/** @type {Record<string, Tensor>} */ feeds) => backend.profile(feeds),
    features: backend.features,
    placement: backend.placement,
    memory: backend.memory,
    destroy: () => backend.destroy(),
  };
}
