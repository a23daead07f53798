"""What a method may use of the worker: its state, its log, its clock and its stores, and no more.
Methods get `call.ctx`, never the Daemon, so a method cannot reach the worker's start, stop,
replay or background tasks (docs/decisions.md, "Methods see a Context, not the Daemon")."""
import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import pygit2
from sqlalchemy.engine import Engine

from lonca.symbols import SymbolCache

from .auth import Tokens
from .change_build import TreeMaps
from .config import Config
from .daemonkey import DaemonKeys
from .log import LogWriter
from .ratelimit import RateLimiter
from .running_checks import RunningChecks
from .state import State
from .status_parts import StatusParts
from .symbol_warmer import SymbolWarmer
from .tree_manifest import Manifests

if TYPE_CHECKING:
    from .event_methods import Told
    from .hook_methods import HookSeen


@dataclass(frozen=True)
class Context:
    config: Config                                  # settings and limits, read only
    state: State
    log: LogWriter
    now_ms: Callable[[], int]
    store: Callable[[str], pygit2.Repository]       # the calling thread's handle on a repository's store
    policy_text: Callable[..., str | None]          # lonca.toml of a commit (repo, commit[, "policy.cedar"])
    tree_maps: TreeMaps
    manifests: Manifests                            # `tree`'s whole answers, rendered once a commit
    symbols: SymbolCache
    warmer: SymbolWarmer
    tokens: Tokens                                  # the live tokens (replaced in place by a replay)
    rate: RateLimiter
    refused: dict[str, int]                         # the socket's refusals, for ping.refused
    told: "dict[tuple[str, str], Told]"             # inbox: what each live session was told
    verifying: set[str]                             # changes whose checks are running
    queue_wake: Callable[[], None]
    engine: Engine                                  # read by threads off the loop (log.read)
    db_write: Callable[[list], Awaitable[None]]     # rows outside the log, on the database thread
    db_get: Callable[[type, Any], Awaitable[Any]]
    keys: DaemonKeys                                # the daemon key, and the next one during a rotation
    hooks: "dict[tuple[str, str], HookSeen]"        # what each live session's hooks did (memory only)
    started_ms: int                                 # when this worker started (hook events before it are unknown)
    agent_uids: dict[str, set[int]]                 # repo -> the users agents' requests came from (memory only)
    status_parts: StatusParts                       # status's lists of history, encoded once an entry
    running: RunningChecks                          # what the merge queue verifies now (queue.running)
    builds: asyncio.Semaphore                       # proposal builds at once (daemon.BUILDS_AT_ONCE)
