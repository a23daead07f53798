"""What the engine sees of a git tree: path -> (blob id, mode)."""
from __future__ import annotations

from typing import NamedTuple

_MODE_WORDS = {"100644": "regular", "100664": "regular", "100755": "executable",
               "120000": "symlink", "160000": "submodule"}
_TEXT_MODES = frozenset({"100644", "100664", "100755", "regular", "executable"})


class TreeEntry(NamedTuple):
    oid: str
    mode: str


def mode_word(mode: str) -> str:
    """Git's octal modes and the seed's words alike: "100755" -> "executable"."""
    word = _MODE_WORDS.get(mode)    # the common case, first: facts ask once a path
    return word if word is not None else _MODE_WORDS.get(mode.lstrip("0"), mode)


def has_text(mode: str) -> bool:
    """A blob with content of its own: not a symlink (its content is a path) or a submodule."""
    return mode in _TEXT_MODES or mode_word(mode) in _TEXT_MODES
