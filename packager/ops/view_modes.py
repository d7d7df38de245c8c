"""VIEW's mode word (wasm_kernels/spec/ops.json, VIEW's `mode`): shared by the lowerings that emit VIEW nodes."""
VIEW_RESHAPE, VIEW_FLATTEN, VIEW_SQUEEZE, VIEW_UNSQUEEZE = 0, 1, 2, 3
