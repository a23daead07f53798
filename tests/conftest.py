"""Real parts: a real worker process on a real socket in a temporary LONCA_HOME, real git stores,
real SQLite and PostgreSQL (127.0.0.1:5432, database `test`; in CI a missing one fails)."""
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = "host=127.0.0.1 port=5432 dbname=test user=postgres"
IN_CI = os.environ.get("CI") == "true"


def pytest_collection_modifyitems(items) -> None:
    """Each test gets one of the markers registered in pyproject.toml: browser (tests/console),
    worker (it starts a worker: the make_worker fixture, directly or through another), or unit."""
    console = ROOT / "tests" / "console"
    for item in items:
        if console in item.path.parents:
            item.add_marker(pytest.mark.browser)
        elif "make_worker" in item.fixturenames:
            item.add_marker(pytest.mark.worker)
        else:
            item.add_marker(pytest.mark.unit)


def _pg_reachable() -> bool:
    try:
        import psycopg
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
        return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request):
    """None for the embedded SQLite default; a fresh PostgreSQL database otherwise."""
    if request.param == "sqlite":
        yield None
        return
    if not _pg_reachable():
        if IN_CI:
            pytest.fail("PostgreSQL at 127.0.0.1:5432 is not reachable")
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is not reachable")
    import psycopg
    name = f"lonca_t_{secrets.token_hex(6)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Worker:
    """`lonca daemon` as a child process, with the CLI run against it in the same environment."""

    def __init__(self, tmp: Path, database_url: str | None, extra_env: dict | None = None):
        self.tmp = tmp
        self.home = tmp / "home"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LONCA_")}
        self.env.update(LONCA_HOME=str(self.home), LONCA_HUMANS=str(tmp / "humans"), LONCA_HUMAN="alice",
                        PYTHONUNBUFFERED="1")
        if database_url:
            self.env["LONCA_DATABASE_URL"] = database_url
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen | None = None
        self.output = tmp / "daemon.out"

    @property
    def socket(self) -> Path:
        return Path(self.env.get("LONCA_SOCKET") or self.home / "lonca.sock")

    def start(self) -> "Worker":
        self.proc = subprocess.Popen([sys.executable, "-m", "lonca", "daemon"], env=self.env, cwd=self.tmp,
                                     stdout=open(self.output, "ab"), stderr=subprocess.STDOUT)
        from lonca.client import wait_until_answering
        why = wait_until_answering(self.proc, self.socket, 30)
        if why:
            raise RuntimeError(f"the worker {'exited' if why == 'exited' else 'did not answer'}: {self.output.read_text()}")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def client(self, timeout: float = 30):
        from lonca.client import Client
        return Client(self.socket, timeout=timeout)

    def cli(self, *args: str, check: bool = False, input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        res = subprocess.run([sys.executable, "-m", "lonca", *args], env=self.env, cwd=cwd or self.tmp,
                             capture_output=True, text=True, timeout=120, input=input)
        if check and res.returncode != 0:
            raise AssertionError(f"lonca {' '.join(args)} exited {res.returncode}: {res.stderr}")
        return res

    def cli_json(self, *args: str):
        res = self.cli(*args, "--json", check=True)
        return json.loads(res.stdout)


@pytest.fixture
def make_worker(tmp_path, database_url):
    workers: list[Worker] = []

    def make(extra_env: dict | None = None, start: bool = True) -> Worker:
        w = Worker(tmp_path, database_url, extra_env)
        workers.append(w)
        return w.start() if start else w
    yield make
    for w in workers:
        w.stop()
        if w.output.exists():  # pytest shows this only for a failed test: the worker's own account
            print(f"--- {w.output} (last lines) ---\n" + "\n".join(w.output.read_text(errors="replace").splitlines()[-40:]))


@pytest.fixture
def worker(make_worker) -> Worker:
    return make_worker()


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def git_repo(src: Path, files: dict[str, str]) -> Path:
    """A new git repository at `src` whose `main` has one commit of `files` (path -> text)."""
    src.mkdir()
    git("init", "-q", "-b", "main", cwd=src)
    for path, text in files.items():
        (src / path).write_text(text)
    git("add", ".", cwd=src)
    git("commit", "-qm", "first", cwd=src)
    return src


@pytest.fixture
def source_repo(tmp_path) -> Path:
    """A real git repository with a few commits on `main`."""
    src = git_repo(tmp_path / "src", {
        "app.py": "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n",
        "README.md": "# Demo\n\n## Install\n\nRun it.\n"})
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("def helper():\n    return 42\n")
    os.chmod(src / "app.py", 0o755)
    git("add", ".", cwd=src)
    git("commit", "-qm", "second", cwd=src)
    return src


@pytest.fixture
def repo_env(worker, source_repo, monkeypatch):
    from helpers import RepoEnv
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    env = RepoEnv(worker, source_repo)
    yield env
    env.client.close()
