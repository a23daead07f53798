"""The queue's running checks as the queue page shows them (the worker's `queue.running`): each
round, its candidates in the order they were verified, and when a candidate failed, the ones
after it as the steps of its bisection."""

IDLE_POLLS = 5      # polls of an idle queue before the running part waits for the next log entry


def rounds(answer: dict) -> list[dict]:
    out = []
    for r in answer["rounds"]:
        batch = len(r["changes"])
        failed = False
        candidates = []
        for n, c in enumerate(r["candidates"], start=r["earlier_candidates"] + 1):
            state = "running" if c["ended_ms"] is None else "passed" if c["ok"] else "failed"
            candidates.append({**c, "n": n, "state": state, "bisect": failed,
                               "label": (f"all {batch} changes" if len(c["changes"]) == batch
                                         else f"{len(c['changes'])} of the {batch} changes")})
            failed = failed or state == "failed"
        out.append({**r, "candidates": candidates, "bisecting": failed or r["earlier_candidates"] > 0})
    return out
