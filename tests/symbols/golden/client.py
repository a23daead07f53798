"""Payments client."""
import functools
from typing import overload

RATE = 3


@functools.total_ordering
class Client(Base):
    """Talks to the gateway."""
    retries: int = 3

    def __init__(self, key: str) -> None:
        self.key = key

    # Charges a card.
    def charge(self, amount: int, currency: str = "EUR") -> Receipt:
        def helper():
            return amount
        return self._post(helper())

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value

    @overload
    def get(self, k: int) -> int: ...
    @overload
    def get(self, k: str) -> str: ...

    class Error(Exception):
        def code(self):
            return 1


if TYPE_CHECKING:
    def typed() -> None: ...


async def fetch(url):
    return url


class TestClient:
    def test_charge(self):
        assert Client("k").charge(1)

    @pytest.mark.skip(reason="flaky")
    def test_refund(self):
        pass
