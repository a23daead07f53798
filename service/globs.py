"""Path globs, one meaning for scopes, `critical_paths` and `checks_by_path` (docs/policy.md,
"Globs"): git pathspec style, anchored at the repository root. `*`, `?` and `[...]` match within
one path segment, never across `/`; a segment `**` matches any number of segments (`src/**`
everything below `src`, `**/test_*.py` at any depth); a trailing `/` or a pattern without any
wildcard also covers what is below it (`docs/`, `docs`)."""
import fnmatch
from functools import lru_cache

_WILD = frozenset("*?[")
_SELF_AND_BELOW = "/"   # a last part no segment can equal: the path so far, or anything below


@lru_cache(maxsize=4096)
def _parts(glob: str) -> tuple[str, ...]:
    """The glob as segments: `dir/` ends in `**` (what is below), a name without wildcards in
    `_SELF_AND_BELOW`."""
    parts = [p for p in glob.strip("/").split("/") if p]
    if not parts or parts[-1] == "**":
        return tuple(parts)
    if glob.endswith("/"):
        return (*parts, "**")
    return tuple(parts) if _WILD & set(glob) else (*parts, _SELF_AND_BELOW)


def glob_match(glob: str, path: str) -> bool:
    """Whether `path` (a repository path, `/`-separated) is matched by `glob`."""
    parts = _parts(glob)
    if not parts:
        return False
    return _match(parts, 0, tuple(path.split("/")), 0)


def _match(parts: tuple[str, ...], i: int, segs: tuple[str, ...], j: int) -> bool:
    while i < len(parts):
        p = parts[i]
        if p == _SELF_AND_BELOW:
            return True
        if p == "**":
            if i == len(parts) - 1:     # a trailing `**` is something below, not the directory itself
                return j < len(segs)
            return any(_match(parts, i + 1, segs, k) for k in range(j, len(segs) + 1))
        if j == len(segs) or not fnmatch.fnmatchcase(segs[j], p):
            return False
        i, j = i + 1, j + 1
    return j == len(segs)


def glob_within(child: str, parent: str) -> bool:
    """Whether everything `child` matches, `parent` matches too, tried on the child's pattern
    with each wildcard as a character no path holds (`*` three of them, `**` two levels, one
    more below a pattern that covers what is below). Conservative for the patterns people write:
    a child that test can not show inside, or one with `[...]`, is outside."""
    if child == parent:
        return True
    if "[" in child:
        return False
    parts = _parts(child)
    if not parts:
        return False
    below = parts[-1] in ("**", _SELF_AND_BELOW)
    sample = "/".join("\0/\0" if p == "**" else p.replace("*", "\0\1\0").replace("?", "\0")
                      for p in parts if p != _SELF_AND_BELOW)
    return glob_match(parent, sample) and (not below or glob_match(parent, sample + "/\0"))
