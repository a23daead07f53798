"""1,000 agents at the default caps (`python -m bench fleet`, issue 18).

A generated repository (bench/scale_repo.py) is imported into a real worker with its default
connection caps (1 024 connections, 512 of one uid). A fleet of agents (bench/fleet_agents.py, a
process of its own) heartbeats, each with its own session token, first alone for BASELINE_S (the
baseline), then while 50 more agents integrate one-function changes through preview, lease,
proposal and integration (bench_scale.integrations). Twice, on the same worker:
- own: one connection an agent, as many separate clients would hold: past 512 the daemon evicts
  the quietest connection (`closed`), and the agent whose connection it was opens a new one and
  sends its beat again;
- shared: the agents of the one process share a `ClientPool` of POOL connections.
Printed: heartbeat p50/p99/max and failed calls, baseline beside integrating, and the evictions;
beside them the fleet process's own loop lag and CPU, the part of a beat's time that is the
client's (docs/decisions.md, "Where a heartbeat's time goes").

BENCH_FLEET_FILES (20000), BENCH_FLEET_AGENTS (1000), BENCH_FLEET_INTEGRATORS (50),
BENCH_FLEET_CHANGES (500), BENCH_FLEET_BEAT_S (10: three times the seed's rate of timeout_ms / 3 at
the default 90 s, for more samples), BENCH_FLEET_BASELINE_S (20), BENCH_FLEET_POOL (64),
BENCH_FLEET_MODES ("own,shared"), BENCH_REPEAT (1): N runs, each on a fresh worker and repository,
each printed, then every figure's median over them (a single run's p99 swings several times with
the machine's load: docs/decisions.md, "A Protocol server", the accepts tried after the merge).
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_scale import change_files, integrations, wait_for_warm
from bench.procstat import cpu_s
from bench.scale_repo import build
from bench.worker import BenchWorker, median, median_known, pct, python_speed_s


def env(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_FLEET_{name}", default)


class Fleet:
    """The heartbeating agents' process."""

    def __init__(self, w: BenchWorker, tokens_file: Path, mode: str, pool: int, beat_s: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.fleet_agents", str(w.socket), str(tokens_file),
                                      mode, str(pool), str(beat_s)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the fleet did not start: {line!r}")

    def stop(self) -> dict:
        return json.loads(self.proc.communicate("stop\n", timeout=300)[0])


def window(samples: list[list], start: float, end: float) -> list:
    return [s[1] for s in samples if start <= s[0] <= end]


def refused(w: BenchWorker) -> dict:
    with w.client() as c:
        return c.call("ping")["refused"]


def one_mode(w: BenchWorker, tokens_file: Path, mode: str, integrators: list[str], n_files: int,
             n_changes: int, first_file: int) -> dict:
    pool, beat_s, baseline_s = int(env("POOL", "64")), float(env("BEAT_S", "10")), float(env("BASELINE_S", "20"))
    before = refused(w)
    t = time.perf_counter()
    fleet = Fleet(w, tokens_file, mode, pool, beat_s)
    ready_s = time.perf_counter() - t
    b0, cpu0 = time.monotonic(), cpu_s(w.proc.pid)
    time.sleep(baseline_s)
    b1 = i0 = time.monotonic()
    cpu1 = cpu_s(w.proc.pid)
    out = asyncio.run(integrations(w, integrators, n_files, n_changes, first_file))
    i1 = time.monotonic()
    got = fleet.stop()
    after = refused(w)
    fig = {}
    for phase, (start, end) in (("baseline", (b0, b1)), ("integrating", (i0, i1))):
        beats, failed = window(got["beats"], start, end), window(got["failures"], start, end)
        fig[phase] = {"heartbeats": len(beats), "heartbeat p50 (ms)": median(beats) if beats else float("nan"),
                      "heartbeat p99 (ms)": pct(beats, 99), "heartbeat max (ms)": max(beats, default=float("nan")),
                      "failed calls": len(failed), "the fleet's own loop lag p99 (ms)": pct(window(got["lag"], start, end), 99)}
    fig["all"] = {"failed calls, the whole run": len(got["failures"]), "failures": sorted({f[1] for f in got["failures"]}),
                  "worker CPU in the baseline a heartbeat (ms)": (cpu1 - cpu0) * 1000 / max(1, fig["baseline"]["heartbeats"]),
                  "every agent's first beat (s)": ready_s, "the fleet's CPU (% of a core)": got["cpu_share"] * 100, "evicted": after["evicted"] - before["evicted"],
                  "busy": after["busy"] - before["busy"], "integrations/s": out["integrations/s"],
                  "ping p99 during integrations (ms)": out["ping p99 during integrations (ms)"]}
    return fig


def run(n_files: int, n_agents: int, n_integrators: int, n_changes: int, modes: list[str]) -> dict:
    """One run on a fresh worker: each mode's figures."""
    tmp = Path(tempfile.mkdtemp(prefix="lonca-bench-fleet-"))
    try:
        build(tmp / "src.git", n_files)
        w = BenchWorker(output=tmp / "worker.out")
        try:
            w.init_repo("bench", import_from=str(tmp / "src.git"))
            integrators = w.start_sessions(n_integrators)
            tokens_file = tmp / "fleet.tokens"
            tokens_file.write_text("\n".join(w.start_sessions(n_agents)) + "\n")
            tokens_file.chmod(0o600)
            with w.client() as c:   # the first warm, before anything is measured
                trunk = c.call("status", repo="bench", token=w.htoken)["trunk"]
                c.call("facts.preview", {"base": trunk, "files": change_files(1, 99)}, repo="bench", token=integrators[0])
            if not wait_for_warm(w.output, 1, 1800):    # the preview only asks for it
                raise RuntimeError("the first warm did not end")
            results = {m: one_mode(w, tokens_file, m, integrators, n_files, n_changes, k) for k, m in enumerate(modes)}
        except BaseException:
            print("the worker's last lines:\n" + "\n".join((tmp / "worker.out").read_text(errors="replace").splitlines()[-40:]),
                  file=sys.stderr)
            raise
        finally:
            w.stop()
            shutil.rmtree(w.tmp, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def median_of(runs: list[dict]) -> dict:
    """Every numeric figure's median over the runs; the failures' kinds are their union."""
    out: dict = {}
    for m, fig in runs[0].items():
        out[m] = {}
        for part, names in fig.items():
            out[m][part] = {name: sorted({f for r in runs for f in r[m][part][name]}) if isinstance(value, list)
                            else median_known([r[m][part][name] for r in runs]) for name, value in names.items()}
    return out


def show(results: dict, title: str) -> None:
    print(title)
    print(f"{'figure':<44}{'baseline':>12}{'integrating':>13}  target")
    for m, fig in results.items():
        label = "one connection an agent" if m == "own" else f"a shared pool of {env('POOL', '64')}"
        print(f"-- {label}")
        for name in ("heartbeats", "heartbeat p50 (ms)", "heartbeat p99 (ms)", "heartbeat max (ms)", "failed calls",
                     "the fleet's own loop lag p99 (ms)"):
            target = {"heartbeat p99 (ms)": "< 50", "failed calls": "0"}.get(name, "")
            print(f"{name:<44}{fig['baseline'][name]:12.1f}{fig['integrating'][name]:13.1f}  {target}")
        for name, value in fig["all"].items():
            print(f"{name:<44}{value if isinstance(value, list) else round(value, 1)!s:>25}")


def main() -> None:
    n_files, n_agents = int(env("FILES", "20000")), int(env("AGENTS", "1000"))
    n_integrators, n_changes = int(env("INTEGRATORS", "50")), int(env("CHANGES", "500"))
    modes, repeat = env("MODES", "own,shared").split(","), int(os.environ.get("BENCH_REPEAT", "1"))
    runs = []
    for k in range(repeat):
        runs.append(run(n_files, n_agents, n_integrators, n_changes, modes))
        show(runs[-1], f"{'run ' + str(k + 1) + ' of ' + str(repeat) + ': ' if repeat > 1 else ''}{n_agents} agents "
             f"heartbeating every {env('BEAT_S', '10')} s while {n_integrators} agents integrate {n_changes} changes on "
             f"{n_files} files; default caps; load average {os.getloadavg()[0]:.1f}; "
             f"10M additions in a Python loop take {python_speed_s():.2f} s here")
    if repeat > 1:
        show(median_of(runs), f"the median of {repeat} runs, each figure on its own")


if __name__ == "__main__":
    main()
