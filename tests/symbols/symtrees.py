"""Trees for facts tests: {path: bytes} -> {path: TreeEntry} with git-like blob ids."""
from __future__ import annotations

import dataclasses
import hashlib

from lonca.symbols import FileSymbols, SymbolCache, TreeEntry, compute_facts


def same_table(got: FileSymbols, whole: FileSymbols) -> bool:
    """`got` is `whole`, but for `names`, which may keep identifiers an edit removed (a table
    spliced from an older one, symbols/splice.py) and never lose one."""
    return got.names >= whole.names and dataclasses.replace(got, names=whole.names) == whole


class Blobs:
    def __init__(self) -> None:
        self.store: dict[str, bytes] = {}
        self.loads = 0

    def tree(self, files: dict[str, bytes], modes: dict[str, str] | None = None
             ) -> dict[str, TreeEntry]:
        out = {}
        for path, data in files.items():
            oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            self.store[oid] = data
            out[path] = TreeEntry(oid, (modes or {}).get(path, "100644"))
        return out

    def load(self, oid: str) -> bytes:
        self.loads += 1
        return self.store[oid]


def facts(base: dict[str, bytes], new: dict[str, bytes], cache: SymbolCache | None = None,
          base_modes: dict[str, str] | None = None, new_modes: dict[str, str] | None = None
          ) -> dict:
    blobs = Blobs()
    return compute_facts(blobs.tree(base, base_modes), blobs.tree(new, new_modes), blobs.load,
                         cache).to_json()
