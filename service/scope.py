"""A session's scope: which paths, symbols and kinds of operation it may touch."""
from lonca.symbols.languages import SECTION_LANGUAGES, language_of

from .globs import glob_match, glob_within
from .lease_model import FILE, covers, split

SCOPE_FIELDS = ("paths", "symbols", "ops", "max_files", "max_lines")  # scratch is optional (seed 001, scope)


def full_scope(scope: dict) -> dict:
    """A scope with every field, defaults filled (its types are the schema's, service/schemas.py):
    what a session's record holds, whatever the request or the signed op left out."""
    return {"paths": scope.get("paths", ["**"]), "symbols": scope.get("symbols"), "ops": scope.get("ops", []),
            "max_files": scope.get("max_files"), "max_lines": scope.get("max_lines"), "scratch": scope.get("scratch", [])}


def path_in(scope: dict, path: str) -> bool:
    return any(glob_match(g, path) for g in scope.get("paths") or ["**"])


def symbol_in(scope: dict, symbol: str, nesting: dict[str, str] | None = None) -> bool:
    """Whether the scope's symbols cover `symbol`, as the tables nest (lease_model.covers)."""
    syms = scope.get("symbols")
    return syms is None or any(covers(s, symbol, nesting) for s in syms)


def op_in(scope: dict, op: str) -> bool:
    ops = scope.get("ops") or []
    return not ops or op in ops


def item_reasons(scope: dict, items: list[dict], nesting: dict[str, str] | None = None) -> list[str]:
    out = []
    for it in items:
        path = split(it["symbol"])[0]
        if not path_in(scope, path):
            out.append(f"scope_path:{path}")
        elif not symbol_in(scope, it["symbol"], nesting):
            out.append(f"scope_symbol:{it['symbol']}")
        if not op_in(scope, it["kind"]):
            out.append(f"scope_op:{it['kind']}")
    return sorted(set(out))


def _surely_in(symbols: list[str], symbol: str) -> bool:
    """Whether `symbol` is within one of `symbols` without a table to ask: in a file of a section
    language a name may hold dots, so there only the symbol itself or a non-dot suffix
    (`~2`) counts (conservative: a real subsection is reported as a widening)."""
    if language_of(split(symbol)[0]) not in SECTION_LANGUAGES:
        return any(covers(s, symbol) for s in symbols)
    return any(covers(s, symbol) and (s == symbol or split(s)[1] == FILE or symbol[len(s)] != ".") for s in symbols)


def narrower(child: dict, parent: dict) -> list[str]:
    """What a child scope would widen (scope_widening:<what>), empty when it is within the parent."""
    out = []
    if not all(any(glob_within(c, p) for p in parent.get("paths") or ["**"])
               for c in child.get("paths") or ["**"]):
        out.append("paths")
    if parent.get("symbols") is not None and (child.get("symbols") is None or
                                              not all(_surely_in(parent["symbols"], s) for s in child["symbols"])):
        out.append("symbols")
    if parent.get("ops") and (not child.get("ops") or set(child["ops"]) - set(parent["ops"])):
        out.append("ops")
    for n in ("max_files", "max_lines"):
        if parent.get(n) is not None and (child.get(n) is None or child[n] > parent[n]):
            out.append(n)
    if set(child.get("scratch") or []) - set(parent.get("scratch") or []):
        out.append("scratch")
    return out
