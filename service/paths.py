"""The one check of the paths a file change names (seed 001, "file change"), and of the target a
symlink holds. Everything here refuses with `invalid` naming the path: a path the worker cannot
write exactly as named must never reach the index, where libgit2 would cut it at a NUL, fold a
file into a directory or answer with an error the worker could only call `internal`.

Git's own rules (read-cache.c `verify_path`, path.c `is_ntfs_dotgit`, utf8.c `is_hfs_dotgit`) are
implemented here with both `core.protectNTFS` and `core.protectHFS` on, whatever the machine: a
repository is checked out on every kind of file system, so a name any checkout would take for
`.git` is refused everywhere. The rules are a superset of git's; tests compare them with `git
update-index` over generated names."""
import re
import unicodedata

import pygit2

from lonca.protocol import LoncaError

from .gitstore import walk_tree

TREE = pygit2.GIT_FILEMODE_TREE
PATH_MAX = 4096     # bytes of UTF-8, as PATH_MAX on Linux
SEGMENT_MAX = 255   # bytes of one name, as NAME_MAX on Linux, macOS and NTFS

# Code points HFS+ ignores when it compares names (git's utf8.c, next_hfs_char): `.g\u200cit`
# is `.git` on a Mac.
_HFS_IGNORED = dict.fromkeys([0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070),
                              0xFEFF])
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# git's own files, which it refuses to read through a symlink (.gitmodules) or warns of; their
# NTFS 8.3 short names are the first six letters or a hash, then ~ and a digit (path.c).
_GIT_FILES = (".gitmodules", ".gitattributes", ".gitignore", ".mailmap")
_GIT_FILE_SHORT = re.compile(r"(gitmod|gi7eba|gitatt|gi7d29|gitign|gi250a|mailma|maba30)~[1-9]")


def _git_spelling(name: str) -> str:
    """`name` as the most forgiving checkout compares it: HFS's ignored code points dropped,
    ASCII case folded, an NTFS stream (`:…`) and NTFS's trailing dots and spaces cut off."""
    folded = name.translate(_HFS_IGNORED).translate(_ASCII_LOWER)
    return folded.split(":", 1)[0].rstrip(" .")


def is_git_dir(name: str) -> bool:
    """Whether a checkout on some file system would take this one name for `.git`."""
    return _git_spelling(name) in (".git", "git~1")


def _bad_char(path: str) -> str | None:
    for ch in path:
        if ch == "\\":
            return "a backslash (directories are separated by /)"
        cat = unicodedata.category(ch)
        if cat == "Cc":
            return f"the control character U+{ord(ch):04X}"
        if cat in ("Zl", "Zp"):
            return f"the line separator U+{ord(ch):04X}"
        if cat == "Cs":
            return "a lone surrogate (not UTF-8)"
    return None


def path_problem(path: str, symlink: bool = False) -> str | None:
    """Why `path` can not be a path of a file change, or None. A path is relative, UTF-8 without
    NUL, control characters, newlines or backslashes; has no empty, `.` or `..` name and no `.git`
    in any spelling a checkout would take for it; fits PATH_MAX and SEGMENT_MAX. `symlink`: the
    file is a symlink, which may not be one of git's own files either."""
    if not path:
        return "is empty"
    bad = _bad_char(path)
    if bad:
        return f"holds {bad}"
    if path.startswith("/"):
        return "is absolute; name it relative to the repository root"
    if len(path.encode("utf-8")) > PATH_MAX:
        return f"is longer than {PATH_MAX} bytes"
    parts = path.split("/")
    for name in parts:
        if name in ("", ".", ".."):
            return f"has {'an empty' if not name else 'a ' + repr(name)} name; write it as a plain relative path"
        if len(name.encode("utf-8")) > SEGMENT_MAX:
            return f"has a name longer than {SEGMENT_MAX} bytes"
        if is_git_dir(name):
            return f"names git's own directory ({name!r} is .git on some file system)"
    if symlink:
        last = _git_spelling(parts[-1])
        if last in _GIT_FILES or _GIT_FILE_SHORT.match(last):
            return "is one of git's own files, which may not be a symlink"
    return None


def check_path(path: str, symlink: bool = False) -> str:
    """`path`, or `invalid` naming it and saying why it can not be a path (path_problem)."""
    why = path_problem(path, symlink)
    if why:
        raise _invalid(path, why)
    return path


def check_symlink_target(path: str, target: bytes) -> None:
    """A symlink at `path` pointing at `target` must stay inside the tree: relative, and with
    every `..` at its start and no more of them than `path` has directories. A `..` after a name
    is refused rather than normalised: that name may itself be a symlink, so only the start of a
    target can be resolved without reading the tree."""
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(path, "is a symlink whose target is not UTF-8") from None
    if not text:
        raise _invalid(path, "is a symlink with an empty target")
    if len(target) > PATH_MAX:
        raise _invalid(path, f"is a symlink whose target is longer than {PATH_MAX} bytes")
    bad = _bad_char(text)
    if bad:
        raise _invalid(path, f"is a symlink whose target holds {bad}")
    if text.startswith("/") or re.match(r"[A-Za-z]:", text):
        raise _invalid(path, f"is a symlink to {text!r}, outside the repository; point it at a relative path inside")
    ups, depth = 0, path.count("/")
    names = [n for n in text.split("/") if n not in ("", ".")]
    for i, name in enumerate(names):
        if name == "..":
            if i != ups:
                raise _invalid(path, f"is a symlink to {text!r}; write the target with every .. at its start")
            ups += 1
        elif is_git_dir(name):
            raise _invalid(path, f"is a symlink into git's own directory ({text!r})")
    if ups > depth:
        raise _invalid(path, f"is a symlink to {text!r}, which leaves the repository; point it inside")


