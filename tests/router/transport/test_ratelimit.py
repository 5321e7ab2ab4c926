"""Per-caller limits: the token bucket, open streams and bounded memory, on a clock the tests
move by hand (no sleeps)."""

from __future__ import annotations

import pytest

from router.transport.ratelimit import CallerLimits, retry_after
from tests.support.helpers import make_settings


class Clock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_burst_then_the_rate(clock: Clock) -> None:
    limits = CallerLimits(2.0, 3, None, clock=clock)
    assert [limits.take("alice") for _ in range(3)] == [None, None, None]  # the burst
    assert limits.take("alice") == pytest.approx(0.5)  # one token every 1/rps seconds
    clock.advance(0.2)
    assert limits.take("alice") == pytest.approx(0.3)  # refused: nothing taken
    clock.advance(0.3)
    assert limits.take("alice") is None
    assert limits.take("alice") == pytest.approx(0.5)
    clock.advance(100)  # the bucket refills up to the burst, no further
    assert [limits.take("alice") for _ in range(4)][-1] == pytest.approx(0.5)


def test_callers_have_buckets_of_their_own(clock: Clock) -> None:
    limits = CallerLimits(1.0, 1, None, clock=clock)
    assert limits.take("alice") is None
    assert limits.take("alice") == pytest.approx(1.0)
    assert limits.take("bob") is None


@pytest.mark.parametrize(("rps", "burst"), [(0.5, 1), (1.0, 1), (2.5, 3), (10.0, 10)])
def test_burst_defaults_to_the_rate_rounded_up(clock: Clock, rps: float, burst: int) -> None:
    limits = CallerLimits(rps, None, None, clock=clock)
    assert limits.burst == burst
    assert all(limits.take("alice") is None for _ in range(burst))
    assert limits.take("alice") == pytest.approx(1 / rps)


def test_a_steady_caller_at_the_rate_is_never_refused(clock: Clock) -> None:
    """Float rounding of the refill never costs a request."""
    limits = CallerLimits(10.0, 1, None, clock=clock)
    for _ in range(1000):
        assert limits.take("alice") is None
        clock.advance(0.1)


def test_a_clock_going_back_refills_nothing(clock: Clock) -> None:
    limits = CallerLimits(1.0, 1, None, clock=clock)
    assert limits.take("alice") is None
    clock.advance(-10)
    assert limits.take("alice") == pytest.approx(1.0)


def test_no_rate_no_limit(clock: Clock) -> None:
    limits = CallerLimits(None, 5, None, clock=clock)
    assert not limits.limits_requests
    assert all(limits.take("alice") is None for _ in range(1000))
    assert limits.callers() == 0  # nothing kept


def test_open_streams(clock: Clock) -> None:
    limits = CallerLimits(None, None, 2, clock=clock)
    assert limits.limits_streams
    assert limits.open_stream("alice") and limits.open_stream("alice")
    assert not limits.open_stream("alice")  # a third at once
    assert limits.open_stream("bob")
    assert limits.open_streams("alice") == 2
    limits.close_stream("alice")
    assert limits.open_stream("alice")
    for _ in range(3):
        limits.close_stream("alice")  # a close too many is ignored
    assert limits.open_streams("alice") == 0
    assert limits.open_stream("alice") and limits.open_stream("alice")
    assert not limits.open_stream("alice")


def test_no_stream_limit(clock: Clock) -> None:
    limits = CallerLimits(1.0, None, None, clock=clock)
    assert not limits.limits_streams
    assert all(limits.open_stream("alice") for _ in range(100))
    limits.close_stream("alice")
    assert limits.open_streams("alice") == 0


def test_memory_is_bounded_least_recently_used_dropped(clock: Clock) -> None:
    limits = CallerLimits(1.0, 1, None, clock=clock, max_callers=3)
    for key in ("a", "b", "c"):
        assert limits.take(key) is None
    assert limits.take("a") is not None  # "a" is now the most recently used
    assert limits.take("d") is None  # "b", the least recently used, is dropped
    assert limits.callers() == 3
    assert limits.take("a") is not None  # still kept: still limited
    assert limits.take("c") is not None
    assert limits.take("b") is None  # forgotten: a full bucket again


def test_streams_are_never_forgotten(clock: Clock) -> None:
    """Stream counts are not evicted (a forgotten count would let a caller past the limit);
    they live only while a stream is open."""
    limits = CallerLimits(1.0, 1, 1, clock=clock, max_callers=1)
    assert limits.open_stream("alice")
    for n in range(10):
        limits.take(f"caller-{n}")
    assert not limits.open_stream("alice")
    limits.close_stream("alice")
    assert limits.open_streams("alice") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, None, None), "rps must be a positive number, not 0.0"),
        ((float("inf"), None, None), "rps must be a positive number, not inf"),
        ((1.0, 0, None), "burst must be at least 1, not 0"),
        ((1.0, None, 0), "streams must be at least 1, not 0"),
    ],
)
def test_bad_limits(args: tuple[float, int | None, int | None], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CallerLimits(*args)
    with pytest.raises(ValueError, match="max_callers must be at least 1, not 0"):
        CallerLimits(1.0, None, None, max_callers=0)


def test_from_settings(clock: Clock) -> None:
    settings = make_settings(
        "sqlite://", rate_limit_rps=4.0, rate_limit_burst=8, rate_limit_streams=2
    )
    limits = CallerLimits.from_settings(settings, clock=clock)
    assert (limits.rps, limits.burst, limits.streams) == (4.0, 8, 2)
    unlimited = CallerLimits.from_settings(make_settings("sqlite://"))
    assert not unlimited.limits_requests and not unlimited.limits_streams


@pytest.mark.parametrize(("seconds", "header"), [(0.001, 1), (0.5, 1), (1.0, 1), (1.01, 2)])
def test_retry_after(seconds: float, header: int) -> None:
    assert retry_after(seconds) == header
