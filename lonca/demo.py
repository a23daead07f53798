"""`lonca up --demo`: a demo repository and a few simulated agents speaking the socket protocol,
so a newcomer sees the console move. The operator's file key creates the repository, starts the
agents' sessions and enrols every key registered in the console (only for a demo on one's own
machine: that is what `--demo` says in its help)."""
import base64
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from lonca import humankeys
from lonca.client import Client, Unreachable
from lonca.protocol import LOGIN_TTL_DEFAULT_MS, LoncaError, claim_from_facts, now_ms, session_start_op

REPO = "demo"
AGENTS = (("ada", "tidy the billing module"), ("bo", "add tests for the client"), ("cem", "document the install"))
FILES = {
    "billing.py": "def charge(amount):\n    return amount * 2\n\n\ndef refund(amount):\n    return -amount\n",
    "client.py": "from billing import charge\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n",
    "README.md": "# Demo\n\n## Install\n\nRun it.\n",
}
BEAT_S = 5.0
EDIT_S = 15.0  # ada proposes another edit this often, so the queue keeps moving
# the simulated agents' leases run out after two minutes and are released once proposed: the
# README's agent walk-through leases billing.py#charge in the same repository
LEASE_TTL_MS = 120_000


def _git_source() -> Path:
    src = Path(tempfile.mkdtemp(prefix="lonca-demo-src-"))
    env = {"GIT_AUTHOR_NAME": "Demo", "GIT_AUTHOR_EMAIL": "demo@localhost", "GIT_COMMITTER_NAME": "Demo",
           "GIT_COMMITTER_EMAIL": "demo@localhost", "PATH": "/usr/bin:/bin"}
    for name, text in FILES.items():
        (src / name).write_text(text)
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "demo"]):
        subprocess.run(["git", *argv], cwd=src, env=env, check=True, capture_output=True, timeout=60)
    return src


