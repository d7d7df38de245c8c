// edgepack: run packaged ONNX models (edgepack bundles) with WebAssembly. See runtime.js.
export { load, detectVariant, Session, EdgepackError, VARIANTS } from './runtime.js';
