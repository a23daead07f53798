"""What templates need besides the data: labels, ages, and the diff split by file with syntax
highlighting (Pygments, classes only: the stylesheet colours them)."""
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from functools import lru_cache
from urllib.parse import quote

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
EXPAND_STEP = 20    # hidden lines shown a click, as GitHub does
# A diff up to this size is coloured while the page waits; a larger one is drawn plain first and
# coloured on a thread (Pygments lexes Python at ~10,000 lines a second on a quiet core)
HIGHLIGHT_LINES_NOW = 2_000
HIGHLIGHT_BYTES_NOW = 256 * 1024
KEPT_DIFFS = 32
_KEPT: OrderedDict[tuple[str, bool], dict[str, list[tuple]]] = OrderedDict()
_KEPT_LOCK = threading.Lock()
_COLOURING: set[str] = set()

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


_CLASS: dict = {}     # token type -> its CSS class (its nearest standard ancestor's)


# The token classes static/lonca.css colours: any other token is written as plain text, not a
# span (a 6,000-line diff's page was 2.5 MB, most of it spans around spaces and names).
COLOURED = frozenset("k kd kn kr kc kt s s1 s2 sd sb sa se si c c1 cm ch cs nf fm nc m mi mf mh nb bp o ow nd".split())


def _class(ttype) -> str:
    """The token's CSS class if the stylesheet colours it, else ""."""
    cls = _CLASS.get(ttype)
    if cls is None:
        t = ttype
        while t not in STANDARD_TYPES:
            t = t.parent
        cls = _CLASS[ttype] = STANDARD_TYPES[t] if STANDARD_TYPES[t] in COLOURED else ""
    return cls


def _highlight_lines(lexer, lines: list[str]) -> list[Markup]:
    """Each line highlighted, the lines lexed as one text: one pass of the lexer a side of a
    file, not one a line (a 6,000-line diff took a second to lex line by line), and a string or
    comment over several lines is coloured as the file has it."""
    if not lines:
        return []
    out: list[Markup] = []
    cur: list[str] = []
    for ttype, value in lex("\n".join(lines) + "\n", lexer):
        cls = _class(ttype)
        for j, piece in enumerate(value.split("\n")):
            if j:
                out.append(Markup("".join(cur)))
                cur = []
            if piece:
                cur.append(f'<span class="{cls}">{escape(piece)}</span>' if cls else str(escape(piece)))
    if cur:
        out.append(Markup("".join(cur)))
    out.extend(Markup("") for _ in range(len(lines) - len(out)))  # a lexer that dropped a line's end
    return out[:len(lines)]


def highlight_lines(path: str, lines: list[str]) -> list[Markup]:
    """Lines of the file at `path`, coloured as one text."""
    return _highlight_lines(_lexer(path.rsplit("/", 1)[-1]), lines)


