// Types for the edgepack web runtime (src/runtime.js).

/** Which build of the runtime to load: 'auto' picks the best one the engine validates. */
export type Variant = 'auto' | 'simd' | 'scalar' | 'relaxed';

/** Element types a bundle's inputs/outputs can have, as named in manifest.json (the plan's dtype table, dtypes.js). */
export type DType = 'float32' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool' | 'float16' | 'float64' | 'int16' | 'uint16'
  | 'uint32' | 'uint64' | 'bfloat16' | 'float8_e4m3fn' | 'float8_e4m3fnuz' | 'float8_e5m2' | 'float8_e5m2fnuz' | 'uint4'
  | 'int4' | 'float4_e2m1fn' | 'float8_e8m0fnu' | 'uint2' | 'int2';

/** The TypedArray carrying each dtype: bool as 0/1 bytes, float16 and bfloat16 as raw bits, the float8 and float4
 * formats as raw codes (one per byte), int4/int2 and uint4/uint2 one value per element (not packed two per byte as
 * ONNX stores them and onnxruntime-web's int4 tensors hold them). */
export interface DataTypeMap {
  float32: Float32Array;
  int64: BigInt64Array;
  int32: Int32Array;
  int8: Int8Array;
  uint8: Uint8Array;
  bool: Uint8Array;
  float16: Uint16Array;
  float64: Float64Array;
  int16: Int16Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  bfloat16: Uint16Array;
  float8_e4m3fn: Uint8Array;
  float8_e4m3fnuz: Uint8Array;
  float8_e5m2: Uint8Array;
  float8_e5m2fnuz: Uint8Array;
  uint4: Uint8Array;
  int4: Int8Array;
  float4_e2m1fn: Uint8Array;
  float8_e8m0fnu: Uint8Array;
  uint2: Uint8Array;
  int2: Int8Array;
}
export type TensorData = DataTypeMap[DType];

/** A dim of a manifest shape: a number (fixed); in a version-2 bundle (shapes resolved at run time) a symbol
 * name such as 'batch' (any extent within the bundle's bounds, the same for every input naming it), or, for an
 * output, null (an extent that varies otherwise; the run's output dims give it). */
export type Dim = number | string | null;

/** Bounds of a symbolic dim (manifest.json "dims"). */
export interface DimBound {
  min: number;
  /** null: unbounded */
  max: number | null;
  /** the extent the bundle was verified at */
  example?: number;
}

/** An input or output as described in manifest.json. */
export interface TensorSpec {
  name: string;
  dtype: DType;
  shape: Dim[];
  /** tensor id in the plan */
  tensor: number;
}

/** An input tensor. */
export interface Tensor {
  data: TensorData;
  dims: readonly number[];
}

/** An onnxruntime-web (onnxruntime-common) `Tensor` as an input: its `type` must be the input's dtype and its data
 * on the CPU (`location` 'cpu'); `data` is then the TypedArray of that dtype. */
export interface OrtTensorLike {
  readonly type: string;
  readonly data: unknown;
  readonly dims: readonly number[];
  readonly location?: string;
}

/** What run() takes per input. */
export type Feed = Tensor | OrtTensorLike;

/** An output tensor: a fresh copy, valid after later runs; dims are this run's (resolved, for a version-2 bundle). */
export interface OutputTensor extends Tensor {
  dtype: DType;
}

/** Where a Session runs: the wasm core, or WebGPU compute shaders (with the wasm core as fallback). */
export type Backend = 'wasm' | 'webgpu';

/** What a Session actually uses (what the core reports, not what was asked for). */
export interface Features {
  /** the wasm core is the SIMD128 build (or the relaxed one) */
  simd: boolean;
  /** the wasm core uses relaxed SIMD (fused multiply-add) */
  relaxed: boolean;
  /** worker threads the wasm core runs on (1: single-threaded) */
  threads: number;
  /** run() goes to WebGPU */
  webgpu: boolean;
  /** the WebGPU backend computes in float16 where the model allows */
  f16: boolean;
  /** the relaxed build's int8 dot form on this engine (the faster of the two, timed once at load unless
   * LoadOptions.int8Dot names one; the same results either way); null for the SIMD128 and scalar builds */
  int8Dot: 'pair' | 'fused' | null;
}

