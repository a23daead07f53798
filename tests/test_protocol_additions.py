"""docs/protocol-additions.md keeps up with the worker: every method it registers and every
operation kind it replays is in seed 001 or on that page, and the page names no method or kind
the worker lacks or the seed already has. The seed lives beside the repository
(../shared/seeds, as the README says)."""
import re

import pytest

from conftest import ROOT
from lonca.service.auth import CREDENTIALS
from lonca.service.method_table import METHODS
from lonca.service.reducers import REDUCERS

DOC = ROOT / "docs" / "protocol-additions.md"


def seed_text() -> str:
    found = sorted((ROOT.parent / "shared" / "seeds").glob("001_*.txt"))
    if not found:
        pytest.skip("seed 001 is not beside the repository (../shared/seeds)")
    return found[0].read_text()


def section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def seed_methods(seed: str) -> set[str]:
    """The seed's method headings: a name alone on its line whose next line of text begins with
    the credential (seed 001, "Methods")."""
    lines = [line.strip() for line in section(seed, "\nMethods\n", "\nError codes\n").splitlines() if line.strip()]
    credential = re.compile("|".join(sorted(map(re.escape, CREDENTIALS), key=len, reverse=True)) + r"\b")
    return {name for name, after in zip(lines, lines[1:])
            if re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", name) and credential.match(after)}


def seed_has_kind(seed: str, kind: str) -> bool:
    """The seed's table of operation kinds has no separator between a row's kinds and its fields
    ("repo.initrepo, daemon_key, …"; "freeze / unfreezereason"): a kind begins a row or follows " / "."""
    rows = section(seed, "Operation kinds (op.op) and their fields:", "approve.checks names").splitlines()
    return any(row.startswith(kind) or f" / {kind}" in row for row in rows)


def doc_methods() -> set[str]:
    return set(re.findall(r"^### `([a-z_.]+)`$", section(DOC.read_text(), "\n## Methods\n", "\n## "), re.M))


def doc_kinds() -> set[str]:
    return set(re.findall(r"^\| `([a-z_.]+)` \|", section(DOC.read_text(), "\n## Operation kinds", "\n## "), re.M))


def test_the_seed_is_read_as_it_is_written():
    """The parsing above finds what the seed has (so a change of its layout fails here, not
    silently in the test below)."""
    seed = seed_text()
    methods = seed_methods(seed)
    assert {"ping", "status", "human.submit", "queue.run", "harness.setup", "trunk.distance"} <= methods
    assert not {"kindfields", "change.withdrawchange"} & methods
    assert all(seed_has_kind(seed, k) for k in ("repo.init", "observe", "unfreeze", "taint", "change.integrate_batch"))
    assert not seed_has_kind(seed, "comment")


def test_every_method_is_in_the_seed_or_documented():
    seed = seed_methods(seed_text())
    documented = doc_methods()
    assert set(METHODS) - seed - documented == set(), "add these to docs/protocol-additions.md, Methods"
    assert documented & seed == set(), "the seed has these already"
    assert documented - set(METHODS) == set(), "the worker has no such method"


def test_every_operation_kind_is_in_the_seed_or_documented():
    seed = seed_text()
    added = {k for k in REDUCERS if not seed_has_kind(seed, k)}
    documented = {k for k in doc_kinds() if k in REDUCERS and not seed_has_kind(seed, k)}
    assert added == documented, "docs/protocol-additions.md, Operation kinds, lists the kinds the seed does not have"
