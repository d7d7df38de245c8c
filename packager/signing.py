"""Bundle signatures: Ed25519 over the exact bytes of manifest.json, which holds every file's SHA-256.

`manifest.sig` is the raw 64-byte signature. A runtime given a public key refuses a bundle that is
unsigned, whose signature does not verify, that holds a file the manifest does not list, or whose files
do not match their hashes: flipping any single byte anywhere in a signed bundle is caught."""
from __future__ import annotations

import re
from pathlib import Path

from .errors import BundleError, PackagerError

SIG_FILE = "manifest.sig"


def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise PackagerError("signing needs the 'cryptography' package (pip install cryptography)") from None
    return serialization, ed25519


def generate_keypair(private_path: Path, public_path: Path) -> None:
    """Write a new Ed25519 key pair: private key as PKCS#8 PEM, public key as raw 32 bytes in hex."""
    serialization, ed25519 = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    private_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    private_path.chmod(0o600)
    public_path.write_text(public_hex(key.public_key()) + "\n")


def public_hex(public_key) -> str:
    serialization, _ = _crypto()
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def load_private_key(path: Path):
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise PackagerError(f"{path}: not a readable unencrypted PEM private key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise PackagerError(f"{path}: not an Ed25519 key")
    return key


def load_public_key(key: str | bytes | Path):
    """A public key as 64 hex chars, 32 raw bytes, or a file holding either (or a PEM public key)."""
    serialization, ed25519 = _crypto()
    raw: bytes | None = None
    # A file path may itself be 64 characters long: only 64 hex digits count as a key written inline.
    if isinstance(key, Path) or (isinstance(key, str) and not re.fullmatch(r"[0-9a-fA-F]{64}", key.strip())):
        try:
            data = Path(key).read_bytes()
        except OSError as e:
            raise BundleError(f"public key '{key}': neither 64 hex characters nor a readable key file "
                              f"({e.strerror})") from None
        if data.startswith(b"-----BEGIN"):
            k = serialization.load_pem_public_key(data)
            if not isinstance(k, ed25519.Ed25519PublicKey):
                raise BundleError(f"{key}: not an Ed25519 public key")
            return k
        key = data.decode("ascii", "replace").strip() if len(data) != 32 else data
    if isinstance(key, str):
        try:
            raw = bytes.fromhex(key.strip())
        except ValueError:
            raw = None
    else:
        raw = bytes(key)
    if raw is None or len(raw) != 32:
        raise BundleError("public key must be 32 bytes (64 hex characters) of an Ed25519 key")
    return ed25519.Ed25519PublicKey.from_public_bytes(raw)


def sign_bundle(bundle: Path, private_key_path: Path) -> None:
    key = load_private_key(private_key_path)
    (Path(bundle) / SIG_FILE).write_bytes(key.sign((Path(bundle) / "manifest.json").read_bytes()))


def verify_signature(bundle: Path, public_key) -> bytes:
    """Check manifest.sig against manifest.json; returns the manifest's bytes as verified (parse those, not the file
    read again: it may have been swapped since)."""
    from cryptography.exceptions import InvalidSignature
    sig_path = Path(bundle) / SIG_FILE
    if not sig_path.is_file():
        raise BundleError(f"{bundle}: bundle is not signed ({SIG_FILE} missing) and a public key is required")
    sig = sig_path.read_bytes()
    if len(sig) != 64:
        raise BundleError(f"{bundle}: {SIG_FILE} is not a 64-byte Ed25519 signature")
    manifest = (Path(bundle) / "manifest.json").read_bytes()
    try:
        load_public_key(public_key).verify(sig, manifest)
    except InvalidSignature:
        raise BundleError(f"{bundle}: signature does not verify with the given public key "
                          f"(manifest.json tampered, or signed by another key)") from None
    return manifest