export interface LoadOptions {
  /** default 'auto': WebGPU where a hardware (not software/fallback) adapter exists and this build has the
   * WebGPU backend, else wasm. 'webgpu' throws an EdgepackError when WebGPU cannot run here. */
  backend?: 'auto' | Backend;
  /** default 'auto': the bundle's threaded build of the chosen ISA (edgepack-threads-relaxed.wasm or
   * edgepack-threads.wasm) on up to 4 threads where the page is cross-origin isolated (COOP/COEP headers; always
   * in Node), else single-threaded; with an explicit variant, 'auto' is 1. A number > 1 asks for that many
   * threads (not with variant 'scalar'); 1 is single-threaded. When threads cannot be used, session.notes says why. */
  threads?: 'auto' | number;
  /** default 'auto': relaxed SIMD, else SIMD128, else scalar */
  variant?: Variant;
  /** check model.plan and the .wasm against the SHA-256 in manifest.json as they stream (default true; plain JS,
   * works without WebCrypto, e.g. on plain http from a LAN address) */
  verify?: boolean;
  /** fetch to use for URL bundles (default globalThis.fetch) */
  fetch?: typeof fetch;
  /** Called as bytes arrive (model.plan and the wasm build: each read once, hashed as it streams). */
  onProgress?: (progress: Progress) => void;
  /** Cache API cache name (true: 'edgepack'): files found there are read without the network; fetched ones are
   * stored there once the load has checked them. The cache is never refreshed: use a new name (or new URLs) for a
   * new bundle. Needs a secure context (https or localhost); elsewhere session.notes says it was not used. */
  cache?: string | boolean;
  /** the relaxed build's int8 dot: 'auto' (default: the faster on this engine, timed once), 'pair' or 'fused' */
  int8Dot?: 'auto' | 'pair' | 'fused';
  /** Ed25519 public key (64 hex characters or 32 bytes): the bundle must be signed by it (manifest.sig over
   * manifest.json's exact bytes) and every file the manifest lists must match its SHA-256; for a Node
   * directory, files the manifest does not list are refused too. Implies verify: true. Needs WebCrypto Ed25519
   * (Node >= 20, current Chromium/Firefox/Safari) in a secure context: without it load() throws before downloading. */
  publicKey?: string | Uint8Array;
}

/** Progress of a load (see LoadOptions.onProgress). */
export interface Progress {
  /** the file being read: 'model.plan' or a .wasm build */
  file: string;
  /** bytes of that file read so far */
  loaded: number;
  /** its size (manifest.json, else Content-Length), null when unknown */
  total: number | null;
  /** bytes read so far over the files this load reads after manifest.json */
  bytesLoaded: number;
  /** their total size (from manifest.json), null when unknown */
  bytesTotal: number | null;
}

/** Every failure of the runtime: bad bundle, refused plan (status set), wrong inputs. */
export class EdgepackError extends Error {
  /** ep_status code when the wasm core refused (see wasm_kernels/include/edgepack.h) */
  status?: number;
}

export class Session {
  readonly manifest: Record<string, unknown>;
  /** the wasm build actually loaded ('threads': edgepack-threads.wasm, 'threads-relaxed':
   * edgepack-threads-relaxed.wasm; features.simd/relaxed give its ISA) */
  readonly variant: 'simd' | 'scalar' | 'relaxed' | 'threads' | 'threads-relaxed';
  /** where run() executes */
  readonly backend: Backend;
  /** what the session actually uses */
  readonly features: Readonly<Features>;
  /** the WebGPU adapter's description, when backend is 'webgpu' */
  readonly adapter?: string;
  /** why a requested or 'auto' feature was not used (e.g. "threads: single-threaded, the page is not cross-origin isolated") */
  readonly notes: readonly string[];
  /** the vector backend the core reports */
  readonly vec: string;
  readonly inputs: TensorSpec[];
  readonly outputs: TensorSpec[];
  /** the plan resolves shapes at run time (version 2): inputs may take any extent of a symbolic dim within
   * `dims`; a run at new dims resolves and re-plans memory (growing it when needed), a repeated shape costs nothing */
  readonly dynamic: boolean;
  /** bounds of the symbolic dims by name (empty for a bundle of fixed shapes) */
  readonly dims: Readonly<Record<string, DimBound>>;
  /** Throws EdgepackError on unknown/missing names, wrong TypedArray kind, dims or length; for a version-2 bundle,
   * on a dim outside its bounds or a symbol given two extents (naming the input, dimension and bound). */
  checkFeeds(feeds: Record<string, Feed>): void;
  /** Runs the model on the session's backend. Throws EdgepackError after destroy(). */
  run(feeds: Record<string, Feed>): Promise<Record<string, OutputTensor>>;
  /** Runs the model on the wasm core, whatever the backend. */
  runSync(feeds: Record<string, Feed>): Record<string, OutputTensor>;
  /** Frees GPU resources and stops worker threads; run() throws an EdgepackError afterwards. */
  destroy(): void;
  /** destroy(), as a promise. */
  close(): Promise<void>;
}

