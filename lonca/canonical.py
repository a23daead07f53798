"""Canonical JSON and the hashes made of it (DESIGN.md, "The log").

Keys sorted, no whitespace, UTF-8 kept as is, integers only: a float anywhere in what is hashed
or signed is refused, since two encoders may print it differently."""
import hashlib
import json


def _no_floats(value) -> None:
    stack = [value]
    while stack:  # iterative: this runs on every log entry
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list or t is tuple:
            stack.extend(v)
        elif t is float:
            raise ValueError("floats are not allowed in canonical JSON")


# Made once: json.dumps with options builds an encoder at every call (a third of the cost of a
# log entry's encoding, bench leases).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_text(value) -> str:
    """The canonical JSON of `value` as text: what a log row stores, whose UTF-8 is `canonical`."""
    _no_floats(value)
    return _ENCODER.encode(value)


def canonical(value) -> bytes:
    return canonical_text(value).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(value) -> str:
    return sha256_hex(canonical(value))
