"""Policy values the worker reads, with their defaults (documented in docs/policy.md)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    heartbeat_timeout_ms: int = 90_000  # [leases] timeout_ms: leases live this long past the last heartbeat
    max_ttl_ms: int = 60 * 60_000  # [leases] max_ttl_minutes
    session_max_ttl_ms: int = 7 * 24 * 3600_000  # [sessions] max_ttl_hours


DEFAULT = Policy()
