"""The credentials table of docs/decisions.md ("Daemon authentication") equals the code's."""
import inspect
import re

from conftest import ROOT
from lonca.service.method_table import METHODS


def documented() -> dict[str, str]:
    text = (ROOT / "docs" / "decisions.md").read_text()
    section = text.split("## Daemon authentication", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z_.]+) \| ([a-z ]+) \|$", section, re.M)
    return {m: c for m, c in rows if m != "method"}


def test_table_equals_code():
    assert documented() == {name: m.credential for name, m in METHODS.items()}


def test_writers_are_the_methods_that_append():
    """A method that appends to the log is marked `writes`, and only those: a writer left
    unmarked would wait for durable state behind its own entry."""
    appends = {name for name, m in METHODS.items() if "log.append" in inspect.getsource(m.fn)}
    assert appends == {name for name, m in METHODS.items() if m.writes} and len(appends) >= 12
