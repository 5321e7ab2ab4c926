"""Principals: scopes of tasks (how they signed in, issuer, tenant, subject), the scopes of
earlier versions, roles, labels."""

from __future__ import annotations

import json

from registry.access.authenticate import ADMIN_TOKEN, READ_TOKEN
from registry.access.principal import ADMIN, ANONYMOUS, BUILT_IN, READER, Principal

ISSUER = "https://login.example/realms/acme"


def test_scopes() -> None:
    alice = Principal("alice", tenant="acme", method="api-key", key_id="k1")
    bob = Principal("bob", tenant="acme", method="jwt", issuer=ISSUER)
    loner = Principal("loner", method="jwt", issuer=ISSUER)
    assert ANONYMOUS.scope() == ANONYMOUS.scope("tenant") == ""
    assert alice.scope() != bob.scope()
    assert alice.scope("tenant") == bob.scope("tenant")
    assert loner.scope("tenant") == loner.scope() != Principal("other", method="jwt").scope()
    # a subject that looks like a tenant and subject pair cannot take another's scope
    assert Principal('acme","alice', method="jwt").scope() != alice.scope()


def test_a_scope_is_how_the_caller_signed_in_its_issuer_tenant_and_subject() -> None:
    key = Principal("alice", tenant="acme", method="api-key", key_id="k1")
    token = Principal("alice", tenant="acme", method="jwt", issuer=ISSUER)
    other_issuer = Principal("alice", tenant="acme", method="jwt", issuer="https://other.example")
    assert json.loads(key.scope()) == ["api-key", "acme", "alice"]
    assert json.loads(token.scope()) == [f"jwt:{ISSUER}", "acme", "alice"]
    assert len({key.scope(), token.scope(), other_issuer.scope()}) == 3
    # another key of the same subject is the same caller (a rotated key keeps its tasks)
    assert Principal("alice", tenant="acme", method="api-key", key_id="k2").scope() == key.scope()
    assert json.loads(Principal("alice", method="api-key").scope()) == ["api-key", "", "alice"]


def test_a_built_in_principal_shares_its_scope_with_no_key_or_token() -> None:
    assert {"admin-token", "read-token"} == BUILT_IN
    assert json.loads(ADMIN_TOKEN.scope()) == ["admin-token", "", "admin-token"]
    for name, token in (("admin-token", ADMIN_TOKEN), ("read-token", READ_TOKEN)):
        assert token.built_in
        for squatter in (
            Principal(name, method="api-key", key_id="k1"),
            Principal(name, method="jwt", issuer=ISSUER),
        ):
            assert not squatter.built_in
            for mode in ("subject", "tenant"):
                assert squatter.scope(mode) != token.scope(mode)
    # tenant mode: one tenant's keys and tokens share a scope, a built-in principal never
    acme_key = Principal("alice", tenant="acme", method="api-key")
    acme_token = Principal("bob", tenant="acme", method="jwt", issuer=ISSUER)
    assert acme_key.scope("tenant") == acme_token.scope("tenant") == '["tenant","acme"]'
    tenanted_admin = Principal("admin-token", tenant="acme", method="admin-token")
    assert tenanted_admin.scope("tenant") != acme_key.scope("tenant")


def test_the_scope_of_earlier_versions_for_one_version_more() -> None:
    key = Principal("alice", tenant="acme", method="api-key", key_id="k1")
    token = Principal("alice", tenant="acme", method="jwt", issuer=ISSUER)
    # earlier versions: [tenant, subject], the same for a key and a token
    assert key.old_scope() == token.old_scope() == '["acme","alice"]'
    assert Principal("loner", method="jwt").old_scope("tenant") == '["","loner"]'
    # tenant mode with a tenant: the scope did not change, there is no other to open
    assert key.old_scope("tenant") is None and token.old_scope("tenant") is None
    # never for the built-in principals, nor for a key or token naming one, nor anonymous
    for principal in (
        ADMIN_TOKEN,
        READ_TOKEN,
        Principal("admin-token", method="api-key"),
        Principal("read-token", tenant="acme", method="jwt"),
        ANONYMOUS,
    ):
        assert principal.old_scope() is None and principal.old_scope("tenant") is None


def test_roles_and_labels() -> None:
    admin = Principal("ops", roles=frozenset({ADMIN}), method="jwt")
    reader = Principal("audit", roles=frozenset({READER}), method="jwt")
    assert admin.is_admin and admin.is_reader
    assert reader.is_reader and not reader.is_admin
    assert not ANONYMOUS.authenticated and ANONYMOUS.label() == "anonymous"
    assert Principal("a", method="api-key", key_id="k1").label() == "api-key:k1 a"
    assert admin.label() == "jwt:ops"
