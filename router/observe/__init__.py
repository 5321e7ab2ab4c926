"""What the router shows of itself: Prometheus metrics (:mod:`~router.observe.metrics`,
:mod:`~router.observe.collector`, :mod:`~router.observe.endpoint`), request ids
(:mod:`~router.observe.requestid`) and log formats (:mod:`~router.observe.logformat`).
See docs/observability.md."""
