"""router.app: what lives for good leaves the garbage collector's view once the server has
started (``switchboard serve`` calls :func:`freeze_long_lived` from ``on_startup``)."""

from __future__ import annotations

import gc

from router.app import freeze_long_lived


async def test_the_objects_alive_at_start_are_frozen_and_later_ones_are_not() -> None:
    catalog_like = [{"agent": n} for n in range(100)]
    try:
        await freeze_long_lived()
        assert gc.get_freeze_count() >= len(catalog_like)
        later: list[int] = []
        tracked = {id(o) for o in gc.get_objects()}  # the generations a collection walks
        assert id(catalog_like) not in tracked and id(catalog_like[0]) not in tracked
        assert id(later) in tracked
    finally:
        gc.unfreeze()  # the other tests of this process keep the usual collector
