"""router.app: what lives for good leaves the garbage collector's view once the server has
started, when there is a lot of it (``switchboard serve`` calls :func:`freeze_long_lived`
from ``on_startup``)."""

from __future__ import annotations

import gc

from router.app import collect_young_every, freeze_long_lived


async def test_the_objects_alive_at_start_are_frozen_and_later_ones_are_not() -> None:
    catalog_like = [{"agent": n} for n in range(100)]
    before = gc.get_freeze_count()  # a library may have frozen some at import
    try:
        await freeze_long_lived(least=len(gc.get_objects()) + 10**6)  # a small heap
        assert gc.get_freeze_count() == before
        await freeze_long_lived(least=0)
        assert gc.get_freeze_count() >= before + len(catalog_like)
        later: list[int] = []
        tracked = {id(o) for o in gc.get_objects()}  # the generations a collection walks
        assert id(catalog_like) not in tracked and id(catalog_like[0]) not in tracked
        assert id(later) in tracked
    finally:
        if before == 0:
            gc.unfreeze()  # the other tests of this process keep the usual collector


def test_the_youngest_generation_is_collected_as_often_as_set() -> None:
    before = gc.get_threshold()
    try:
        collect_young_every(5_000)
        assert gc.get_threshold() == (5_000, *before[1:])
    finally:
        gc.set_threshold(*before)
