"""Train the digits CNN: edgepack's real-data accuracy check (docs/quantization.md).

scikit-learn's digits (1797 labelled 8x8 grayscale images, 10 classes), a fixed seed, a stratified
held-out test split. Writes, next to this script:
  digits_cnn.onnx          the float32 model (opset 17, input 'image' [1, 1, 8, 8] in [0, 1], output 'logits' [1, 10])
  digits_calibration.npz   'image' [N, 1, 8, 8] float32 + 'labels' [N]: samples from the training split
  digits_test.npz          'image' + 'labels': the held-out test split (never seen in training or calibration)

    python3 demo/digits/train.py        # about a minute on 2 CPU cores; reproducible
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

SEED = 0
HERE = Path(__file__).resolve().parent
CALIBRATION_SAMPLES = 200


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),      # 4x4
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))      # 2x2
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]        # [N, 1, 8, 8] in [0, 1]
    return train_test_split(x, d.target.astype(np.int64), test_size=0.3, random_state=SEED, stratify=d.target)


def train(epochs: int = 40) -> tuple[DigitsCNN, dict]:
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    x_tr, x_te, y_tr, y_te = data()
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(SEED)
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc_tr = float((model(xt).argmax(1) == yt).float().mean())
        acc_te = float((model(torch.from_numpy(x_te)).argmax(1) == torch.from_numpy(y_te)).float().mean())
    return model, {"train_accuracy": acc_tr, "test_accuracy": acc_te, "train": len(x_tr), "test": len(x_te)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE)
    a = ap.parse_args()
    model, stats = train()
    x_tr, x_te, y_tr, y_te = data()
    pick = np.random.default_rng(SEED).permutation(len(x_tr))[:CALIBRATION_SAMPLES]
    a.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(a.out / "digits_calibration.npz", image=x_tr[pick], labels=y_tr[pick])
    np.savez_compressed(a.out / "digits_test.npz", image=x_te, labels=y_te)
    torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), str(a.out / "digits_cnn.onnx"), input_names=["image"],
                      output_names=["logits"], opset_version=17, dynamo=False)
    print(f"digits CNN: train accuracy {stats['train_accuracy']:.4f} ({stats['train']} images), "
          f"held-out test accuracy {stats['test_accuracy']:.4f} ({stats['test']} images)")


if __name__ == "__main__":
    main()
