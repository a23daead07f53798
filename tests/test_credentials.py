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


def appends(fn) -> bool:
    """Whether the function's source appends to the log, or that of a function its module holds
    (its own or imported) that it calls: hook.event and hook.input share one `judge`."""
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        src = inspect.getsource(f)
        if "log.append" in src:
            return True
        todo += [g for name, g in vars(inspect.getmodule(f)).items()
                 if inspect.isfunction(g) and re.search(rf"\b{re.escape(name)}\(", src)]
    return False


def test_writers_are_the_methods_that_append():
    """A method that appends to the log is marked `writes`, and only those: a writer left
    unmarked would wait for durable state behind its own entry."""
    appends_ = {name for name, m in METHODS.items() if appends(m.fn)}
    assert appends_ == {name for name, m in METHODS.items() if m.writes} and len(appends_) >= 12