class Demo:
    def __init__(self, enrolments):
        self.enrolments = enrolments
        self.human = humankeys.default_human()
        self.key = humankeys.load_key(self.human) or humankeys.create_key(self.human)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lonca-demo", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _login(self, c: Client) -> str:
        return c.call("human.login", {"sig": self.key.sign_login(None, LOGIN_TTL_DEFAULT_MS),
                                      "ttl_ms": LOGIN_TTL_DEFAULT_MS})["token"]

    def _setup(self, c: Client) -> str | None:
        try:
            token = self._login(c)
        except LoncaError:
            token = None
        repos = c.call("repo.list", token=token) if token else []
        if REPO not in repos:
            # cooperative even on a hardened daemon (whose default is hardened): the demo's human
            # signs with a file key, which proves no presence
            p = c.call("repo.prepare_init", {"repo": REPO, "human": self.human, "human_key": self.key.public,
                                             "import_from": str(_git_source()), "profile": "cooperative"}, token=token)
            c.call("repo.init", {"op": p["op"], "sig": self.key.sign_op(REPO, p["op"])}, token=token)
            token = self._login(c)
        print(f"lonca demo: repository {REPO} (created by {self.human}); keys registered in the console are enrolled", flush=True)
        return token

    def _submit(self, c: Client, token: str, op: dict) -> dict:
        return c.call("human.submit", {"op": op, "sig": self.key.sign_op(REPO, op)}, repo=REPO, token=token)

    def _start_agents(self, c: Client, token: str) -> list[str]:
        tokens = []
        for agent, task in AGENTS:
            op = session_start_op(f"{agent}-{now_ms() % 100000}", agent, now_ms() + 8 * 3600_000,
                                  model="demo", task=task)
            tokens.append(self._submit(c, token, op)["token"])
        return tokens

    def _enrol_requests(self, c: Client, token: str) -> None:
        for r in self.enrolments.all():
            try:
                self._submit(c, token, {"op": "human.enroll", "human": r.human, "key": r.key})
                print(f"lonca demo: enrolled {r.human} in {REPO}", flush=True)
            except LoncaError as e:
                print(f"lonca demo: could not enrol {r.human}: {e.code}: {e.message}", flush=True)
            self.enrolments.remove(r.id)

    def _propose(self, c: Client, agent: str, base: str, path: str, text: str, intent: str) -> dict:
        files = [{"path": path, "content_b64": base64.b64encode(text.encode()).decode(), "mode": None}]
        f = c.call("facts.preview", {"base": base, "files": files}, token=agent)["facts"]
        claim = claim_from_facts(f, intent)
        res = c.call("change.propose", {"change": None, "base": base, "files": files, "claim": claim}, token=agent)
        print(f"lonca demo: {intent}: {res['decision']['outcome']} {' '.join(res['decision']['reasons'])}".rstrip(), flush=True)
        return res

    def _lease(self, c: Client, agent: str, symbol: str, intent: str, kind: str = "edit") -> dict:
        return c.call("lease.acquire", {"set": None, "items": [{"symbol": symbol, "kind": kind}], "intent": intent,
                                        "ttl_ms": LEASE_TTL_MS}, token=agent)

    def _wait_queue(self, c: Client, token: str) -> str:
        for _ in range(100):
            st = c.call("status", repo=REPO, token=token)
            if not st["queue"]:
                return st["trunk"]
            time.sleep(0.2)
        return st["trunk"]

    def _scenario(self, c: Client, token: str, agents: list[str]) -> None:
        """Leases, a refused lease, an integration, an escalation for a human, and a conflict."""
        ada, bo, cem = agents
        base = c.call("status", repo=REPO, token=token)["trunk"]
        held = self._lease(c, ada, "billing.py#charge", "tidy the fee computation")
        self._lease(c, bo, "client.py#Client.pay", "pay with a real amount")
        self._lease(c, bo, "billing.py#charge", "bo wants the fee too")  # refused: ada holds it
        self._propose(c, ada, base, "billing.py", FILES["billing.py"].replace("amount * 2", "amount * 3"), "triple the fee")
        self._lease(c, cem, "lonca.toml#<file>", "share leases between agents")
        self._propose(c, cem, base, "lonca.toml", "[leases]\nshared = true\n", "share leases (a critical path: a human decides)")
        self._wait_queue(c, token)
        c.call("lease.release", {"set": held["set"]}, token=ada)
        fee = self._lease(c, bo, "billing.py#charge", "bo's fee, on an old base")
        self._propose(c, bo, base, "billing.py", FILES["billing.py"].replace("amount * 2", "amount + 1"), "a fee on an old base (conflicts)")
        c.call("lease.release", {"set": fee["set"]}, token=bo)  # what its change pinned stays until the change leaves the queue

    def _run(self) -> None:
        try:
            with Client() as c:
                token = self._setup(c)
                agents = self._start_agents(c, token)
                self._scenario(c, token, agents)
                next_beat, next_edit, n = 0.0, time.time() + EDIT_S, 3
                while not self._stop.wait(0.5):
                    self._enrol_requests(c, token)
                    if time.time() >= next_beat:
                        for t in agents:
                            c.call("session.heartbeat", token=t)
                        next_beat = time.time() + BEAT_S
                    if time.time() >= next_edit:
                        n += 1
                        trunk = self._wait_queue(c, token)
                        self._lease(c, agents[0], "billing.py#refund", "keep refunds in step")
                        blob = c.call("blobs", {"commit": trunk, "paths": ["billing.py"]}, token=agents[0])[0]
                        lines = base64.b64decode(blob["content_b64"]).decode().splitlines(keepends=True)
                        text = "".join(f"    return -amount * {n}\n" if "return -amount" in ln else ln for ln in lines)
                        self._propose(c, agents[0], trunk, "billing.py", text, f"refund round {n}")
                        next_edit = time.time() + EDIT_S
        except (LoncaError, Unreachable) as e:
            print(f"lonca demo stopped: {e}", flush=True)
