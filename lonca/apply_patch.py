"""Codex's `apply_patch` patch text, read into what it does to each file, and applied to a file's
text the way Codex 0.171 applies it (its `codex-apply-patch` crate), so that the worker judges a
patch by the files it would leave (service/hook_methods.py) and `lonca hook` knows which files to
send with it.

The format: `*** Begin Patch`, then hunks, then `*** End Patch`. A hunk is `*** Add File: <path>`
followed by `+` lines (the new file), `*** Delete File: <path>`, or `*** Update File: <path>` with
an optional `*** Move to: <path>` and chunks: each chunk may start with `@@` or `@@ <a line to
find first>`, then lines of context (` `), removed (`-`) and added (`+`), and may end with
`*** End of File` (its lines are the file's last). Codex finds a chunk's old lines from where the
previous chunk ended: exactly, then ignoring trailing whitespace, then any surrounding whitespace,
then with typographic punctuation read as ASCII.

Pure functions: no file system, no Lonca imports."""
import re
from dataclasses import dataclass, field

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
EOF_MARK = "*** End of File"


class PatchError(ValueError):
    """The text is not a patch Codex would apply, or a chunk's old lines are not in the file."""


@dataclass
class Chunk:
    context: str | None             # the `@@ <line>` to find before the old lines
    lines: list[tuple[str, str]] = field(default_factory=list)     # (" " | "-" | "+", text)
    at_eof: bool = False

    @property
    def old(self) -> list[str]:
        return [t for mark, t in self.lines if mark != "+"]

    @property
    def new(self) -> list[str]:
        return [t for mark, t in self.lines if mark != "-"]


@dataclass
class FileOp:
    kind: str                       # "add" | "delete" | "update"
    path: str                       # as the patch names it: relative to the harness's cwd, or absolute
    move_to: str | None = None
    content: str | None = None      # an added file's text
    chunks: list[Chunk] = field(default_factory=list)

    def paths(self) -> list[str]:
        """Every path the operation writes (an update that moves writes both)."""
        return [self.path] + ([self.move_to] if self.move_to else [])


# Codex runs a shell command of these two forms as apply_patch itself (its hook sees `Bash`): the
# heredoc statement alone, or after `cd <dir> &&`
_SHELL = re.compile(r"\A\s*(?:cd\s+(?P<cd>'[^']*'|\"[^\"]*\"|[^\s'\";&|]+)\s*&&\s*)?(?:apply_patch|applypatch)"
                    r"\s*<<-?\s*(?P<q>['\"]?)(?P<tag>\w+)(?P=q)[ \t]*\n(?P<body>.*?)\n[ \t]*(?P=tag)\s*\Z", re.S)


def from_shell(command: str) -> tuple[str, str | None] | None:
    """(the patch, the folder it is relative to, or None for the cwd) when a shell command is an
    apply_patch heredoc Codex would apply; None for any other command."""
    m = _SHELL.match(command)
    if m is None:
        return None
    cd = m.group("cd")
    return m.group("body"), cd[1:-1] if cd and cd[0] in "'\"" else cd


def parse(text: str) -> list[FileOp]:
    """The file operations of a patch, in order; PatchError when it is not one."""
    lines = text.strip().split("\n")
    if len(lines) < 2 or lines[0].strip() != BEGIN or lines[-1].strip() != END:
        raise PatchError(f"a patch starts with '{BEGIN}' and ends with '{END}'")
    body, ops, i = lines[1:-1], [], 0
    while i < len(body):
        line = body[i]
        if line.startswith(ADD):
            added, i = [], i + 1
            while i < len(body) and body[i].startswith("+"):
                added.append(body[i][1:])
                i += 1
            ops.append(FileOp("add", _path(line[len(ADD):]), content="".join(f"{x}\n" for x in added)))
        elif line.startswith(DELETE):
            ops.append(FileOp("delete", _path(line[len(DELETE):])))
            i += 1
        elif line.startswith(UPDATE):
            op, i = FileOp("update", _path(line[len(UPDATE):])), i + 1
            if i < len(body) and body[i].startswith(MOVE):
                op.move_to, i = _path(body[i][len(MOVE):]), i + 1
            op.chunks, i = _chunks(body, i, op.path)
            ops.append(op)
        elif not line.strip():
            i += 1
        else:
            raise PatchError(f"line {i + 2} of the patch is not a file header ({ADD.strip()}, {DELETE.strip()} "
                             f"or {UPDATE.strip()}): {line[:80]!r}")
    if not ops:
        raise PatchError("the patch names no file")
    return ops


