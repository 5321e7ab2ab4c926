"""registry.access.throttle: failed authentications per client address, a token bucket."""

from __future__ import annotations

import pytest

from registry.access.throttle import FailureThrottle, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_per_address() -> None:
    clock = Clock()
    throttle = FailureThrottle(5, clock=clock)
    assert throttle.burst == 20  # four seconds of failures
    assert [throttle.failed("10.0.0.1") for _ in range(20)] == [None] * 20
    wait = throttle.failed("10.0.0.1")
    assert wait == pytest.approx(0.2) and retry_after(wait) == 1
    assert throttle.failed("10.0.0.2") is None  # another address has its own bucket
    clock.now += 0.2
    assert throttle.failed("10.0.0.1") is None
    assert throttle.failed("10.0.0.1") is not None
    clock.now += 60
    assert [throttle.failed("10.0.0.1") for _ in range(20)] == [None] * 20  # full again


def test_an_unknown_address_shares_one_bucket_and_memory_is_bounded() -> None:
    throttle = FailureThrottle(1, burst=1, clock=Clock(), max_clients=2)
    assert throttle.failed(None) is None and throttle.failed(None) is not None
    for n in range(5):
        throttle.failed(f"10.0.0.{n}")
    assert throttle.clients() == 2


@pytest.mark.parametrize(("rate", "burst"), [(0, None), (float("inf"), None), (1, 0)])
def test_bad_values(rate: float, burst: int | None) -> None:
    with pytest.raises(ValueError):
        FailureThrottle(rate, burst)
