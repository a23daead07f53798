"""lonca/apply_patch.py against Codex's own applier (the Codex 0.171.0 binary run as apply_patch,
an oracle): each patch leaves the same files in a folder as in memory, or fails in both."""
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT
from lonca.apply_patch import PatchError, apply, from_shell, parse

FOUND = sorted((ROOT / ".harness" / "node_modules" / "@openai").glob("codex-linux-*/vendor/*/bin/codex"))
APP = "def charge(amount):\n    return amount * 2\n\n\nclass Client:\n    def pay(self):\n        return charge(1)\n"


@pytest.fixture(autouse=True)
def installed():
    if not FOUND:
        why = "Codex is not installed in .harness/: run `make harness-deps`"
        pytest.fail(why) if os.environ.get("CI") == "true" else pytest.skip(why)


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"


CASES = [
    ("one chunk under its @@ line", {"app.py": APP},
     patch("*** Update File: app.py", "@@ def charge(amount):", "-    return amount * 2", "+    return amount * 3")),
    ("two chunks, the first without @@", {"app.py": APP},
     patch("*** Update File: app.py", " def charge(amount):", "-    return amount * 2", "+    return amount * 5",
           "@@ class Client:", "     def pay(self):", "-        return charge(1)", "+        return charge(2)")),
    ("trailing whitespace and a typographic dash in the old lines", {"a.txt": "x = 1   \ny \u2014 2\nz\n"},
     patch("*** Update File: a.txt", "-x = 1", "-y - 2", "+x = 3")),
    ("end of file", {"a.txt": "a\nb\na\nb\n"}, patch("*** Update File: a.txt", " a", "-b", "+c", "*** End of File")),
    ("only additions", {"a.txt": "a\n"}, patch("*** Update File: a.txt", "@@", "+b", "+c")),
    ("no final newline", {"a.txt": "a\nb"}, patch("*** Update File: a.txt", "-b", "+c")),
    ("add, delete and move", {"old.py": "x = 1\n", "a.py": "a = 1\nb = 2\n"},
     patch("*** Add File: lib/new.py", "+y = 2", "+", "*** Delete File: old.py", "*** Update File: a.py",
           "*** Move to: b.py", "@@", " a = 1", "-b = 2", "+b = 3")),
    ("old lines that are not there", {"app.py": APP},
     patch("*** Update File: app.py", "@@", "-    return amount * 9", "+    return amount * 3")),
    ("an @@ line that is not there", {"app.py": APP},
     patch("*** Update File: app.py", "@@ def refund():", "-    return amount * 2", "+    return amount * 3")),
    ("an update of a file that is not there", {}, patch("*** Update File: nope.py", "@@", "-a", "+b")),
    ("not a patch", {"a.txt": "a\n"}, "*** Begin Patch\n*** Frobnicate: a.txt\n*** End Patch\n"),
]


def in_memory(files: dict[str, str], text: str) -> dict[str, str] | None:
    out = dict(files)
    try:
        for op in parse(text):
            if op.kind == "add":
                out[op.path] = op.content or ""
            elif op.path not in out:
                return None
            elif op.kind == "delete":
                del out[op.path]
            else:
                new = apply(out.pop(op.path), op.chunks)
                out[op.move_to or op.path] = new
    except PatchError:
        return None
    return out


def on_disk(files: dict[str, str], text: str, root: Path) -> dict[str, str] | None:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(content.encode())
    res = subprocess.run([str(FOUND[0]), "--codex-run-as-apply-patch", text], cwd=root, capture_output=True,
                         text=True, timeout=60)
    if res.returncode != 0:
        return None
    return {p.relative_to(root).as_posix(): p.read_bytes().decode() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("files,text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_patch_leaves_what_codex_leaves(files, text, tmp_path):
    assert in_memory(files, text) == on_disk(files, text, tmp_path)


LINES = st.sampled_from(["a", "b", "a ", " a", "c\u2014d", "c-d", "", "x = 1", "x = 1  "])


@st.composite
def edits(draw):
    """A file of lines drawn from a few look-alikes (repeats, trailing and leading blanks, a
    typographic dash), LF or CRLF, with or without a final line ending, and a patch of one or two
    chunks cut from it, some old lines respelled."""
    lines = draw(st.lists(LINES, min_size=1, max_size=12))
    chunks, at = [], 0
    for _ in range(draw(st.integers(1, 2))):
        if at >= len(lines):
            break
        start = draw(st.integers(at, len(lines) - 1))
        end = draw(st.integers(start + 1, min(len(lines), start + 4)))
        old = [draw(st.sampled_from([x, x.rstrip(), x.strip(), x.replace("\u2014", "-")])) for x in lines[start:end]]
        keep = draw(st.integers(0, len(old)))
        body = [f" {x}" for x in old[:keep]] + [f"-{x}" for x in old[keep:]]
        body += [f"+{x}" for x in draw(st.lists(LINES, max_size=3))]
        header = draw(st.sampled_from(["@@", f"@@ {lines[start - 1]}" if start else "@@"]))
        chunks += [header, *body] + (["*** End of File"] if end == len(lines) and draw(st.booleans()) else [])
        at = end
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return {"f.txt": eol.join(lines) + draw(st.sampled_from([eol, ""]))}, patch("*** Update File: f.txt", *chunks)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits())
def test_drawn_patches_leave_what_codex_leaves(tmp_path_factory, case):
    files, text = case
    assert in_memory(files, text) == on_disk(files, text, tmp_path_factory.mktemp("p"))


@pytest.mark.parametrize("command,found", [
    ("apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF\n", ("*** Begin Patch\n*** End Patch", None)),
    ("cd lib && applypatch <<EOF\nbody\nEOF", ("body", "lib")),
    ("cd 'my dir' && apply_patch <<\"X\"\nbody\nX", ("body", "my dir")),
    ("ls; apply_patch <<EOF\nbody\nEOF", None),
    ("apply_patch <<EOF\nbody\nEOF\necho done", None),
    ("cat <<EOF > app.py\nbody\nEOF", None),
])
def test_the_shell_forms_codex_runs_as_apply_patch(command, found):
    assert from_shell(command) == found
