"""The followed tasks of synthesized push: one replica holds each, a lease that ends frees it
for another, a clean stop frees it at once (the clock moved by hand)."""

from __future__ import annotations

from registry.store import Store
from router.push.watches import Watch, Watches
from tests.support.clock import FakeClock

WATCH = Watch("t1.router", "agent", "upstream-1", "scope")


async def test_one_replica_holds_a_task_until_its_lease_ends_or_it_lets_go(store: Store) -> None:
    clock = FakeClock()
    watches = Watches(store, lease=60.0, clock=clock)
    assert await watches.add(WATCH) is True
    assert await watches.add(WATCH) is False  # followed already
    assert await watches.claim("a") == [WATCH]
    assert await watches.claim("b") == []  # a holds it
    clock.advance(30)
    assert await watches.renew("a", WATCH.task_id) is True
    clock.advance(59)
    assert await watches.claim("b") == []  # renewed: still a's
    clock.advance(2)
    assert await watches.claim("b") == [WATCH]  # a's lease ended (a died)
    assert await watches.renew("a", WATCH.task_id) is False  # a learns it lost the task
    await watches.release("b")  # b stops cleanly
    assert await watches.claim("c") == [WATCH]  # taken over at once
    await watches.remove(WATCH.task_id)
    assert await watches.all() == [] and await watches.claim("d") == []
