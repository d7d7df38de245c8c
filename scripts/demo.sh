#!/usr/bin/env bash
# The main job on a fresh machine: set up the toolchain if missing, package the demo model for the web,
# show what the bundle holds, run it next to onnxruntime, time it, and build the browser demo (draw a digit, voice
# activity, a detector: edgepack and onnxruntime-web side by side on the visitor's input).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
MODEL=${1:-.cache/models/cifar10net.onnx}
OUT=out/$(basename "$MODEL" .onnx)
echo; echo "== package --target web $MODEL -o $OUT"
package --target web "$MODEL" -o "$OUT"
echo; echo "== package inspect $OUT"
package inspect "$OUT"
echo; echo "== run on a random input, next to onnxruntime"
python3 - "$OUT" "$MODEL" <<'PY'
import sys, numpy as np, onnx
from packager import load_bundle
from packager.reference import random_inputs, reference_run
b = load_bundle(sys.argv[1])
feeds = random_inputs(b.example_inputs(), seed=42)   # run-time dims (the default for symbolic ones) at their example
got = b.run(feeds)
want = reference_run(onnx.load(sys.argv[2]), feeds)
for name, y in got.items():
    d = float(np.max(np.abs(y - want[name])))
    top = int(np.argmax(y.reshape(y.shape[0], -1)[0]))
    print(f"{name}: shape {list(y.shape)}, argmax {top}; onnxruntime argmax {int(np.argmax(want[name].reshape(y.shape[0], -1)[0]))}, max abs diff {d:.2e}")
PY
echo; echo "== package bench $OUT"
package bench "$OUT" --warmup 2 --seconds 3

echo; echo "== int8: the digits CNN (real data), quantized with its calibration set; accuracy through the wasm runtime"
package --target web demo/digits/digits_cnn.onnx -o out/digits_int8 --quantize int8 \
  --calibration demo/digits/digits_calibration.npz
sed -n '1,40p' out/digits_int8/accuracy.md

echo; echo "== web demo (demo/out): edgepack and onnxruntime-web side by side in the browser"
python3 demo/build.py --out demo/out
cat <<'EOF'

Open the demo: serve it on localhost (application/wasm, COOP/COEP headers for threads), then browse the URL:
    python3 scripts/serve.py demo/out          # -> http://127.0.0.1:8000/
EOF
