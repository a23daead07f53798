"""docs/decisions.md: a pygit2 handle is never shared between threads. The readers take their
store on the worker thread that uses it (read_methods.on_store), never on the event loop."""
import re
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
FOLLOWING = ("read_methods.py", "review_methods.py", "symbol_methods.py", "event_methods.py")


def test_the_readers_take_no_store_on_the_loop():
    for name in FOLLOWING:
        text = (SERVICE / name).read_text()
        calls = re.findall(r"^.*\.store\(.*$", text, re.M)
        allowed = ["    return await asyncio.to_thread(lambda: fn(d.store(repo), *args))"] if name == "read_methods.py" else []
        assert calls == allowed, (name, calls)
