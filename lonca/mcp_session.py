"""The agent behind `lonca mcp` and `lonca --mode json call`: a workspace, its token and a
connection to the daemon. The token is read from the workspace on each use and never leaves
this object except inside a request."""
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lonca import workspace
from lonca.client import Client


@dataclass
class AgentSession:
    root: Path
    client: Client
    # lease set -> the ttl_ms it was taken with, so the keep-alive renews it for as long
    lease_ttls: dict[str, int | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # set once the session has ended or expired: from then on every tool answers session_inactive
    over: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(cls, start: Path) -> "AgentSession":
        ws = workspace.find(start)
        return cls(ws.root, Client())

    @property
    def ws(self) -> workspace.Workspace:
        """Read again on each use: `lonca sync` in a shell moves the base under a running bridge."""
        return workspace.find(self.root)

    def call(self, method: str, params: dict | None = None, client: Client | None = None):
        ws = self.ws
        return (client or self.client).call(method, params, repo=ws.repo, token=ws.agent_token())

    def remember_lease(self, lease_set: str, ttl_ms: int | None) -> None:
        with self.lock:
            self.lease_ttls[lease_set] = ttl_ms

    def forget_lease(self, lease_set: str) -> None:
        with self.lock:
            self.lease_ttls.pop(lease_set, None)

    def lease_ttl(self, lease_set: str) -> int | None:
        with self.lock:
            return self.lease_ttls.get(lease_set)
