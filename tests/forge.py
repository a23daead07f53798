"""Real forges on loopback for the bridge tests: an OpenSSH server (Debian `openssh-server`) and a
smart-HTTP git server (git's `http-backend` as CGI behind lighttpd, over TLS, with basic auth).
Each runs as the current user on a free port with keys made for the test, serves bare
repositories from a folder, and gives the worker a HOME holding what a developer's would: the
known host, an ssh config, git's TLS trust and a credential helper. The worker never sees a
password: ssh authenticates with the key in a real ssh-agent, https with git's `store` helper.
A missing program fails the test in CI (`make system-deps` installs them) and skips it elsewhere."""
import getpass
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

IN_CI = os.environ.get("CI") == "true"
SSHD = "/usr/sbin/sshd"
LIGHTTPD = "/usr/sbin/lighttpd"
HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
HTTP_USER, HTTP_PASSWORD = "forge", "s3cret-never-logged"


def need(path: str, package: str) -> None:
    if not os.path.exists(path):
        message = f"{path} is missing: install the Debian package {package} (make system-deps)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text(errors='replace') if log.exists() else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing answers on port {port}")


def run(*argv: str, **kw) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw).stdout


def bare(path: Path) -> Path:
    run("git", "init", "-q", "--bare", "-b", "main", str(path))
    return path


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Forge:
    """Where the forge keeps its bare repositories, how the worker names one, and the worker's
    environment (HOME and, for ssh, the agent)."""
    root: Path
    url_of: Callable[..., str]  # (name, gone=False) -> the remote URL the worker is given; gone: nothing answers
    env: dict[str, str]
    procs: list[subprocess.Popen] = field(default_factory=list)

    def repo(self, name: str) -> Path:
        return bare(self.root / f"{name}.git")

    def close(self) -> None:
        for p in reversed(self.procs):
            stop(p)


@contextmanager
def ssh_forge(tmp_path: Path) -> Iterator[Forge]:
    """sshd on 127.0.0.1:<free port>, our user only, a generated host key; the client key lives
    in an ssh-agent the worker reaches through SSH_AUTH_SOCK. url_of(name, scp=False) gives
    ssh://user@127.0.0.1:port/path, or with scp=True user@lonca-forge:/path (the port from
    ~/.ssh/config); gone=True names a port where nothing answers."""
    need(SSHD, "openssh-server")
    need("/usr/bin/ssh-agent", "openssh-client")
    d = tmp_path / "ssh"
    (d / "repos").mkdir(parents=True)
    short = Path(tempfile.mkdtemp(prefix="lonca-ssh-", dir="/tmp"))  # a socket path has 108 bytes at most
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key"))
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port, closed, user = free_port(), free_port(), getpass.getuser()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
        f"PidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
        f"AllowUsers {user}\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder, as root
    log = d / "sshd.log"
    sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    agent_sock = short / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(agent_sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    forge = Forge(d / "repos", lambda name, gone=False: "", {}, [sshd, agent])
    try:
        wait_port(port, sshd, log)
        for _ in range(200):
            if agent_sock.exists():
                break
            time.sleep(0.02)
        run("ssh-add", "-q", str(d / "client_key"), env={**os.environ, "SSH_AUTH_SOCK": str(agent_sock)})
        home = d / "home"
        (home / ".ssh").mkdir(parents=True, mode=0o700)
        host_pub = (d / "host_key.pub").read_text().split()
        (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
        (home / ".ssh" / "config").write_text(
            f"Host lonca-forge\n  HostName 127.0.0.1\n  Port {port}\n  HostKeyAlias [127.0.0.1]:{port}\n"
            f"Host lonca-gone\n  HostName 127.0.0.1\n  Port {closed}\n"
            f"Host *\n  BatchMode yes\n  StrictHostKeyChecking yes\n  UserKnownHostsFile {home}/.ssh/known_hosts\n")
        os.chmod(home / ".ssh" / "config", 0o600)
        # ssh reads ~ from the password database, not HOME: git's own setting points it at this one
        (home / ".gitconfig").write_text(f"[core]\n\tsshCommand = ssh -F {home}/.ssh/config\n")
        forge.env = {"HOME": str(home), "SSH_AUTH_SOCK": str(agent_sock)}
        forge.url_of = lambda name, scp=False, gone=False: (
            f"{user}@{'lonca-gone' if gone else 'lonca-forge'}:{d}/repos/{name}.git" if scp
            else f"ssh://{user}@127.0.0.1:{closed if gone else port}{d}/repos/{name}.git")
        yield forge
    finally:
        forge.close()
        shutil.rmtree(short, ignore_errors=True)


@contextmanager
def https_forge(tmp_path: Path) -> Iterator[Forge]:
    """lighttpd on 127.0.0.1:<free port> over TLS (a self-signed certificate for 127.0.0.1),
    git-http-backend as CGI for /git/, basic auth (which also lets git-http-backend take a push).
    The worker trusts the certificate (GIT_SSL_CAINFO) and its HOME keeps the password in git's
    `store` credential helper; url_of(name) is https://127.0.0.1:port/git/<name>.git, no user,
    no password."""
    need(LIGHTTPD, "lighttpd")
    need("/usr/lib/lighttpd/mod_openssl.so", "lighttpd-mod-openssl")
    need(HTTP_BACKEND, "git")
    need("/usr/bin/openssl", "openssl")
    d = tmp_path / "https"
    (d / "repos").mkdir(parents=True)
    (d / "www").mkdir()
    port, closed = free_port(), free_port()
    run("openssl", "req", "-x509", "-newkey", "ed25519", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"))
    (d / "users").write_text(f"{HTTP_USER}:{HTTP_PASSWORD}\n")
    (d / "lighttpd.conf").write_text(f'''
server.modules = ("mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_cgi", "mod_openssl")
server.document-root = "{d}/www"
server.bind = "127.0.0.1"
server.port = {port}
server.errorlog = "{d}/error.log"
ssl.engine = "enable"
ssl.pemfile = "{d}/cert.pem"
ssl.privkey = "{d}/key.pem"
auth.backend = "plain"
auth.backend.plain.userfile = "{d}/users"
alias.url = ("/git/" => "{HTTP_BACKEND}/")
$HTTP["url"] =~ "^/git/" {{
    cgi.assign = ("" => "")
    setenv.set-environment = ("GIT_PROJECT_ROOT" => "{d}/repos", "GIT_HTTP_EXPORT_ALL" => "1")
    auth.require = ("" => ("method" => "basic", "realm" => "forge", "require" => "valid-user"))
}}
''')
    log = d / "lighttpd.out"
    server = subprocess.Popen([LIGHTTPD, "-D", "-f", str(d / "lighttpd.conf")], stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    forge = Forge(d / "repos", lambda name, gone=False: f"https://127.0.0.1:{closed if gone else port}/git/{name}.git", {}, [server])
    try:
        wait_port(port, server, log)
        home = d / "home"
        home.mkdir()
        (home / ".git-credentials").write_text(f"https://{HTTP_USER}:{HTTP_PASSWORD}@127.0.0.1:{port}\n")
        os.chmod(home / ".git-credentials", 0o600)
        (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
        # git's own variable, which a machine's environment may already set (it wins over http.sslCAInfo)
        forge.env = {"HOME": str(home), "GIT_SSL_CAINFO": str(d / "cert.pem")}
        yield forge
    finally:
        forge.close()
