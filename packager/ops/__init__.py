"""Lowerings, one module per op family. Every module here is imported by the registry (packager/lowering/registry.py,
load_ops) and registers its ONNX op types with @lowers (from packager.lowering); a new family only needs a new file."""
