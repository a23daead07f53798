"""Sliding-window rate limits for what an anonymous browser can make the console remember
(enrolment requests, ceremony state before a login): at most so many per client address and
so many overall in a window (when an overall bound is given). Memory is bounded too: the addresses tracked are capped."""
from collections import OrderedDict, deque

from lonca.protocol import now_ms

MAX_CLIENTS = 10_000


class RateLimit:
    def __init__(self, per_client: int, window_ms: int, overall: int | None = None):
        self.per_client, self.overall, self.window_ms = per_client, overall, window_ms
        self._all: deque[int] = deque()
        self._by_client: OrderedDict[str, deque[int]] = OrderedDict()

    def _trim(self, times: deque[int], now: int) -> None:
        while times and times[0] <= now - self.window_ms:
            times.popleft()

    def allow(self, client: str) -> str | None:
        """None if one more is allowed now (and counts it), else why not."""
        now = now_ms()
        mine = self._by_client.get(client)
        if mine is None:
            mine = self._by_client[client] = deque()
            while len(self._by_client) > MAX_CLIENTS:
                self._by_client.popitem(last=False)
        self._by_client.move_to_end(client)
        self._trim(mine, now)
        minutes = max(1, self.window_ms // 60_000)
        if len(mine) >= self.per_client:
            return f"at most {self.per_client} from one address in {minutes} min; try again later"
        if self.overall is not None:  # else nothing counts everyone's
            self._trim(self._all, now)
            if len(self._all) >= self.overall:
                return f"at most {self.overall} from everyone in {minutes} min; try again later"
            self._all.append(now)
        mine.append(now)
        return None
