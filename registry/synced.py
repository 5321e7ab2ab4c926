"""State kept in memory by every replica and reloaded when another one changes it: a counter
in ``catalog_state`` that each write bumps (:func:`registry.store.bump`) and each replica
polls (:meth:`Synced.sync`). Learned examples, access policies and outbound credentials."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy.exc import IntegrityError

from registry.store import Store
from registry.tables import CatalogStateRow

__all__ = ["Synced"]


class Synced:
    """In-memory state over tables whose changes bump the counter :attr:`VERSION_KEY`;
    :attr:`version` is the counter's value when the state was last read."""

    VERSION_KEY: ClassVar[str]
    store: Store
    version: int = -1

    async def create_counter(self) -> None:
        """Create the counter (at 0) if it is missing; race-safe with other replicas."""
        try:
            async with self.store.session() as session, session.begin():
                if await session.get(CatalogStateRow, self.VERSION_KEY) is None:
                    session.add(CatalogStateRow(key=self.VERSION_KEY, value=0))
        except IntegrityError:
            pass  # another process created it first

    async def sync(self, counter: int | None = None) -> bool:
        """Reload when another process changed the state (``counter``: the counter's value
        if the caller has just read it, :meth:`registry.store.Store.counters`); True if it
        did."""
        if counter is None:
            async with self.store.session() as session:
                row = await session.get(CatalogStateRow, self.VERSION_KEY)
            if row is None:
                return False
            counter = row.value
        if counter != self.version:
            await self._reload()
            return True
        return False

    def advanced(self, counter: int) -> None:
        """This process's own write took the counter to ``counter`` (its change is in memory
        already): the state is current if that was the only change since it was read, else
        the next :meth:`sync` reads it all again."""
        if counter == self.version + 1:
            self.version = counter

    async def _reload(self) -> None:
        """Read the whole state again (and the counter first: it is never ahead of it)."""
        raise NotImplementedError
