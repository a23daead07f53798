"""docs/decisions.md: a pygit2 handle is never shared between threads. The readers take their
store on the thread that uses it (read_methods.on_store, on_loop_store for the loop's own), never
one on the event loop for a thread; and what
runs on a worker thread reads no live state (a RepoState the loop goes on changing): the loop
reads what the thread needs before handing it over."""
import ast
import re
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
FOLLOWING = ("read_methods.py", "review_methods.py", "symbol_methods.py", "trunk_tables.py", "event_methods.py",
             "change_methods.py", "trunk_methods.py")


def test_the_readers_take_no_store_on_the_loop():
    for name in FOLLOWING:
        text = (SERVICE / name).read_text()
        calls = re.findall(r"^.*\.store\(.*$", text, re.M)
        allowed = ["    return await asyncio.to_thread(lambda: fn(d.store(repo), *args))",
                   "    return fn(call.ctx.store(call.repo_state().name), *args)"] if name == "read_methods.py" else []
        assert calls == allowed, (name, calls)


def _handed_to_threads(tree: ast.Module):
    """(what runs on a thread, the arguments handed with it) for each asyncio.to_thread(fn, ...)
    and on_store(call, fn, ...); fn resolved to its nested def when it is one."""
    for outer in ast.walk(tree):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nested = {n.name: n for n in ast.walk(outer) if isinstance(n, ast.FunctionDef) and n is not outer}
        for call in ast.walk(outer):
            if not isinstance(call, ast.Call):
                continue
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "to_thread" and call.args:
                fn, rest = call.args[0], call.args[1:]
            elif isinstance(f, ast.Name) and f.id == "on_store" and len(call.args) > 1:
                fn, rest = call.args[1], call.args[2:]
            else:
                continue
            if isinstance(fn, ast.Name):
                fn = nested.get(fn.id, fn)
            yield outer.name, fn, rest


def _own_names(fn) -> set[str]:
    args = {a.arg for a in fn.args.args}
    return args | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def test_what_runs_on_a_thread_reads_no_live_state_and_no_loop_handle():
    seen = 0
    for path in sorted(SERVICE.glob("*.py")):
        for outer, fn, rest in _handed_to_threads(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{outer}"
            assert not any(isinstance(a, ast.Name) and a.id == "store" for a in rest), f"{where} hands a loop's handle to a thread"
            if not isinstance(fn, (ast.Lambda, ast.FunctionDef)):
                continue
            seen += 1
            own = _own_names(fn)
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id == "store" and "store" not in own:
                    raise AssertionError(f"{where}:{n.lineno} uses the loop's handle on a thread")
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "rs":
                    assert n.attr == "name", f"{where}:{n.lineno} reads rs.{n.attr} on a thread; read it on the loop first"
    assert seen >= 8  # the prepare, diff, merge, queue batch, tree, blobs, symbols and policy readers


def test_the_queue_verifies_from_a_snapshot():
    tree = ast.parse((SERVICE / "queue_runner.py").read_text())
    verify = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_verify")
    names = {n.id for n in ast.walk(verify) if isinstance(n, ast.Name)}
    assert "rs" not in names and "self" not in names, "the checks' thread reads the live state"
