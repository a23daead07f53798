"""Agents' surfaces against a real worker: a repository whose policy beats fast (so the keep-alive
shows within seconds), agent workspaces made by `lonca session start`, and the published Lonis
schemas every emitted block is checked against."""
import json
from pathlib import Path

import pytest

from conftest import IN_CI, ROOT, git

CONTRACTS = ROOT.parent / "shared" / "contracts" / "lonis"
HEARTBEAT_TIMEOUT_MS = 3000  # beats every second
POLICY = f"[leases]\ntimeout_ms = {HEARTBEAT_TIMEOUT_MS}\n"


@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None


@pytest.fixture
def repo(worker, source_repo):
    (source_repo / "lonca.toml").write_text(POLICY)
    git("add", ".", cwd=source_repo)
    git("commit", "-qm", "policy", cwd=source_repo)
    worker.cli_json("init", "demo", "--import", str(source_repo))
    return worker


@pytest.fixture
def agent(repo, tmp_path):
    """agent(name) -> (workspace path, session id), a session started by the human in a new workspace."""
    def start(name: str = "agent") -> tuple[Path, str]:
        ws = tmp_path / f"ws-{name}"
        got = repo.cli_json("session", "start", "--agent", name, "--dir", str(ws))
        return ws, got["session"]
    return start


def contracts() -> Path:
    if not (CONTRACTS / "schemas" / "block-v1.json").is_file():
        if IN_CI:
            pytest.fail(f"the Lonis contracts are missing at {CONTRACTS}")
        pytest.skip(f"the Lonis contracts are missing at {CONTRACTS}")
    return CONTRACTS


class BlockChecker:
    """Validates blocks against the envelope schema and their kind's own (draft 2020-12)."""

    def __init__(self, root: Path):
        from jsonschema import Draft202012Validator
        self.schemas = {p.name[: -len("-v1.json")]: json.loads(p.read_text()) for p in (root / "schemas").glob("*-v1.json")}
        for s in self.schemas.values():
            Draft202012Validator.check_schema(s)
        self.validator = lambda name: Draft202012Validator(self.schemas[name])
        self.seen = 0

    def check(self, blk: dict) -> None:
        self.validator("block").validate(blk)
        kind = blk["payload"]["kind"]
        self.validator(kind if kind in self.schemas else "extension").validate(blk["payload"])
        self.seen += 1


@pytest.fixture
def blocks() -> BlockChecker:
    return BlockChecker(contracts())
