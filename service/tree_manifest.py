"""`tree`'s answer for a whole commit without contents, rendered as JSON once per commit.

At 100 000 files the answer is 10 MB of JSON: building its 100 000 dicts on a thread and
encoding them on the event loop took 0.5-0.7 s a call, and the encoding held the loop (56 % of
its samples while `tree` was asked). A commit's tree never changes, so its answer is rendered
once and kept as bytes, which the server writes as they are (`wire_json.Raw`). Each file's piece
of JSON is kept too: a commit whose recent ancestor was rendered (a trunk move's parent) is
rendered from that one and the paths that differ (`tree_changes`), at the cost of the change and
of a join, not of 100 000 encodings.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from json.encoder import encode_basestring  # type: ignore[attr-defined]  # the C encoder json.dumps uses

import pygit2

from .change_build import TreeMaps, held_ancestor, tree_changes
from .wire_json import Raw, utf8

_KEPT = 2           # commits whose pieces (about 25 MB at 100 000 files) and answer are kept


class _Rendered:
    __slots__ = ("pieces", "answer")

    def __init__(self, pieces: dict[str, str], answer: Raw) -> None:
        self.pieces = pieces    # path -> the file's JSON object, in the order of the answer's paths
        self.answer = answer


class Manifests:
    def __init__(self, maps: TreeMaps) -> None:
        self.maps = maps
        self._held: OrderedDict[str, _Rendered] = OrderedDict()
        self._lock = threading.Lock()   # shared by the worker's threads

    def _get(self, commit_id: str) -> _Rendered | None:
        with self._lock:
            found = self._held.get(commit_id)
            if found is not None:
                self._held.move_to_end(commit_id)
            return found

    def whole(self, repo: pygit2.Repository, commit_id: str) -> Raw:
        """The answer listing every file of `commit_id` (sorted by path, content_b64 null)."""
        found = self._get(commit_id)
        if found is not None:
            return found.answer
        commit = repo.get(commit_id)
        ancestor, before = held_ancestor(commit, self._get)
        files = self.maps.get(repo, commit_id)
        if before is not None:
            pieces = dict(before.pieces)
            moved = False   # a path came or went: the order is made again
            for path, entry in tree_changes(repo, ancestor.tree, commit.tree).items():
                if entry is None:
                    gone = pieces.pop(path, None)
                    moved = moved or gone is not None
                else:
                    moved = moved or path not in pieces
                    pieces[path] = self._piece(repo, path, files[path])
            if moved:
                pieces = {p: pieces[p] for p in sorted(pieces)}
        else:
            pieces = {p: self._piece(repo, p, files[p]) for p in sorted(files)}
        rendered = _Rendered(pieces, Raw(utf8("[" + ",".join(pieces.values()) + "]")))
        with self._lock:
            self._held[commit_id] = rendered
            while len(self._held) > _KEPT:
                self._held.popitem(last=False)
        return rendered.answer

    def _piece(self, repo: pygit2.Repository, path: str, entry) -> str:
        e = self.maps.entry(repo, path, entry)
        return (f'{{"path":{encode_basestring(path)},"mode":"{e["mode"]}","blob":"{e["blob"]}",'
                f'"size":{e["size"]},"content_b64":null}}')
