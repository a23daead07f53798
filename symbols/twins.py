"""Names one scope defines more than once: where that is a mistake, and where the language means it.

The symbol engine numbers what nothing tells apart in file order (`f`, `f~2`): two `def f` in one
Python module, two `func F` in one Go file. Most such pairs are a merge or a proposal gone wrong
(the later definition silently wins, or the file no longer compiles), and the queue refuses them.
Some are the language's own way of writing: Markdown headings, TOML `[[bin]]` tables and YAML keys
repeat by design, Go files may have several `func init()`, Ruby reopens classes and Swift extends
types in pieces, and Python's `@overload` stubs precede their implementation."""
import re

from .languages import SECTION_LANGUAGES, language_of

NUMBERED = re.compile(r"~[0-9]+$")
_REOPENING = frozenset({"ruby", "swift"})
_OVERLOAD = re.compile(rb"^\s*@(typing\.)?overload\b")


def first_id(qualified: str) -> str:
    """The id a numbered twin shares with the first definition: `C.f~2` -> `C.f`."""
    return NUMBERED.sub("", qualified)


def is_twin(qualified: str) -> bool:
    """Whether this id is a second (third, ...) definition of its name in its scope."""
    return NUMBERED.search(qualified) is not None


def one_definition(path: str, name: str) -> bool:
    """Whether a second definition of `name` in one scope of `path` is a mistake rather than the
    language's way of writing."""
    lang = language_of(path)
    if lang is None or lang in SECTION_LANGUAGES or lang in _REOPENING:
        return False
    return not (lang == "go" and name == "init")


def is_overload_stub(path: str, text: bytes) -> bool:
    """A Python definition decorated `@overload`: one of several that stand by design."""
    return language_of(path) == "python" and _OVERLOAD.match(text) is not None
