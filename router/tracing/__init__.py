"""OpenTelemetry traces of Switchboard (docs/tracing.md).

- :mod:`router.tracing.setup`: the SDK provider and its OTLP exporter, from the standard
  ``OTEL_*`` variables, installed only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.
- :mod:`router.tracing.spans`: the span names, the attribute names, and the small hooks the
  routing core calls (the decision, the upstream call and its propagation, the stream relay,
  translation).
- :mod:`router.tracing.middleware`: the server span of every HTTP request (A2A calls, the
  admin API, cards), continuing the client's ``traceparent``.
- :mod:`router.tracing.registry`: spans around the registry's crawls and card verification
  (the registry does not import the router: its objects are wrapped from here).

Without a configured provider every hook is the OpenTelemetry API's no-op.
"""
