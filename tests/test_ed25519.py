"""edgepack-run's own Ed25519 verify + SHA-512 (edge/cli/ep_ed25519.c, ASan + UBSan build) against the
`cryptography` package: valid signatures pass; a wrong key, any flipped message or signature bit, a
non-canonical S, non-canonical or small-order A and R are refused."""
from __future__ import annotations

import hashlib
import os
import random
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "edge" / "build" / "asan" / "ed25519_test"
L = 2**252 + 27742317777372353535851937790883648493
P = 2**255 - 19

# Encodings of the 8 points of small order (order 1, 2, 4, 8) and non-canonical variants (y >= p).
SMALL_ORDER = [
    "0100000000000000000000000000000000000000000000000000000000000000",   # neutral (0, 1)
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",   # (0, -1), order 2
    "0000000000000000000000000000000000000000000000000000000000000080",   # (+-sqrt(-1), 0), order 4
    "0000000000000000000000000000000000000000000000000000000000000000",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",   # order 8
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
]
NON_CANONICAL = [
    "0100000000000000000000000000000000000000000000000000000000000080",   # x = 0 with the sign bit set
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",   # y = p
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",   # y = p + 1
]


@pytest.fixture(scope="module")
def driver() -> Path:
    subprocess.run(["make", "-s", "-C", str(REPO / "edge"), "build/asan/ed25519_test"], check=True, capture_output=True)
    return DRIVER


def _run(driver: Path, lines: list[str]) -> list[str]:
    r = subprocess.run([str(driver)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-2000:]
    out = r.stdout.split()
    assert len(out) == len(lines)
    return out


def _v(pk: bytes, sig: bytes, msg: bytes) -> str:
    return f"V {pk.hex()} {sig.hex()} {msg.hex() or '-'}"


def test_sha512_matches_hashlib(driver: Path) -> None:
    rng = random.Random(1)
    msgs = [os.urandom(n) for n in [0, 1, 55, 111, 112, 113, 127, 128, 129, 239, 240, 256, 1000, 70000]]
    msgs += [bytes(rng.randrange(256) for _ in range(rng.randrange(600))) for _ in range(40)]
    got = _run(driver, [f"H {m.hex() or '-'}" for m in msgs])
    assert got == [hashlib.sha512(m).hexdigest() for m in msgs]


def test_verify_matches_cryptography(driver: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    rng = random.Random(2)
    lines, want = [], []
    keys = [ed25519.Ed25519PrivateKey.generate() for _ in range(6)]
    raw = [k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) for k in keys]
    for i in range(60):
        k, pk = keys[i % 6], raw[i % 6]
        msg = os.urandom(rng.choice([0, 1, 31, 64, 200, 2000]))
        sig = k.sign(msg)
        lines.append(_v(pk, sig, msg)); want.append("1")
        lines.append(_v(raw[(i + 1) % 6], sig, msg)); want.append("0")          # wrong key
        b = bytearray(sig); b[rng.randrange(64)] ^= 1 << rng.randrange(8)
        lines.append(_v(pk, bytes(b), msg)); want.append("0")                   # flipped signature bit
        if msg:
            m = bytearray(msg); m[rng.randrange(len(m))] ^= 1 << rng.randrange(8)
            lines.append(_v(pk, sig, bytes(m))); want.append("0")               # flipped message bit
        b = bytearray(pk); b[rng.randrange(32)] ^= 1 << rng.randrange(8)
        lines.append(_v(bytes(b), sig, msg)); want.append("0")                  # flipped key bit
        s = int.from_bytes(sig[32:], "little")
        lines.append(_v(pk, sig[:32] + (s + L).to_bytes(32, "little"), msg)); want.append("0")  # non-canonical S
    assert _run(driver, lines) == want


def test_small_order_and_non_canonical_points_refused(driver: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    k = ed25519.Ed25519PrivateKey.generate()
    pk = k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    msg = b"manifest"
    sig = k.sign(msg)
    lines = []
    for a in SMALL_ORDER + NON_CANONICAL:
        a = bytes.fromhex(a)
        # the classic forgery: small-order A and R with S = 0 satisfy [S]B = R + [h]A for every message
        lines.append(_v(a, a + bytes(32), msg))
        lines.append(_v(a, sig, msg))
        lines.append(_v(pk, a + sig[32:], msg))     # small-order / non-canonical R
    assert _run(driver, lines) == ["0"] * len(lines)
    assert _run(driver, [_v(pk, sig, msg)]) == ["1"]
