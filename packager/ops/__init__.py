"""Lowerings, one module per op family. Every module here is imported by packager.lower and registers
its ONNX op types with @lowers; a new family only needs a new file."""
