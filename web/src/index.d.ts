// Types for the edgepack web runtime (src/runtime.js).

/** Which build of the runtime to load: 'auto' picks the best one the engine validates. */
export type Variant = 'auto' | 'simd' | 'scalar' | 'relaxed';

/** Element types a bundle's inputs/outputs can have, as named in manifest.json. */
export type DType = 'float32' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool' | 'float16';

/** The TypedArray carrying each dtype (bool as 0/1 bytes, float16 as raw bits). */
export interface DataTypeMap {
  float32: Float32Array;
  int64: BigInt64Array;
  int32: Int32Array;
  int8: Int8Array;
  uint8: Uint8Array;
  bool: Uint8Array;
  float16: Uint16Array;
}
export type TensorData = DataTypeMap[DType];

/** An input or output as described in manifest.json. */
export interface TensorSpec {
  name: string;
  dtype: DType;
  shape: number[];
  /** tensor id in the plan */
  tensor: number;
}

/** An input tensor (an onnxruntime-web Tensor also fits). */
export interface Tensor {
  data: TensorData;
  dims: readonly number[];
}

/** An output tensor: a fresh copy, valid after later runs. */
export interface OutputTensor extends Tensor {
  dtype: DType;
}

export interface LoadOptions {
  /** default 'auto': relaxed SIMD, else SIMD128, else scalar */
  variant?: Variant;
  /** check model.plan and the .wasm against the SHA-256 in manifest.json (default true; needs WebCrypto) */
  verify?: boolean;
  /** fetch to use for URL bundles (default globalThis.fetch) */
  fetch?: typeof fetch;
  /** Ed25519 public key (64 hex characters or 32 bytes): the bundle must be signed by it (manifest.sig over
   * manifest.json's exact bytes) and every file the manifest lists must match its SHA-256; for a Node
   * directory, files the manifest does not list are refused too. Implies verify: true. Needs WebCrypto Ed25519
   * (Node >= 20, current Chromium/Firefox/Safari). */
  publicKey?: string | Uint8Array;
  /** run edgepack-threads.wasm with this many threads, the caller included (1..16; needs shared memory:
   * Node, or a crossOriginIsolated page). See docs/threads.md. */
  threads?: number;
}

/** Every failure of the runtime: bad bundle, refused plan (status set), wrong inputs. */
export class EdgepackError extends Error {
  /** ep_status code when the wasm core refused (see wasm_kernels/include/edgepack.h) */
  status?: number;
}

export class Session {
  readonly manifest: Record<string, unknown>;
  /** the variant actually loaded */
  readonly variant: 'simd' | 'scalar' | 'relaxed' | 'threads';
  /** the vector backend the core reports */
  readonly vec: string;
  readonly inputs: TensorSpec[];
  readonly outputs: TensorSpec[];
  /** Throws EdgepackError on unknown/missing names, wrong TypedArray kind, dims or length. */
  checkFeeds(feeds: Record<string, Tensor>): void;
  run(feeds: Record<string, Tensor>): Promise<Record<string, OutputTensor>>;
  runSync(feeds: Record<string, Tensor>): Record<string, OutputTensor>;
  /** Stops the worker threads of a threaded session (nothing to do otherwise). */
  close(): Promise<void>;
}

export const VARIANTS: Readonly<{ simd: 'edgepack.wasm'; scalar: 'edgepack-scalar.wasm'; relaxed: 'edgepack-relaxed.wasm' }>;

/** What this engine runs best. */
export function detectVariant(): 'relaxed' | 'simd' | 'scalar';

/** Load a bundle: a directory path or file: URL in Node, a URL in browsers. */
export function load(source: string | URL, options?: LoadOptions): Promise<Session>;
