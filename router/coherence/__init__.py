"""Read your writes: every process's memory of the shared state kept as new as every write
acknowledged to a client.

- :mod:`router.coherence.board`: the generation of writes and each worker's position, in
  memory the workers of one ``serve`` share;
- :mod:`router.coherence.sync`: :class:`Coherence`, a process's side: catch up before a
  request, acknowledge a write once every worker has it;
- :mod:`router.coherence.state`: :class:`SharedState`, what a sync reloads;
- :mod:`router.coherence.notify`: writes announced to other replicas (PostgreSQL
  ``LISTEN``/``NOTIFY``).

The HTTP side is :mod:`router.transport.fresh`; the supervisor relays the workers' word
(:mod:`router.cli.workers`).
"""
