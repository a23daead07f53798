"""[sessions] ops_per_minute: a session and those made from it share one budget, spent by every
agent request of a method that writes to the log but `session.end` (seed 001, `rate_limited`),
checked once where requests are dispatched, before the method reads its params. Kept in memory,
never logged (a refused request writes nothing); `refused` counts the refusals for
`ping.refused.rate_limited`, beside the socket server's own counts."""
from collections import deque

from lonca.protocol import LoncaError

from .state import RepoState


EXEMPT = frozenset({"session.end", "mcp.call"})  # ending a session, and lonca mcp's check before each tool (seed)


def rate_limited(method, who) -> bool:
    """Whether a request of `method` by `who` (auth.Auth, or None) spends the rate budget."""
    return method.writes and who is not None and who.kind == "agent" and method.name not in EXEMPT


class RateLimiter:
    def __init__(self):
        self._seen: dict[tuple[str, str], deque] = {}
        self.refused = 0

    def root(self, rs: RepoState, session: str) -> str:
        rec = rs.sessions.get(session)
        while rec and rec.parent and rec.parent in rs.sessions:
            rec = rs.sessions[rec.parent]
        return rec.id if rec else session

    def check(self, rs: RepoState, session: str, now_ms: int) -> None:
        limit = rs.policy.ops_per_minute
        q = self._seen.setdefault((rs.name, self.root(rs, session)), deque())
        while q and q[0] <= now_ms - 60_000:
            q.popleft()
        if limit and len(q) >= limit:
            wait_s = max(1, (q[0] + 60_000 - now_ms + 999) // 1000)
            self.refused += 1
            raise LoncaError("rate_limited", f"past [sessions] ops_per_minute ({limit}); try again in {wait_s} s")
        q.append(now_ms)
