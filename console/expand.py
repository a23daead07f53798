"""Hidden lines of a diff, fetched on a click: the gap rows of the diff view (views.gap_row) ask
for lines of the file at the change's commit, read with `blobs` (the console is a client of the
socket, it has no git), and get them back as context rows, with what stays hidden as a smaller
gap row. Unified and side by side alike."""
import base64
import re
from collections import OrderedDict
from dataclasses import dataclass

from markupsafe import Markup

from . import views

KEPT = 16                       # files kept: each click of one file would read it again
MAX_FILE = 4 * 1024 * 1024
COLOURED_MAX = 2_000            # lines coloured in one answer; "all" of a larger gap comes plain
_COMMIT = re.compile(r"[0-9a-f]{40}")
_INT_MAX = 2**31


@dataclass(frozen=True)
class Ask:
    commit: str
    path: str
    first: int
    last: int       # 0: to the end of the file
    shift: int      # new line number - old line number, constant in a gap
    take: str       # "up" (the lines above the next hunk), "down" (below the previous one), "all"
    split: bool
    links: bool

    @classmethod
    def parse(cls, q) -> "Ask":
        """The query of a gap row's button; ValueError with what is wrong."""
        commit, path, take = q.get("commit", ""), q.get("path", ""), q.get("take", "")
        if not _COMMIT.fullmatch(commit):
            raise ValueError("commit is 40 hex digits")
        if not path or len(path) > 4096:
            raise ValueError("path is the file's path in the commit")
        if take not in ("up", "down", "all"):
            raise ValueError("take is up, down or all")
        nums = {}
        for name in ("from", "to", "shift"):
            v = q.get(name, "")
            if not re.fullmatch(r"-?[0-9]{1,10}", v) or abs(int(v)) >= _INT_MAX:
                raise ValueError(f"{name} is an integer")
            nums[name] = int(v)
        if nums["from"] < 1 or nums["to"] < 0 or (nums["to"] and nums["to"] < nums["from"]):
            raise ValueError("from is a line number, to 0 or a line number from it on")
        return cls(commit, path, nums["from"], nums["to"], nums["shift"], take, q.get("split") == "1", q.get("links") == "1")


class FileLines:
    """(commit, path) -> the file's lines, the last few read: a commit's file never changes."""

    def __init__(self):
        self._kept: OrderedDict[tuple[str, str], list[str] | None] = OrderedDict()

    async def of(self, call, commit: str, path: str) -> list[str] | None:
        """The lines, or None for a file that is not text or is redacted."""
        key = (commit, path)
        if key not in self._kept:
            got = (await call("blobs", {"commit": commit, "paths": [path]}))[0]
            data = base64.b64decode(got["content_b64"]) if got.get("content_b64") is not None else None
            self._kept[key] = None if data is None or b"\0" in data[:8192] or len(data) > MAX_FILE else \
                data.decode("utf-8", "replace").splitlines()
        self._kept.move_to_end(key)
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return self._kept[key]


def rows(repo: str, ask: Ask, lines: list[str]) -> Markup:
    """The rows that replace the gap row: the lines asked for, and a gap row for what is left
    hidden (before them for "up", after them for "down")."""
    end = len(lines) if ask.last == 0 else min(ask.last, len(lines))
    if ask.first > end:
        return Markup("")
    lo, hi = ask.first, end
    if ask.take == "down":
        hi = min(end, ask.first + views.EXPAND_STEP - 1)
    elif ask.take == "up":
        lo = max(ask.first, end - views.EXPAND_STEP + 1)
    shown = lines[lo - 1:hi]
    html = views.highlight_lines(ask.path, shown) if len(shown) <= COLOURED_MAX else [Markup.escape(t) for t in shown]
    got = [("ctx", n - ask.shift, n, h) for n, h in zip(range(lo, hi + 1), html)]
    expand = f"/r/{repo}/context?commit={ask.commit}"

    def gap(first: int, last: int, shift: int) -> str:
        return views.gap_row(ask.path, first, last, shift, expand, ask.split, ask.links)
    if lo > ask.first:
        got.insert(0, ("gap", ask.first, lo - 1, ask.shift))
    if hi < end:
        got.append(("gap", hi + 1, end, ask.shift))
    return views.table_rows(got, ask.links, ask.split, gap)
