"""The rooms of DESIGN.md: who may import whom, and the `queue` folder not shadowing the stdlib."""
import ast
import subprocess
import sys

from conftest import ROOT

# folder -> Lonca packages its modules may import at module level
RULES = {
    "lonca": set(),
    "service": {"lonca", "lonca.symbols", "lonca.queue"},
    "symbols": set(),
    "queue": {"lonca.symbols"},
    "console": {"lonca"},
}
PACKAGES = {"lonca.service": "service", "lonca.symbols": "symbols", "lonca.queue": "queue", "lonca.console": "console"}
# The only places the client side may reach the worker or the console: inside the commands that start them.
STARTERS = {("lonca/admin_commands.py", "cmd_daemon"), ("lonca/console_commands.py", "cmd_console"),
            ("lonca/console_commands.py", "cmd_up"), ("lonca/admin_commands.py", "cmd_runner")}


def _room(module: str) -> str:
    for pkg in PACKAGES:
        if module == pkg or module.startswith(pkg + "."):
            return pkg
    return "lonca" if module == "lonca" or module.startswith("lonca.") else ""


def _imports(tree: ast.AST, folder: str, path):
    """(module imported, enclosing function or None) for every import in the file."""
    out = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and func is None else func
            if isinstance(child, ast.Import):
                out.extend((a.name, func) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = ("lonca" if folder == "lonca" else f"lonca.{folder}")
                    parts = base.split(".")
                    mod = ".".join(parts[: len(parts) - child.level + 1] + ([child.module] if child.module else []))
                else:
                    mod = child.module
                out.append((mod, func))
            visit(child, f)
    visit(tree, None)
    return out


def test_import_rules():
    broken = []
    for folder, allowed in RULES.items():
        own = "lonca" if folder == "lonca" else f"lonca.{folder}"
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for mod, func in _imports(ast.parse(path.read_text()), folder, path):
                room = _room(mod or "")
                if not room or room == own:
                    continue
                if folder == "lonca" and (rel, func) in STARTERS:
                    continue
                if room not in allowed:
                    broken.append(f"{rel}: imports {mod}" + (f" in {func}()" if func else ""))
    assert not broken, "import rules of DESIGN.md broken:\n" + "\n".join(broken)


def test_symbols_pure():
    """symbols/ holds pure functions: no sockets, no database, no git, no processes."""
    banned = {"socket", "sqlite3", "sqlalchemy", "sqlmodel", "pygit2", "subprocess", "asyncio"}
    found = []
    for path in (ROOT / "symbols").rglob("*.py"):
        for mod, _ in _imports(ast.parse(path.read_text()), "symbols", path):
            if mod and mod.split(".")[0] in banned:
                found.append(f"{path.relative_to(ROOT)}: {mod}")
    assert not found, found


def test_stdlib_queue_not_shadowed_from_the_root():
    res = subprocess.run([sys.executable, "-c", "import queue; queue.SimpleQueue(); import lonca.queue; "
                          "import asyncio; asyncio.run(asyncio.to_thread(print, 'ok'))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_one_command():
    for argv in (["--version"], ["--help"]):
        res = subprocess.run([sys.executable, "-m", "lonca", *argv], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
    assert "lonca 0.1.0" in subprocess.run([sys.executable, "-m", "lonca", "--version"], capture_output=True, text=True).stdout
