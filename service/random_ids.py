"""Random ids (lease sets, changes) made on the event loop without a system call each.

`secrets.token_bytes` reads the kernel's random source at every call, and the read gives the
GIL away: on a loop shared with threads running Python, taking it back waited a switch interval
or more, once per lease.acquire and once per change.propose (7-14 % of the loop's stalled
samples at 100 000 files: docs/decisions.md, "Nothing holds the GIL for long at 100 000
files"). The same bytes are read POOL at a time and each handed out once. Tokens, which are
credentials, still come from `secrets` one by one (auth.py)."""
import os
import threading

POOL = 4096
_lock = threading.Lock()
_bytes = b""
_at = 0


def token_bytes(n: int) -> bytes:
    global _bytes, _at
    with _lock:
        if _at + n > len(_bytes):
            _bytes, _at = os.urandom(max(POOL, n)), 0
        out = _bytes[_at:_at + n]
        _at += n
        return out


def token_hex(n: int) -> str:
    return token_bytes(n).hex()
