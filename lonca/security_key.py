"""A FIDO security key on this machine, signing through OpenSSH (seed 001, "human signature":
sk-ed25519 and sk-p256 sign with `ssh-keygen -Y sign -n lonca`, and `sig` is the hex of the
SSHSIG blob inside its armor).

The key is made by `ssh-keygen -t ed25519-sk | ecdsa-sk -O application=ssh:lonca` (`lonca human
key --security-key`), as `<name>.sk` (the key handle file: the secret stays on the device) and
`<name>.sk.pub` in $LONCA_HUMANS. OpenSSH talks to the device: its built-in FIDO middleware by
default, or the provider library SSH_SK_PROVIDER names, passed through from the environment
(how the tests drive a software authenticator, tests/sk_provider/). Every signature needs a touch
of the key; the worker refuses one whose flags do not say the user was present."""
import base64
import binascii
import shutil
import subprocess
import sys
from pathlib import Path

from lonca import humansig, paths, sshsig
from lonca.output import Usage
from lonca.private_files import private_file_ok

KINDS = {"ed25519": "ed25519-sk", "p256": "ecdsa-sk"}  # --security-key value -> ssh-keygen -t
# a touch, or a PIN typed on the terminal, takes a person some time; a key never touched ends here
TOUCH_TIMEOUT_S = 120
ARMOR = ("-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----")


def handle_path(name: str) -> Path:
    return paths.humans_dir() / f"{name}.sk"


def _ssh_keygen() -> str:
    exe = shutil.which("ssh-keygen")
    if exe is None:
        raise Usage("a security key signs through OpenSSH's ssh-keygen, which is not on PATH (Debian: openssh-client)")
    return exe


class SecurityKey(humansig.OpSigner):
    """Signs like humankeys.HumanKey (sign_op, sign_login, public), each signature one run of
    `ssh-keygen -Y sign -n lonca` and one touch."""

    def __init__(self, name: str, handle: Path, public: dict, line: str):
        self.name, self.handle, self.public = name, handle, public
        self.line = line    # the .pub line, which `lonca human enrol --public` takes

    def sign(self, message: bytes) -> str:
        """The hex of the SSHSIG blob ssh-keygen makes over `message` (stdin to stdout: nothing
        is written to disk)."""
        print(f"lonca: touch your security key to sign as {self.name} ({humansig.fingerprint(self.public)})",
              file=sys.stderr, flush=True)
        try:
            res = subprocess.run([_ssh_keygen(), "-Y", "sign", "-n", "lonca", "-f", str(self.handle)], input=message,
                                 capture_output=True, timeout=TOUCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Usage(f"the security key did not sign within {TOUCH_TIMEOUT_S} s (was it touched?)") from None
        text = res.stdout.decode("ascii", "replace").strip().splitlines()
        if res.returncode != 0 or len(text) < 3 or (text[0], text[-1]) != ARMOR:
            why = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise Usage(f"ssh-keygen -Y sign failed with the security key {self.handle}: "
                        f"{why[-1] if why else f'exit {res.returncode}'}")
        try:
            return base64.b64decode("".join(text[1:-1]), validate=True).hex()
        except binascii.Error:
            raise Usage("ssh-keygen printed a signature that is not base64") from None


def load(name: str) -> SecurityKey | None:
    """`name`'s security key, if its handle file is a private regular file of this user and its
    .pub line is a security key of application ssh:lonca."""
    handle = handle_path(name)
    if not private_file_ok(handle):
        return None
    try:
        line = handle.with_name(handle.name + ".pub").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    public = sshsig.key_from_openssh(line)
    return SecurityKey(name, handle, public, line) if public else None


def create(name: str, kind: str) -> SecurityKey:
    """Enrol a new credential on the device (one touch) and keep its handle as `<name>.sk`."""
    handle = handle_path(name)
    handle.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        res = subprocess.run([_ssh_keygen(), "-q", "-t", KINDS[kind], "-O", "application=ssh:lonca", "-N", "",
                              "-C", f"lonca:{name}", "-f", str(handle)],
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=TOUCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Usage(f"the security key was not enrolled within {TOUCH_TIMEOUT_S} s (was it touched?)") from None
    key = load(name) if res.returncode == 0 else None
    if key is None:
        why = (res.stderr or res.stdout).decode("utf-8", "replace").strip().splitlines()
        raise Usage(f"ssh-keygen -t {KINDS[kind]} failed: {why[-1] if why else f'exit {res.returncode}'} (a FIDO "
                    "device must be plugged in, or SSH_SK_PROVIDER name a middleware library)")
    return key