def fold(name: str) -> str:
    """The name a case-insensitive, normalising file system (macOS, Windows) sees: case folded,
    Unicode composed the same way, HFS's ignored code points dropped."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", name.translate(_HFS_IGNORED)).casefold())


def _invalid(path: str, why: str) -> LoncaError:
    # repr: control characters and lone surrogates escaped, so the message stays one line
    return LoncaError("invalid", f"the path {path!r} {why}")


class _Base:
    """The base tree, read lazily: the mode at a path, the names in a directory, the files below."""

    def __init__(self, repo: pygit2.Repository, tree: pygit2.Tree):
        self.repo, self.tree = repo, tree
        self._modes: dict[str, int | None] = {}
        self._names: dict[str, dict[str, list[str]]] = {}

    def mode(self, path: str) -> int | None:
        if path not in self._modes:
            try:
                self._modes[path] = int(self.tree[path].filemode)
            except KeyError:
                self._modes[path] = None
        return self._modes[path]

    def folded_names(self, directory: str) -> dict[str, list[str]]:
        """fold(name) -> the names of `directory` (empty when the base has no such directory)."""
        if directory not in self._names:
            out: dict[str, list[str]] = {}
            tree = self.tree if not directory else (self.tree[directory] if self.mode(directory) == TREE else None)
            for e in tree or ():
                out.setdefault(fold(e.name), []).append(e.name)
            self._names[directory] = out
        return self._names[directory]

    def files_below(self, directory: str) -> set[str]:
        return {p for p, _oid, _mode in walk_tree(self.repo, self.tree[directory], directory + "/")}


def check_tree(repo: pygit2.Repository, base_tree: pygit2.Tree, files: list[dict], case_twins: bool) -> None:
    """Refuses a change that deletes what the base does not have as a file, whose tree would hold
    one path as a file and as a directory (with the base or within the change), and, unless `case_twins`, a new name that a case-insensitive file
    system would take for another name of the same directory. `files` are check_files's."""
    written = {f["path"] for f in files if f["data"] is not None}
    deleted = {f["path"] for f in files if f["data"] is None}
    base = _Base(repo, base_tree)
    for path in sorted(deleted):
        mode = base.mode(path)
        if mode is None:
            raise _invalid(path, "is not in the base, so there is nothing to delete; propose on the base you changed")
        if mode == TREE:
            raise _invalid(path, "is a directory; delete each file in it")
    for path in sorted(written):
        parts = path.split("/")
        in_base = True  # the directories above are the base's so far
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            if above in written:
                raise _invalid(path, f"is below {above!r}, which this change writes as a file")
            mode = base.mode(above) if in_base else None
            in_base = mode == TREE
            if mode is not None and mode != TREE and above not in deleted:
                raise _invalid(path, f"is below {above!r}, a file of the base; delete {above!r} in the same change "
                                     "to put a directory in its place")
        if base.mode(path) == TREE and not base.files_below(path) <= deleted:
            raise _invalid(path, "is a directory of the base; delete every file in it in the same change "
                                 "to put a file in its place")
    if not case_twins:
        _check_twins(base, written, deleted)


def _check_twins(base: _Base, written: set[str], deleted: set[str]) -> None:
    new_names: dict[str, dict[str, set[str]]] = {}   # directory -> fold -> names this change writes there
    for path in written:
        parts = path.split("/")
        for i, name in enumerate(parts):
            new_names.setdefault("/".join(parts[:i]), {}).setdefault(fold(name), set()).add(name)

    def stays(path: str) -> bool:
        """A base entry that is still there after the change (a directory: some file of it)."""
        mode = base.mode(path)
        if mode is None or path in written or any(w.startswith(path + "/") for w in written):
            return True
        return path not in deleted if mode != TREE else not base.files_below(path) <= deleted

    for path in sorted(written):
        parts = path.split("/")
        for i, name in enumerate(parts):
            here = "/".join(parts[:i + 1])
            if base.mode(here) is not None:
                continue  # the name exists: nothing new at this level
            directory, key = "/".join(parts[:i]), fold(name)
            twins = sorted({n for n in new_names[directory][key] if n != name} |
                           {n for n in base.folded_names(directory).get(key, ()) if n != name
                            and stays(f"{directory}/{n}" if directory else n)})
            if twins:
                other = f"{directory}/{twins[0]}" if directory else twins[0]
                raise _invalid(path, f"differs from {other!r} only in case or Unicode form, which macOS and "
                                     "Windows take for one file; use the existing name or another one")
