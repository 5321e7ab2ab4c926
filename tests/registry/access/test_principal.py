"""Principals: scopes of tasks, roles, labels."""

from __future__ import annotations

from registry.access.principal import ADMIN, ANONYMOUS, READER, Principal


def test_scopes() -> None:
    alice = Principal("alice", tenant="acme", method="api-key", key_id="k1")
    bob = Principal("bob", tenant="acme", method="jwt")
    loner = Principal("loner", method="jwt")
    assert ANONYMOUS.scope() == ANONYMOUS.scope("tenant") == ""
    assert alice.scope() != bob.scope()
    assert alice.scope("tenant") == bob.scope("tenant")
    assert loner.scope("tenant") == loner.scope() != Principal("other", method="jwt").scope()
    # a subject that looks like a tenant and subject pair cannot take another's scope
    assert Principal('acme","alice', method="jwt").scope() != alice.scope()


def test_roles_and_labels() -> None:
    admin = Principal("ops", roles=frozenset({ADMIN}), method="jwt")
    reader = Principal("audit", roles=frozenset({READER}), method="jwt")
    assert admin.is_admin and admin.is_reader
    assert reader.is_reader and not reader.is_admin
    assert not ANONYMOUS.authenticated and ANONYMOUS.label() == "anonymous"
    assert Principal("a", method="api-key", key_id="k1").label() == "api-key:k1 a"
    assert admin.label() == "jwt:ops"
