"""Methods see a Context, never the Daemon (docs/decisions.md, "Methods see a Context, not the
Daemon"): no method module names a `daemon` attribute or imports the daemon module, and `Call`
carries `ctx`, whose fields are the whole of what a method may use."""
import ast
import dataclasses
from pathlib import Path

from lonca.service.context import Context
from lonca.service.methods import Call

SERVICE = Path(__file__).resolve().parents[2] / "service"
METHOD_MODULES = sorted(SERVICE.glob("*_methods.py"))


def test_no_method_module_reaches_the_daemon():
    assert len(METHOD_MODULES) >= 10
    for path in METHOD_MODULES:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr != "daemon", f"{path.name}:{node.lineno} reads .daemon; use call.ctx"
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("daemon", "lonca.service.daemon"), f"{path.name}:{node.lineno} imports the daemon"
                assert "Daemon" not in [a.name for a in node.names], f"{path.name}:{node.lineno} imports Daemon"


def test_a_call_carries_the_context_and_not_the_daemon():
    fields = {f.name for f in dataclasses.fields(Call)}
    assert "ctx" in fields and "daemon" not in fields
    assert "daemon" not in {f.name for f in dataclasses.fields(Context)}
