"""What templates need besides the data: labels, ages, and the diff split by file with syntax
highlighting (Pygments, classes only: the stylesheet colours them)."""
import hashlib
import json
import re
from functools import lru_cache
import time

from markupsafe import Markup, escape
from pygments import lex
from pygments.lexers import get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

from lonca import protocol
from lonca.humansig import fingerprint

from . import plots
from .reasons import in_words

MAX_DIFF_LINES = 20_000

def actor_label(actor) -> str:
    """Labels come as strings in status, as objects in log entries."""
    if isinstance(actor, str):
        return actor
    return protocol.actor_label(actor) if isinstance(actor, dict) else "?"


def age(ms: int | None, now_ms: int) -> str:
    if not ms:
        return "-"
    s = max(0, (now_ms - ms) // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d"


def clock(ms: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _lexer(path: str):
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _highlight(lexer, text: str) -> Markup:
    out = []
    for ttype, value in lex(text, lexer):
        while ttype not in STANDARD_TYPES:
            ttype = ttype.parent
        cls = STANDARD_TYPES[ttype]
        out.append(f'<span class="{cls}">{escape(value)}</span>' if cls else str(escape(value)))
    return Markup("".join(out))


@lru_cache(maxsize=32)
def diff_files(diff: str) -> dict[str, list[tuple]]:
    """path -> [(kind, old_no, new_no, html)] of a unified diff; each side's line is highlighted
    with the lexer of its file's name. A commit's diff never changes and the change page is
    drawn again on every log entry: the last few are kept, not lexed again."""
    files: dict[str, list[tuple]] = {}
    lines = lexer = None
    old_no = new_no = 0
    header = False  # between a file's "diff --git" and its first hunk: git's header lines, not the file's
    for n, line in enumerate(diff.splitlines()):
        if n >= MAX_DIFF_LINES:
            if lines is not None:
                lines.append(("note", "", "", Markup("… the rest of the diff is not shown")))
            break
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1]
            lines, lexer = files.setdefault(path, []), _lexer(path)
            header = True
        elif lines is None or header and not line.startswith("@@"):
            continue    # "--- a/…", "index …", modes, renames; a removed line "-- x" in a hunk is the file's
        elif line.startswith("@@"):
            header = False
            m = re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)", line)
            old_no, new_no = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            lines.append(("hunk", "", "", escape(line)))
        elif line.startswith("+"):
            lines.append(("add", "", new_no, _highlight(lexer, line[1:])))
            new_no += 1
        elif line.startswith("-"):
            lines.append(("del", old_no, "", _highlight(lexer, line[1:])))
            old_no += 1
        elif line.startswith("\\"):
            lines.append(("note", "", "", escape(line)))
        else:
            lines.append(("ctx", old_no, new_no, _highlight(lexer, line[1:])))
            old_no += 1
            new_no += 1
    return files


def _new_no(b, comment_links: bool):
    # the file's path is on its section (data-path): a link a line stays short
    return f'<a href="#comment" data-line="{b}">{b}</a>' if b and comment_links else b


def _split(rows: list[tuple], comment_links: bool) -> str:
    """Side by side: context on both sides, each run of removed lines beside the added lines
    that follow it."""
    out: list[str] = []
    dels: list[tuple] = []
    adds: list[tuple] = []

    def flush():
        for i in range(max(len(dels), len(adds))):
            d = dels[i] if i < len(dels) else None
            a = adds[i] if i < len(adds) else None
            out.append(f'<tr><td class="n">{d[1] if d else ""}</td><td class="code{" del" if d else " none"}"><code>{d[3] if d else ""}</code></td>'
                       f'<td class="n">{_new_no(a[2], comment_links) if a else ""}</td><td class="code{" add" if a else " none"}"><code>{a[3] if a else ""}</code></td></tr>')
        dels.clear()
        adds.clear()
    for row in rows:
        kind, a, b, html = row
        if kind == "del":
            if adds:
                flush()
            dels.append(row)
        elif kind == "add":
            adds.append(row)
        else:
            flush()
            if kind == "ctx":
                out.append(f'<tr class="ctx"><td class="n">{a}</td><td class="code"><code>{html}</code></td>'
                           f'<td class="n">{_new_no(b, comment_links)}</td><td class="code"><code>{html}</code></td></tr>')
            else:
                out.append(f'<tr class="{kind}"><td colspan="4" class="code"><code>{html}</code></td></tr>')
    flush()
    return "".join(out)


@lru_cache(maxsize=32)
def diff_tables(diff: str, comment_links: bool, split: bool = False) -> dict[str, Markup]:
    """path -> the rows of its diff table as HTML, made once a diff: a 6,000-line diff drawn by
    the template's loop cost most of the change page's time. With comment_links, each line number
    of the new side is a link that picks the line for a comment (static/review.js). split: side by
    side, old on the left."""
    tables = {}
    for path, rows in diff_files(diff).items():
        if split:
            tables[path] = Markup(_split(rows, comment_links))
            continue
        out = [f'<tr class="{kind}"><td class="n">{a}</td><td class="n">{_new_no(b, comment_links)}</td>'
               f'<td class="code"><code>{html}</code></td></tr>' for kind, a, b, html in rows]
        tables[path] = Markup("".join(out))
    return tables


def claim_rows(claim: dict | None, facts: dict | None) -> list[dict]:
    """Each claim field that lists symbols or files, beside what the facts say, flagged where
    they differ; a claimed value that is not a list of strings is shown as it came, and differs
    (the worker keeps a rejected change's claim as it was sent)."""
    claim, facts = claim or {}, facts or {}
    rows = []
    for field in protocol.CLAIM_FIELDS:
        if field == "tests":    # a mapping of lists: its mismatch shows in the status reasons
            continue
        value, f = claim.get(field), sorted(facts.get(field) or [])
        listed = value is None or (isinstance(value, list) and all(isinstance(x, str) for x in value))
        c = sorted(value or []) if listed else [json.dumps(value)]
        rows.append({"field": field, "claimed": c, "facts": f, "match": listed and c == f})
    return rows


def digest(html: str) -> str:
    """A part's fingerprint: live.js replaces a part of a page only when this changes."""
    return hashlib.sha256(str(html).encode()).hexdigest()[:16]


def register(env) -> None:
    env.filters.update(actor=actor_label, age=age, clock=clock, digest=digest, duration=plots.duration, fingerprint=fingerprint, in_words=in_words)
