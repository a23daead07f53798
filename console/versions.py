"""Versions of a change side by side: the diff between any two of its commits, and whether a
comment made on an earlier version still stands. The console has no git (it is a client of the
socket): it reads both trees with `tree` and the files that differ with `blobs`, and draws the
diff with difflib in git's unified shape, which views.diff_files reads like a change's own diff."""
import base64
import difflib
from collections import OrderedDict

KEPT = 64           # trees kept: a commit's tree never changes, and a page is drawn again often
MAX_FILE = 4 * 1024 * 1024


class Trees:
    """path -> blob id of commits already read, the latest few."""

    def __init__(self):
        self._kept: OrderedDict[str, dict[str, str]] = OrderedDict()

    async def of(self, call, commit: str) -> dict[str, str]:
        files = self._kept.get(commit)
        if files is None:
            got = await call("tree", {"commit": commit, "with_content": False, "paths": None})
            files = {f["path"]: f["blob"] for f in got}
        self._kept[commit] = files
        self._kept.move_to_end(commit)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return files


def _text(entry: dict | None) -> list[str] | None:
    """A file's lines, or None for a file that is not text (or redacted)."""
    if entry is None:
        return []
    if entry.get("content_b64") is None:
        return None
    data = base64.b64decode(entry["content_b64"])
    if b"\0" in data[:8192] or len(data) > MAX_FILE:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


async def compare(call, trees: Trees, old: str, new: str) -> tuple[str, list[str]]:
    """The unified diff from commit `old` to commit `new`, and the paths that differ."""
    a, b = await trees.of(call, old), await trees.of(call, new)
    paths = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
    before = {f["path"]: f for f in await call("blobs", {"commit": old, "paths": [p for p in paths if p in a]})} if any(p in a for p in paths) else {}
    after = {f["path"]: f for f in await call("blobs", {"commit": new, "paths": [p for p in paths if p in b]})} if any(p in b for p in paths) else {}
    out = []
    for p in paths:
        x, y = _text(before.get(p)), _text(after.get(p))
        out.append(f"diff --git a/{p} b/{p}\n")
        if x is None or y is None:
            out.append(f"Binary files a/{p} and b/{p} differ\n")
            continue
        for line in difflib.unified_diff(x, y, f"a/{p}", f"b/{p}", n=3):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out), paths


async def comment_states(call, trees: Trees, comments: list[dict], commits: dict[int, str], version: int) -> list[dict]:
    """Each comment with its state on `version`: resolved when a later version changed the file
    it is on, open otherwise (a file left as it was has not answered it)."""
    now = commits.get(version)
    out = []
    for c in comments:
        state = "open"
        then = commits.get(c["version"])
        if c["version"] < version and then and now:
            a, b = await trees.of(call, then), await trees.of(call, now)
            if a.get(c["path"]) != b.get(c["path"]):
                state = "resolved"
        out.append({**c, "state": state})
    return out
