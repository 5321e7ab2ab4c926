"""The web console at ``/ui/``: a static client app that reads the public REST API (see
``docs/console.md``); :mod:`router.ui.routes` serves it."""
