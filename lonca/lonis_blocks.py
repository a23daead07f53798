"""Lonis blocks as Lonca emits them (seed 000, "The Block Contract"): the `lonis.block/v1` envelope
with attribution and an adjacently tagged payload, the content hash of a payload, and the ToolError
with Lonis's exit codes."""
import json
from datetime import datetime, timezone

import lonca
from lonca.canonical import content_hash, sha256_hex

SCHEMA_VERSION = "lonis.block/v1"
MESSAGE_MAX = 16384  # the message kind's content bound
EXIT_CODES = {"ok": 0, "generic": 1, "invalid_input": 2, "not_found": 3, "confirmation_required": 4,
              "rate_limited": 5, "tool_failed": 6, "limit_exceeded": 7, "io": 8, "serialization": 9,
              "not_implemented": 69, "internal": 70}
# a Lonca error code (or the tool surface's own: usage, unreachable) -> the Lonis error kind
KIND_OF = {"invalid": "invalid_input", "not_found": "not_found", "rate_limited": "rate_limited",
           "too_large": "limit_exceeded", "unreachable": "io", "busy": "io", "closed": "io", "timeout": "io",
           "usage": "generic", "internal": "internal"}

MODES = ("json", "ndjson", "human")  # the Lonis provider commands' outputs (--mode)


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def block(kind: str, data, *, identity: str, producer: str, where: str | None = None,
          input_hash: str | None = None, warnings: list[str] | None = None) -> dict:
    """One block. Lonca's tools read live repository state, so none is replayable, and says so."""
    source = {"when": now_rfc3339(), "producer": producer}
    if where:
        source["where"] = where
    provenance = {"tool_version": lonca.__version__,
                  "replay": {"replayable": False, "reasons": ["reads the live state of a Lonca repository"]}}
    if input_hash:
        provenance["input_hash"] = input_hash
    out = {"schema_version": SCHEMA_VERSION, "provenance": provenance,
           "attribution": {"identity": identity, "provenance": source}, "payload": {"kind": kind, "data": data}}
    if warnings:
        out["warnings"] = warnings
    return out


def message_data(text: str, reply_to: str | None = None) -> dict:
    """A message block's data; reply_to is the negotiate thread it belongs to, when it has one."""
    out = {"content": text[:MESSAGE_MAX], "role": "lonca-inbox"}
    if reply_to:
        out["reply_to"] = reply_to
    return out


def _normalize(value):
    """ADR-0007: integral floats are integers, negative zero is zero."""
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_content_hash(value) -> str:
    """SHA-256 of the canonical JSON of a value, numbers normalized. Lonca's canonical JSON is the
    form; only a fractional number, which Lonca never emits but other producers do (a score), falls
    outside it and is printed the shortest way that reads back the same, as serde_json prints it."""
    value = _normalize(value)
    try:
        return content_hash(value)
    except ValueError:
        return sha256_hex(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                     allow_nan=False).encode())


def payload_hash(blk: dict) -> str:
    """Block::content_hash: over the payload only."""
    return json_content_hash(blk["payload"])


def tool_error(code: str, message: str, details: dict | None = None) -> dict:
    kind = KIND_OF.get(code, "tool_failed")
    err = {"kind": kind, "message": message, "exit_code": EXIT_CODES[kind]}
    if details:
        err["details"] = details
    return err


def render_human(blk: dict) -> str:
    p = blk["payload"]
    if p["kind"] == "message":
        return p["data"]["content"]
    return f"{p['kind']}: {json.dumps(p['data'], ensure_ascii=False, indent=2)}"
