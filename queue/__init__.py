"""The merge queue (`lonca.queue`): pygit2 integration, symbol merges, bounded checks."""
# This folder is named `queue` and sits at the repository root: when the root is on sys.path
# (`python -c`, `python -m` from the root) it would shadow the standard library's `queue`, which
# asyncio's thread pool imports. Imported under that top-level name, load the real stdlib module
# in our place and hand the name back.
if __name__ == "queue":
    import importlib.util as _ilu, os as _os, sys as _sys, sysconfig as _sc

    _spec = _ilu.spec_from_file_location("queue", _os.path.join(_sc.get_paths()["stdlib"], "queue.py"))
    _std = _ilu.module_from_spec(_spec)
    _sys.modules["queue"] = _std
    _spec.loader.exec_module(_std)
    globals().update({k: v for k, v in vars(_std).items() if not k.startswith("__")})

# Below, the library itself, only under its own name.
if __name__ != "queue":
    from .merge import Integration, MergeResult, integrate, merge_trees

    __all__ = ["Integration", "MergeResult", "integrate", "merge_trees"]