def _path(raw: str) -> str:
    path = raw.strip()
    if not path:
        raise PatchError("a file header names no path")
    return path


def _chunks(body: list[str], i: int, path: str) -> tuple[list[Chunk], int]:
    chunks: list[Chunk] = []
    while i < len(body) and (body[i] == EOF_MARK or not body[i].startswith("*** ")):
        line = body[i]
        if line == EOF_MARK:
            if not chunks:
                raise PatchError(f"{path}: '{EOF_MARK}' before any change")
            chunks[-1].at_eof = True
        elif line == "@@" or line.startswith("@@ "):
            chunks.append(Chunk(line[3:].rstrip() or None))    # as Codex trims it: "@@ " is a bare "@@"
        else:
            if not chunks:     # the first chunk may leave out its @@
                chunks.append(Chunk(None))
            mark, rest = (line[:1], line[1:]) if line else (" ", "")
            if mark not in " +-":
                raise PatchError(f"{path}: a changed line starts with ' ', '+' or '-': {line[:80]!r}")
            chunks[-1].lines.append((mark, rest))
        i += 1
    if not any(c.lines for c in chunks):
        raise PatchError(f"{path}: an update with no change")
    return chunks, i


def apply(text: str, chunks: list[Chunk]) -> str:
    """The file's text after an update's chunks; PatchError when a chunk's old lines are not found.
    As Codex 0.171 does: a line ends at \r\n, \r or \n; lines a chunk keeps as context keep
    their text and ending from the file (the patch may spell them with other blanks); every new
    line ends as the file's first line does, and so does a line that had none (the last)."""
    lines = [(m.group(1), m.group(2)) for m in _LINE.finditer(text) if m.group(0)]
    eol = next((end for _, end in lines if end), "\n")
    contents = [c for c, _ in lines]
    done, at = [], 0
    for c in chunks:
        if c.context is not None:
            found = _seek(contents, [c.context], at, False)
            if found is None:
                raise PatchError(f"no line {c.context!r} to find")
            at = found + 1
        old_at = [i for i, (mark, _) in enumerate(c.lines) if mark != "+"]
        new_at = [i for i, (mark, _) in enumerate(c.lines) if mark != "-"]
        if not old_at:  # only additions: at the end of the file (before a last blank line)
            end = len(lines) - 1 if contents and contents[-1] == "" else len(lines)
            done.append((end, 0, [(c.lines[i][1], eol) for i in new_at]))
            continue
        found = _seek(contents, [c.lines[i][1] for i in old_at], at, c.at_eof)
        if found is None and c.lines[old_at[-1]][1] == "":
            # the old lines' last blank may stand for the file's final line ending
            old_at = old_at[:-1]
            new_at = new_at[:-1] if new_at and c.lines[new_at[-1]][1] == "" else new_at
            found = _seek(contents, [c.lines[i][1] for i in old_at], at, c.at_eof)
        if found is None:
            raise PatchError("the lines to change are not in the file: " + repr("\n".join(c.old)[:200]))
        in_file = {i: found + k for k, i in enumerate(old_at)}
        done.append((found, len(old_at), [lines[in_file[i]] if c.lines[i][0] == " " and i in in_file
                                          else (c.lines[i][1], eol) for i in new_at]))
        at = found + len(old_at)
    for start, length, new in sorted(done, key=lambda r: r[0], reverse=True):
        lines[start:start + length] = new
    return "".join(c + (end or eol) for c, end in lines)     # the file's last line, kept or not, ends too


_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_PUNCT = {**dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
          **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"), **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
          **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " ")}


def _seek(lines: list[str], pattern: list[str], start: int, at_eof: bool) -> int | None:
    """Where `pattern` starts in `lines` at or after `start` (only at the end, for an end-of-file
    chunk), trying each of Codex's four comparisons in turn."""
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    first = max(start, len(lines) - len(pattern)) if at_eof else start
    for norm in (lambda s: s, str.rstrip, str.strip, lambda s: "".join(_PUNCT.get(ch, ch) for ch in s.strip())):
        want = [norm(p) for p in pattern]
        for i in range(first, len(lines) - len(pattern) + 1):
            if all(norm(lines[i + k]) == want[k] for k in range(len(pattern))):
                return i
    return None
