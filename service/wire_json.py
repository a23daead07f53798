"""Strict decoding of request lines (I-JSON, RFC 7493) and answers that always encode.

Python's json is lenient where the log can not be: it reads a BOM, UTF-16 and UTF-32, `NaN` and
`Infinity`, keeps the last of duplicate keys, accepts lone surrogates (raw or as `\\ud800`) that
no UTF-8 encoder takes later, and recurses once per nesting level. Every one of those reached
canonical JSON, git or a file and answered `internal`, or closed the connection. Here each is
refused with a message, as `invalid`, before the request reaches a method.
"""
import json
import re
import secrets

from lonca.protocol import REPO_NAME_MAX

MAX_DEPTH = 64  # objects and arrays; the deepest shape of the protocol is far less
INT_LIMIT = 2**53 - 1  # I-JSON: integers an IEEE double holds exactly
_INT_DIGITS = len(str(INT_LIMIT))
ID_MAX = 128  # characters of a string id, echoed in the answer
METHOD_MAX = 64
ENVELOPE = frozenset({"id", "method", "params", "repo", "token"})
REPO_RE = re.compile(r"[A-Za-z0-9._-]{1,%d}" % REPO_NAME_MAX)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A session token is lonca_ or lonca_h_ and 64 hex digits; a run of 16 is enough to be one, or a
# piece of one, that must not reach an error message or the signed log.
_TOKEN_SHAPE = re.compile(r"lonca_(?:h_)?[0-9a-f]{16}")


class Refused(Exception):
    """The line is not a request the protocol takes; `rid` is its id when it could be read."""

    def __init__(self, message: str, rid=0):
        super().__init__(message)
        self.message, self.rid = message, rid


def _pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise Refused("an object has the same key twice (RFC 7493); send each key once")
    return out


def _constant(name: str):
    raise Refused(f"{name} is not a JSON number; numbers in this protocol are integers")


def _float(text: str):
    raise Refused("numbers in this protocol are integers; send no fraction or exponent")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS or abs(int(text)) > INT_LIMIT:
        raise Refused(f"an integer is within ±{INT_LIMIT} (RFC 7493)")
    return int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_float, parse_int=_int)


def has_token_shape(text: str) -> bool:
    return "lonca_" in text and _TOKEN_SHAPE.search(text) is not None


def _check_string(s: str, where: str, tokens_allowed: bool) -> None:
    # isascii() is a flag in CPython: a 90 MiB base64 string costs nothing here
    if not s.isascii() and _SURROGATE.search(s):
        raise Refused(f"{where} holds a lone surrogate, which is not Unicode text; send UTF-8")
    if not tokens_allowed and has_token_shape(s):
        raise Refused(f"{where} holds something shaped like a session token; a token goes only in the "
                      "request's token field, and never in params")


