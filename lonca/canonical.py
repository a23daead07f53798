"""Canonical JSON and the hashes made of it (DESIGN.md, "The log").

Keys sorted, no whitespace, UTF-8 kept as is, integers only: a float anywhere in what is hashed
or signed is refused, since two encoders may print it differently."""
import hashlib
import json


def _no_floats(value):
    if isinstance(value, float):
        raise ValueError("floats are not allowed in canonical JSON")
    if isinstance(value, dict):
        for v in value.values():
            _no_floats(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _no_floats(v)


def canonical(value) -> bytes:
    _no_floats(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(value) -> str:
    return sha256_hex(canonical(value))
