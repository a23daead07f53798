"""A mapping copied whole and changed a little at a time, where each copy costs what changes.

A base's name index (mentions.NameIndex: 100 000 files, 300 000 names at 100 000 files) is
made at every trunk move from the last one's, changing a few entries. Copied as one dict, the
copy (and later the old one's release) was a single call in C holding the GIL for 5-9 ms of
CPU, 30-90 ms on a loaded machine, while the event loop waited for it (docs/decisions.md,
"Nothing holds the GIL for long at 100 000 files"). Here the entries are spread over SHARDS
dicts by the key's hash; `copy()` shares every shard, and a shard is copied (a few hundred
entries) the first time one of the two maps writes to it. A shard is never written once it is
shared, so threads may read a map while another copies it."""
from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, MutableMapping, ValuesView
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
SHARDS = 256
_MASK = SHARDS - 1
_MISSING = object()


class SharedMap(MutableMapping[K, V], Generic[K, V]):
    __slots__ = ("_shards", "_own")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._shards: list[dict[K, V]] = [{} for _ in range(SHARDS)]
        self._own = bytearray(b"\x01" * SHARDS)    # 1: this map's alone, written in place
        shards = self._shards
        for k, v in (items.items() if isinstance(items, Mapping) else items):
            shards[hash(k) & _MASK][k] = v

    def copy(self) -> SharedMap[K, V]:
        """A map equal to this one sharing every shard: neither writes to them from now on."""
        other: SharedMap[K, V] = SharedMap.__new__(SharedMap)
        other._shards = list(self._shards)
        other._own = bytearray(SHARDS)
        self._own = bytearray(SHARDS)
        return other

    def shared_with(self, other: SharedMap) -> int:
        """How many shards the two maps hold in common (the same dict)."""
        return sum(a is b for a, b in zip(self._shards, other._shards))

    def _writable(self, key: K) -> dict[K, V]:
        i = hash(key) & _MASK
        if not self._own[i]:
            self._shards[i] = dict(self._shards[i])
            self._own[i] = 1
        return self._shards[i]

    def __getitem__(self, key: K) -> V:
        return self._shards[hash(key) & _MASK][key]

    def get(self, key: K, default=None):  # type: ignore[override]
        return self._shards[hash(key) & _MASK].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._shards[hash(key) & _MASK]

    def __setitem__(self, key: K, value: V) -> None:
        self._writable(key)[key] = value

    def __delitem__(self, key: K) -> None:
        shard = self._shards[hash(key) & _MASK]
        if key not in shard:
            raise KeyError(key)
        del self._writable(key)[key]

    def pop(self, key: K, default=_MISSING):  # type: ignore[override]
        if key not in self._shards[hash(key) & _MASK]:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return self._writable(key).pop(key)

    def __iter__(self) -> Iterator[K]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return sum(map(len, self._shards))

    def items(self) -> ItemsView[K, V]:
        return _Items(self)

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def __repr__(self) -> str:
        return f"SharedMap({len(self)} entries)"


class _Items(ItemsView):
    def __iter__(self):
        for shard in self._mapping._shards:
            yield from shard.items()


class _Values(ValuesView):
    def __iter__(self):
        for shard in self._mapping._shards:
            yield from shard.values()