@lru_cache(maxsize=64)
def _lexer(name: str):
    """The lexer of a file's name; Pygments' lookup walks every lexer's patterns."""
    try:
        return get_lexer_for_filename(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def diff_files(diff: str, colours: bool = True) -> dict[str, list[tuple]]:
    """path -> [(kind, old_no, new_no, html)] of a unified diff. With colours, each side's lines
    are highlighted with the lexer of its file's name, the new side (context and added lines)
    and the old side (context and removed lines) each lexed as one text; without, escaped only.
    A commit's diff never changes and the change page is drawn again on every log entry: the
    last few are kept, not lexed again."""
    key = (diff, colours)
    with _KEPT_LOCK:
        files = _KEPT.get(key)
        if files is not None:
            _KEPT.move_to_end(key)
            return files
    files = _diff_files(diff, colours)
    with _KEPT_LOCK:
        _KEPT[key] = files
        while len(_KEPT) > KEPT_DIFFS:
            _KEPT.popitem(last=False)
    return files


def coloured_now(diff: str) -> bool:
    """Whether the diff is drawn with colours without waiting for them: a small one, or one
    coloured already. A larger one is drawn plain while `colour_later` colours it."""
    if diff.count("\n", 0, HIGHLIGHT_BYTES_NOW) < HIGHLIGHT_LINES_NOW and len(diff) <= HIGHLIGHT_BYTES_NOW:
        return True
    with _KEPT_LOCK:
        return (diff, True) in _KEPT


def colour_later(diff: str) -> None:
    """Colour a large diff on a thread of its own, once: the next drawing of the page has it."""
    with _KEPT_LOCK:
        if diff in _COLOURING or (diff, True) in _KEPT:
            return
        _COLOURING.add(diff)

    def work():
        try:
            diff_files(diff, True)
        finally:
            with _KEPT_LOCK:
                _COLOURING.discard(diff)
    threading.Thread(target=work, name="lonca-diff-colours", daemon=True).start()


def _diff_files(diff: str, colours: bool) -> dict[str, list[tuple]]:
    """Rows of each file; a ("gap", first, last, shift) row stands for the unchanged lines of
    the new side between two hunks (before the first, and after the last with last 0: up to the
    end of the file), old number = new number - shift; the page can expand them."""
    rows_of: dict[str, list[list]] = {}
    rows: list[list] | None = None
    old_no = new_no = 0
    header = False  # between a file's "diff --git" and its first hunk: git's header lines, not the file's
    whole = False   # an added or deleted file: its hunk is the whole file, no line is hidden
    hunked = cut = False

    def end_of_file():
        if rows and hunked and not whole and not cut:
            rows.append(["gap", new_no, 0, new_no - old_no, None])
    for n, line in enumerate(diff.splitlines()):
        if n >= MAX_DIFF_LINES:
            if rows is not None:
                rows.append(["note", "", "", "", Markup("… the rest of the diff is not shown")])
            cut = True
            break
        if line.startswith("diff --git "):
            end_of_file()
            rows = rows_of.setdefault(line.split(" b/", 1)[-1], [])
            header, whole, hunked = True, False, False
        elif rows is None or header and not line.startswith("@@"):
            whole = whole or line.startswith(("new file mode", "deleted file mode"))
            continue    # "--- a/…", "index …", modes, renames; a removed line "-- x" in a hunk is the file's
        elif line.startswith("@@"):
            header = False
            m = re.match(r"^@@ -(\d+)(?:,\d+)? \+(\d+)", line)
            next_old, next_new = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            first = new_no if hunked else 1
            hunked = True
            if not whole and next_new > first:
                rows.append(["gap", first, next_new - 1, next_new - next_old, None])
            old_no, new_no = next_old, next_new
            rows.append(["hunk", "", "", "", escape(line)])
        elif line.startswith("+"):
            rows.append(["add", "", new_no, line[1:], None])
            new_no += 1
        elif line.startswith("-"):
            rows.append(["del", old_no, "", line[1:], None])
            old_no += 1
        elif line.startswith("\\"):
            rows.append(["note", "", "", "", escape(line)])
        else:
            rows.append(["ctx", old_no, new_no, line[1:], None])
            old_no += 1
            new_no += 1
    end_of_file()
    files: dict[str, list[tuple]] = {}
    for path, got in rows_of.items():
        if colours:
            lexer = _lexer(path.rsplit("/", 1)[-1])
            # the old side first: a context line keeps the new side's colours
            for kinds in (("ctx", "del"), ("ctx", "add")):
                picked = [r for r in got if r[0] in kinds]
                for r, html in zip(picked, _highlight_lines(lexer, [r[3] for r in picked])):
                    r[4] = html
        files[path] = [(k, a, b, text) if k == "gap" else (k, a, b, Markup(escape(text)) if html is None else html)
                       for k, a, b, text, html in got]
    return files


def _new_no(b, comment_links: bool):
    # the file's path is on its section (data-path): a link a line stays short
    return f'<a href="#comment" data-line="{b}">{b}</a>' if b and comment_links else b


def gap_row(path: str, first: int, last: int, shift: int, expand: str, split: bool, links: bool) -> str:
    """The row standing for the hidden lines first..last of the new side (last 0: to the end of
    the file), with buttons that fetch them (htmx; console/expand.py answers with their rows
    and what stays hidden)."""
    url = f"{expand}&path={quote(path)}&from={first}&to={last}&shift={shift}&split={int(split)}&links={int(links)}"
    hidden = last - first + 1 if last else None
    buttons = []

    def button(take: str, label: str, words: str) -> None:
        buttons.append(f'<button type="button" class="expand" data-take="{take}" hx-get="{escape(url)}&amp;take={take}" '
                       f'hx-target="closest tr" hx-swap="outerHTML" title="{escape(words)}">{label}</button>')
    if hidden is not None and hidden <= EXPAND_STEP:
        button("all", f"Show {hidden} hidden line{'s' if hidden > 1 else ''}", f"lines {first} to {last}")
    else:
        if first > 1:
            button("down", f"Show {EXPAND_STEP} more below", f"lines {first} to {first + EXPAND_STEP - 1}")
        if last:
            button("up", f"Show {EXPAND_STEP} more above", f"lines {max(first, last - EXPAND_STEP + 1)} to {last}")
        button("all", f"Show all {hidden}" if hidden else "Show to the end",
               f"lines {first} to {last}" if last else f"lines {first} to the end of the file")
    return (f'<tr class="gap" data-gap="{first}-{last}"><td colspan="{4 if split else 3}" class="code">'
            f'{"".join(buttons)}</td></tr>')


def _split(rows: list[tuple], comment_links: bool, gap) -> str:
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
            elif kind == "gap":
                if gap:
                    out.append(gap(a, b, html))
            else:
                out.append(f'<tr class="{kind}"><td colspan="4" class="code"><code>{html}</code></td></tr>')
    flush()
    return "".join(out)


def _unified(rows: list[tuple], comment_links: bool, gap) -> str:
    return "".join(f'<tr class="{kind}"><td class="n">{a}</td><td class="n">{_new_no(b, comment_links)}</td>'
                   f'<td class="code"><code>{html}</code></td></tr>' if kind != "gap" else gap(a, b, html) if gap else ""
                   for kind, a, b, html in rows)


def table_rows(rows: list[tuple], comment_links: bool, split: bool, gap=None) -> Markup:
    """A diff table's rows as HTML; gap(first, last, shift) draws a row of hidden lines (none
    drawn without it)."""
    return Markup((_split if split else _unified)(rows, comment_links, gap))


@lru_cache(maxsize=32)
def diff_tables(diff: str, comment_links: bool, split: bool = False, colours: bool = True,
                expand: str | None = None) -> dict[str, Markup]:
    """path -> the rows of its diff table as HTML, made once a diff: a 6,000-line diff drawn by
    the template's loop cost most of the change page's time. With comment_links, each line number
    of the new side is a link that picks the line for a comment (static/review.js). split: side by
    side, old on the left. expand: the URL (with its query's commit) that fetches hidden lines;
    without it, none can be expanded."""
    tables = {}
    for path, rows in diff_files(diff, colours).items():
        gap = (lambda first, last, shift, path=path: gap_row(path, first, last, shift, expand, split, comment_links)) if expand else None
        tables[path] = table_rows(rows, comment_links, split, gap)
    return tables


def _e(value) -> str:
    return str(escape(value))


def review_rows(repo: str, pending: list[dict]) -> Markup:
    """The review table's rows, written here rather than by the template: with 1,000 pending,
    Jinja's loop was most of the page's time. Ages are `<time data-since>` that live.js ticks,
    so a row's HTML does not change with the clock."""
    out = []
    r = _e(repo)
    for p in pending:
        # every field the row shows: an entry keeps its row from one drawing to the next
        key = (repo, p["seq"], p.get("change"), None if p.get("change") else repr(p.get("op")), p.get("agent"), p.get("actor"),
               p.get("task"), p.get("intent"), tuple(p.get("paths") or ()), tuple(p.get("runs") or ()),
               tuple(p.get("checks") or ()), tuple(p.get("reasons") or ()), p["created_ms"])
        row = _ROWS.get(key)
        if row is None:
            row = _ROWS[key] = _review_row(r, p)
            if len(_ROWS) > ROWS_KEPT:
                del _ROWS[next(iter(_ROWS))]
        out.append(row)
    return Markup("".join(out))


ROWS_KEPT = 10_000
_ROWS: dict[tuple, str] = {}


def _review_row(r: str, p: dict) -> str:
    seq = int(p["seq"])
    link = (f'<a href="/r/{r}/changes/{_e(p["change"])}">#{seq} {_e(p["change"][:12])}</a>' if p.get("change")
            else f"#{seq} {_e(p['op'])}")
    who = _e(p.get("agent") or p.get("actor")) + (f"<br><small>{_e(p['task'])}</small>" if p.get("task") else "")
    paths = p.get("paths") or []
    shown = "".join(f"<code>{_e(x)}</code> " for x in paths[:5]) + (f"<small>+{len(paths) - 5} more</small>" if len(paths) > 5 else "")
    runs = _e(", ".join(p.get("runs") or []) or "-") + (f"<br><small>asked: {_e(', '.join(p['checks']))}</small>" if p.get("checks") else "")
    why = "".join(f'<code title="{_e(_words(x))}">{_e(x)}</code> ' for x in p.get("reasons") or [])
    return (f'<tr data-seq="{seq}"><td>{link}</td><td>{who}</td><td>{_e(p.get("intent") or "-")}</td>'
            f'<td class="paths">{shown}</td><td>{runs}</td><td class="reasons">{why}</td>'
            f'<td><time data-since="{int(p["created_ms"])}">{clock(p["created_ms"])}</time></td></tr>')


_words = lru_cache(maxsize=4096)(in_words)   # a reason code reads the same every time
SYMBOL_KINDS = ("edits", "adds", "deletes", "signature_changes")
_BLOCKS: OrderedDict[tuple, dict[str, Markup]] = OrderedDict()


def symbol_blocks(base: str, commit: str, files: list[dict], comment: bool) -> dict[str, Markup]:
    """Each file's symbols as the change page lists them (a link that picks the symbol for a
    comment while the change waits), and under "" the options of the comment form's list. A
    commit's symbols never change; a change of 3,000 new functions wrote 15,000 escaped strings
    through the template at every drawing, so they are written once here."""
    key = (base, commit, comment)
    got = _BLOCKS.get(key)
    if got is None:
        got = {}
        options = []
        for f in files:
            spans = []
            for kind in SYMBOL_KINDS:
                word = "signature" if kind == "signature_changes" else kind[:-1]
                for sym in f["symbols"][kind]:
                    e = _e(sym)
                    inner = f'<a href="#comment" data-symbol="{e}" title="comment on {e}"><code>{e}</code></a>' if comment else f"<code>{e}</code>"
                    spans.append(f'<span class="sym {kind}">{word} {inner}</span> ')
                    options.append(f'<option value="{e}"></option>')
            got[f["path"]] = Markup("".join(spans))
        got[""] = Markup("".join(options))
        _BLOCKS[key] = got
        while len(_BLOCKS) > KEPT_DIFFS:
            _BLOCKS.popitem(last=False)
    _BLOCKS.move_to_end(key)
    return got


def claims_body(change: str, commit: str, claim: dict | None, facts: dict | None) -> Markup:
    """The rows of the claim-against-facts table (claim_rows) of a version of a change, written
    once here for the same reason."""
    key = ("claims", change, commit)
    got = _BLOCKS.get(key)
    if got is None:
        got = _BLOCKS[key] = {"": _claims(claim_rows(claim, facts))}
        while len(_BLOCKS) > KEPT_DIFFS:
            _BLOCKS.popitem(last=False)
    _BLOCKS.move_to_end(key)
    return got[""]


def _claims(rows: list[dict]) -> Markup:
    return Markup("".join(
        f'<tr class="{"ok" if r["match"] else "bad"}"><th scope="row">{_e(r["field"])}</th>'
        f'<td>{"".join(f"<code>{_e(x)}</code> " for x in r["claimed"])}</td>'
        f'<td>{"".join(f"<code>{_e(x)}</code> " for x in r["facts"])}</td>'
        f'<td>{"matches" if r["match"] else "differs"}</td></tr>' for r in rows))


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
