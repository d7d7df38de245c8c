// edgepack: run packaged ONNX models (edgepack bundles) with WebAssembly (and WebGPU). See runtime.js.
export { load, detectVariant, Session, EdgepackError, VARIANTS, THREADED_WASM, VERSION } from './runtime.js';
export { imageToTensor, audioFrames } from './helpers.js';
