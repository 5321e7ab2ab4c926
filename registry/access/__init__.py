"""Who is calling and what they may do: principals, API keys, JWT bearer tokens, access
policies per agent and skill, the audit log, and the secrets kept for outbound credentials.

The registry's admin API and the router both authenticate callers with this package; the
router scopes tasks and routing by the :class:`~registry.access.principal.Principal` it
yields (docs/security.md).
"""