def _walk(value, where: str, tokens_allowed: bool = False) -> None:
    """Depth, lone surrogates and token-shaped strings, without recursion."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            _check_string(v, where, tokens_allowed)
        elif isinstance(v, (dict, list)):
            if depth > MAX_DEPTH:
                raise Refused(f"the request nests deeper than {MAX_DEPTH} levels")
            if isinstance(v, dict):
                for k, x in v.items():
                    _check_string(k, where, tokens_allowed)
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)


def loads(line: bytes):
    """One strict JSON value from a line of UTF-8 bytes; `Refused` for anything I-JSON refuses."""
    if line.startswith(b"\xef\xbb\xbf"):
        raise Refused("a request line starts with no byte order mark; send UTF-8 without one")
    if b"\x00" in line:
        raise Refused("a request line is UTF-8 JSON (this looks like UTF-16 or UTF-32)")
    try:
        text = line.decode("utf-8")  # strict: also refuses surrogates encoded as UTF-8
    except UnicodeDecodeError:
        raise Refused("a request line is UTF-8; this one is not") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise Refused(f"the request nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise Refused("a request is one JSON object on one line") from None
    return value


def _plain(line: bytes, token: str | None) -> bool:
    """Whether the bytes of the line already rule out what `_walk` looks for, so the walk can be
    skipped (it was a tenth of a lease request's CPU). Without a `\\u` escape, no string holds a
    lone surrogate (the strict UTF-8 decoding refused raw ones) and every decoded string has the
    letters of its bytes (the other escapes make no letter), so "lonca_" found in the line as
    many times as in the token is in no other string; nor can a value nest deeper than the line
    has brackets."""
    return (b"\\u" not in line and line.count(b"{") + line.count(b"[") <= MAX_DEPTH
            and line.count(b"lonca_") == (token.count("lonca_") if token else 0))


def valid_id(rid) -> bool:
    return (isinstance(rid, int) and not isinstance(rid, bool)) or (
        isinstance(rid, str) and len(rid) <= ID_MAX and not _SURROGATE.search(rid) and not has_token_shape(rid))


def decode_request(line: bytes) -> dict:
    """The request of a line: {"id", "method", "params", "repo"?, "token"?}, params {} when absent."""
    req = loads(line)
    if not isinstance(req, dict) or not valid_id(req.get("id")):
        raise Refused('a request is {"id": integer or string (at most 128 characters), "method", "params"} '
                      'with optional "repo" and "token"')
    rid = req["id"]
    try:
        if set(req) - ENVELOPE:
            raise Refused("a request has the fields id, method, params, repo and token, and no other")
        method = req.get("method")
        if not isinstance(method, str) or not 0 < len(method) <= METHOD_MAX:
            raise Refused(f"method is a method name of at most {METHOD_MAX} characters")
        token = req.get("token")
        walk = not _plain(line, token if isinstance(token, str) else None)
        if walk:
            _walk(method, "method")
        if token is not None and not isinstance(token, str):
            raise Refused("token is a string")
        if req.get("repo") is not None and not (isinstance(req["repo"], str) and REPO_RE.fullmatch(req["repo"])):
            raise Refused(f"repo is a repository name: letters, digits, '.', '_' and '-', at most {REPO_NAME_MAX}")
        if walk:
            _walk(token, "token", tokens_allowed=True)
        params = req.setdefault("params", {})
        if not isinstance(params, dict):
            raise Refused("params is an object ({} when the method has none)")
        if walk:
            _walk(params, "params")
    except Refused as e:
        e.rid = rid
        raise
    return req


class Raw:
    """A part of an answer encoded before (`encode`, `utf8`), spliced into the line as it is:
    `status` keeps the lists that only an entry changes encoded between entries
    (service/status_parts.py), `tree` a whole commit's list rendered once (tree_manifest)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


# Stands in the encoded text for a Raw part until it is spliced: NUL and a random word no answer
# holds by chance (NUL leaves the encoder as the six characters \u0000, which are searched for).
_SPLICE = "\0raw-" + secrets.token_hex(8) + "-"


def encode(value) -> bytes:
    """`value` as it would stand in an answer line (no newline), for a Raw part."""
    return dumps(value)[:-1]


def utf8(text: str) -> bytes:
    """A lone surrogate that reached an answer (a name read from git, say) becomes U+FFFD rather
    than failing the encoder and losing the connection."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode()


class _HasRaw(Exception):
    pass


def _no_raw(value):
    if isinstance(value, Raw):
        raise _HasRaw
    raise TypeError(f"{type(value).__name__} is not JSON")


# Made once (json.dumps with options builds an encoder at every call): the answers without a Raw
# part, nearly all of them.
_ANSWER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_no_raw)


def dumps(response) -> bytes:
    """An answer line (lone surrogates as U+FFFD: utf8). Raw parts go in as they are."""
    try:
        return utf8(_ANSWER.encode(response)) + b"\n"
    except _HasRaw:
        return _spliced(response)


def _spliced(response) -> bytes:
    """An answer holding Raw parts: each goes in as a stand-in, replaced by its bytes."""
    raws: list[bytes] = []

    def stand_in(value):
        if not isinstance(value, Raw):
            raise TypeError(f"{type(value).__name__} is not JSON")
        raws.append(value.data)
        return f"{_SPLICE}{len(raws) - 1}\0"
    text = json.dumps(response, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=stand_in)
    data = utf8(text)
    for i, raw in enumerate(raws):
        data = data.replace(json.dumps(f"{_SPLICE}{i}\0").encode(), raw, 1)
    return data + b"\n"
