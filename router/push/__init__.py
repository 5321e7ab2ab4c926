"""Push notifications relayed through the router (docs/push.md): the clients' configs
(:mod:`router.push.configs`), the webhook check (:mod:`router.push.webhook`) and the durable
outbox that delivers notifications to the clients' webhooks (:mod:`router.push.outbox`).

Imports: :mod:`registry`, :mod:`router.tables`, :mod:`router.protocol`; never
:mod:`router.forward` or :mod:`router.transport` (which use this package)."""
