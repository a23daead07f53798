"""Live updates: one SSE stream per page, following a repository's log with the worker's long
poll (`log` with `wait_ms`) on a connection of its own. static/live.js turns each event into the
DOM events `lonca:log` and `lonca:state`, on which htmx refreshes the page's fragments."""
import json

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from lonca.async_client import AsyncClient
from lonca.client import Unreachable
from lonca.protocol import LoncaError

from . import views
from .guard import session_of, whole

WAIT_MS = 25_000
FINAL = ("forbidden", "not_found")    # refusals a reconnection would only meet again


async def live(request: Request) -> Response:
    s = session_of(request)
    repo = request.path_params["repo"]
    if not s.logged_in:
        return Response("log in first", status_code=401)
    settings = request.app.state.settings
    token = s.token

    async def events():
        client = AsyncClient(settings.socket, timeout=WAIT_MS / 1000 + 30)
        try:
            # a reconnecting EventSource says the last seq it got: nothing between is lost
            last = request.headers.get("last-event-id", "")
            start = last_seq + 1 if (last_seq := whole(last, 0, 10**15)) is not None else \
                (await client.call("status", {"lists": []}, repo=repo, token=token))["next_seq"]
            yield {"event": "hello", "data": json.dumps({"next_seq": start})}
            while True:
                entries = await client.call("log", {"from": start, "wait_ms": WAIT_MS}, repo=repo, token=token)
                for e in entries:
                    en = e["entry"]
                    yield {"event": "log", "id": str(en["seq"]), "data": json.dumps({
                        "seq": en["seq"], "op": en["op"].get("op"), "outcome": en["decision"]["outcome"],
                        "actor": views.actor_label(en["actor"]), "time_ms": en["time_ms"]})}
                    start = en["seq"] + 1
        except (LoncaError, Unreachable) as e:
            # the browser's EventSource reconnects by itself; say why this stream stopped, and
            # that it is for good when the worker refuses the repository itself (live.js closes it)
            final = isinstance(e, LoncaError) and e.code in FINAL
            yield {"event": "stopped", "data": json.dumps({"error": f"{type(e).__name__}: {getattr(e, 'code', '')}",
                                                          "final": final}),
                   **({"retry": 86_400_000} if final else {})}
        finally:
            client.close()

    return EventSourceResponse(events(), ping=15)