export const VARIANTS: Readonly<{ simd: 'edgepack.wasm'; scalar: 'edgepack-scalar.wasm'; relaxed: 'edgepack-relaxed.wasm' }>;
/** The threaded builds' file names in a bundle, by ISA. */
export const THREADED_WASM: Readonly<{ simd: 'edgepack-threads.wasm'; relaxed: 'edgepack-threads-relaxed.wasm' }>;

/** A bundle's files by name ('manifest.json', 'model.plan', the .wasm files, 'manifest.sig'), each a URL: what a
 * bundle packaged as an npm package passes, so that bundlers see `new URL('./file', import.meta.url)`. */
export type BundleFiles = Record<string, string | URL>;

/** This runtime's version (the npm package's). */
export const VERSION: string;

/** What this engine runs best. */
export function detectVariant(): 'relaxed' | 'simd' | 'scalar';

/** Load a bundle: a directory path or file: URL in Node, a URL in browsers, or its files' URLs. */
export function load(source: string | URL | BundleFiles, options?: LoadOptions): Promise<Session>;

/** RGBA pixels with their size: ImageData, or the same shape from anywhere (works in Node). */
export interface ImageDataLike {
  data: Uint8ClampedArray | Uint8Array;
  width: number;
  height: number;
}

/** What imageToTensor reads: in browsers any drawable image (resized through a canvas); in Node, RGBA pixels. */
export type ImageSource = ImageDataLike | ImageData | HTMLImageElement | HTMLCanvasElement | OffscreenCanvas | ImageBitmap | HTMLVideoElement;

export interface ImageToTensorOptions {
  /** default 'NCHW' ([1, C, H, W]); 'NHWC' gives [1, H, W, C] */
  layout?: 'NCHW' | 'NHWC';
  /** resize to this size first (through a canvas: browsers) */
  width?: number;
  height?: number;
  /** 3 (RGB, default), 1 (luma), 4 (RGBA) */
  channels?: 1 | 3 | 4;
  /** pixel multiplier before mean/std (default 1/255) */
  scale?: number;
  /** subtracted per channel after scaling (default 0); ImageNet: [0.485, 0.456, 0.406] */
  mean?: number | readonly number[];
  /** divided per channel after mean (default 1); ImageNet: [0.229, 0.224, 0.225] */
  std?: number | readonly number[];
  /** channels in B, G, R order */
  bgr?: boolean;
}

/** An image as a normalized float32 tensor: ((pixel * scale) - mean[c]) / std[c], NCHW or NHWC, batch 1. */
export function imageToTensor(image: ImageSource, options?: ImageToTensorOptions): { data: Float32Array; dims: number[] };

export interface AudioFramesOptions {
  /** samples per frame */
  frameLength: number;
  /** samples between frame starts (default frameLength: no overlap) */
  hop?: number;
  /** zero-pad the last partial frame (default true) or drop it */
  pad?: boolean;
  /** 'hann': multiply each frame by a periodic Hann window (default 'none') */
  window?: 'none' | 'hann';
}

/** Mono PCM samples (AudioBuffer.getChannelData(0)) as overlapping frames: a [frames, frameLength] tensor. */
export function audioFrames(pcm: Float32Array, options: AudioFramesOptions): { data: Float32Array; dims: [number, number] };
