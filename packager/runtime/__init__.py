"""Runtimes the packager drives from Python: the bundle's own .wasm under wasmtime."""
