"""The heartbeat of `lonca mcp` (seed 001, session.heartbeat): one beat every timeout_ms / 3 on a
connection of its own, renewing the leases that would run out before the beat after next. It stops
when the session is over (session_inactive, or unauthenticated once the token is swept)."""
import sys
import threading

from lonca.client import Client, Unreachable
from lonca.mcp_session import AgentSession
from lonca.output import Usage
from lonca.protocol import LoncaError

RETRY_S = 5.0  # after a failed beat, before the daemon has told us its timeout


class KeepAlive(threading.Thread):
    def __init__(self, session: AgentSession):
        super().__init__(name="lonca-mcp-heartbeat", daemon=True)
        self.session = session
        self.client = Client()
        self.stopped = threading.Event()
        self.refused: set[str] = set()  # sets a renewal was denied for: they run out, not retried each beat

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        wait = 0.0
        while not self.stopped.wait(wait):
            try:
                wait = self.beat()
            finally:
                self.client.close()  # a connection per beat: beats may be further apart than the daemon's idle limit

    def beat(self) -> float:
        """One heartbeat and the renewals it calls for; the seconds until the next one."""
        try:
            hb = self.session.call("session.heartbeat", client=self.client)
        except LoncaError as e:
            if e.code in ("session_inactive", "unauthenticated"):
                self.session.over.set()
                self.stopped.set()
            return RETRY_S
        except (Unreachable, Usage):
            return RETRY_S
        interval_ms = max(hb["timeout_ms"] // 3, 1)
        for lease in hb["leases"]:
            if lease["set"] not in self.refused and lease["expires_ms"] - hb["now_ms"] < 2 * interval_ms:
                self.renew(lease["set"], interval_ms)
        return interval_ms / 1000

    def renew(self, lease_set: str, interval_ms: int) -> None:
        ttl = self.session.lease_ttl(lease_set)
        # long enough to reach the beat after next, whatever it was taken for
        ttl = None if ttl is None else max(ttl, 2 * interval_ms)
        try:
            res = self.session.call("lease.renew", {"set": lease_set, "ttl_ms": ttl}, client=self.client)
        except (LoncaError, Unreachable, Usage) as e:
            sys.stderr.write(f"lonca mcp: lease set {lease_set} was not renewed ({type(e).__name__})\n")
            return
        if res["decision"]["outcome"] != "allow":  # held too long, or gone: let it run out
            self.refused.add(lease_set)
            self.session.forget_lease(lease_set)
