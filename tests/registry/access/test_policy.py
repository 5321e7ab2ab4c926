"""Access policies: who sees and uses which agent and skill (a table of cases), the checks of
a policy's values, and storage and replica sync on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from registry.access.policy import (
    MAX_ENTRIES,
    MAX_RULES,
    VERSION_KEY,
    Policies,
    PolicyError,
    Rule,
    parse_rules,
    parse_tenant,
)
from registry.access.principal import ADMIN, ANONYMOUS, READER, Principal
from registry.records import iso
from registry.store import Store
from registry.tables import CatalogStateRow
from tests.support.helpers import make_settings

ALICE = Principal("alice", "acme", frozenset({"ops"}), method="api-key", key_id="k1")
BOB = Principal("bob", "acme", frozenset({"dev"}), method="jwt")
CAROL = Principal("carol", "globex", frozenset({"ops"}), method="jwt")
DAVE = Principal("dave", None, frozenset({"ops"}), method="jwt")  # no tenant
ROOT = Principal("root", None, roles=frozenset({ADMIN}), method="admin-token")
AUDITOR = Principal("auditor", "globex", roles=frozenset({READER}), method="jwt")
SKILLS = ("forecast", "alerts")


async def _policies(
    store: Store, agent_access: str = "allow", enforced: bool = True, **policy: Any
) -> Policies:
    """Policies over ``store`` with, if given, ``policy`` (tenant, rules) on agent ``wx``."""
    settings = make_settings(store.url, agent_access=agent_access)
    policies = Policies(store, settings, enforced=enforced)
    await policies.load()
    if policy:
        await policies.put("wx", policy.get("tenant"), policy.get("rules", []), "test")
    return policies


# (what, the policy of "wx" (None: none), SWITCHBOARD_AGENT_ACCESS, caller,
#  visible, usable as an agent, the usable skills of SKILLS)
CASES: list[tuple[str, dict[str, Any] | None, str, Principal, bool, bool, set[str]]] = [
    ("no policy, allow: everyone", None, "allow", CAROL, True, True, set(SKILLS)),
    ("no policy, allow: no tenant too", None, "allow", DAVE, True, True, set(SKILLS)),
    ("no policy, deny: nobody", None, "deny", ALICE, True, False, set()),
    ("no policy, deny: admins", None, "deny", ROOT, True, True, set(SKILLS)),
    ("tenant agent: its tenant", {"tenant": "acme"}, "allow", BOB, True, True, set(SKILLS)),
    ("tenant agent: another tenant", {"tenant": "acme"}, "allow", CAROL, False, False, set()),
    ("tenant agent: no tenant", {"tenant": "acme"}, "allow", DAVE, False, False, set()),
    ("tenant agent, deny: its tenant", {"tenant": "acme"}, "deny", ALICE, True, False, set()),
    ("tenant agent: admins", {"tenant": "acme"}, "deny", ROOT, True, True, set(SKILLS)),
    ("tenant agent: readers see", {"tenant": "acme"}, "allow", AUDITOR, True, False, set()),
    (
        "rule by tenant: matches",
        {"rules": [{"tenants": ["acme"]}]},
        "deny",
        BOB,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rule by tenant: another tenant",
        {"rules": [{"tenants": ["acme"]}]},
        "allow",
        CAROL,
        True,
        False,
        set(),
    ),
    (
        "rule by group: one of the caller's groups",
        {"rules": [{"groups": ["ops", "sre"]}]},
        "allow",
        CAROL,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rule by group: not in it",
        {"rules": [{"groups": ["ops"]}]},
        "allow",
        BOB,
        True,
        False,
        set(),
    ),
    (
        "rule by tenant and group: both must hold",
        {"rules": [{"tenants": ["acme"], "groups": ["ops"]}]},
        "allow",
        CAROL,
        True,
        False,
        set(),
    ),
    (
        "rule by tenant and group: both hold",
        {"rules": [{"tenants": ["acme"], "groups": ["ops"]}]},
        "allow",
        ALICE,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rule by subject",
        {"rules": [{"subjects": ["dave"]}]},
        "deny",
        DAVE,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rule by subject: someone else",
        {"rules": [{"subjects": ["dave"]}]},
        "allow",
        ALICE,
        True,
        False,
        set(),
    ),
    (
        "empty rule: everyone who sees the agent",
        {"tenant": "acme", "rules": [{}]},
        "deny",
        BOB,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rules never widen who sees a tenant agent",
        {"tenant": "acme", "rules": [{"tenants": ["globex"]}]},
        "allow",
        CAROL,
        False,
        False,
        set(),
    ),
    (
        "skills: only those",
        {"rules": [{"groups": ["ops"], "skills": ["alerts", "gone"]}]},
        "allow",
        ALICE,
        True,
        True,
        {"alerts"},
    ),
    (
        "skills of several rules add up",
        {"rules": [{"skills": ["alerts"]}, {"subjects": ["bob"], "skills": ["forecast"]}]},
        "deny",
        BOB,
        True,
        True,
        set(SKILLS),
    ),
    (
        "a whole-agent rule beside a skill rule",
        {"rules": [{"skills": ["alerts"]}, {"groups": ["dev"]}]},
        "deny",
        BOB,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rules: admins still use everything",
        {"rules": [{"subjects": ["nobody"]}]},
        "allow",
        ROOT,
        True,
        True,
        set(SKILLS),
    ),
    (
        "rules: readers see but do not use",
        {"rules": [{"subjects": ["nobody"]}]},
        "allow",
        AUDITOR,
        True,
        False,
        set(),
    ),
]


@pytest.mark.parametrize(
    ("policy", "access", "caller", "visible", "usable", "skills"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_who_sees_and_uses_an_agent(
    sqlite_url: str,
    policy: dict[str, Any] | None,
    access: str,
    caller: Principal,
    visible: bool,
    usable: bool,
    skills: set[str],
) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        policies = await _policies(store, access, **(policy or {}))
        assert policies.visible(caller, "wx") is visible
        assert policies.usable(caller, "wx") is usable
        assert policies.usable_skills(caller, "wx", SKILLS) == skills
        for skill in SKILLS:
            assert policies.usable(caller, "wx", skill) is (skill in skills)
        other = bool(policies.usable_skills(caller, "wx", ["unknown-skill"]))
        assert policies.usable(caller, "wx", "unknown-skill") is other
    finally:
        await store.close()


async def test_without_enforcement_everyone_sees_and_uses_everything(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        rules = [{"subjects": ["nobody"], "skills": ["alerts"]}]
        policies = await _policies(store, "deny", enforced=False, tenant="acme", rules=rules)
        for caller in (ANONYMOUS, CAROL, DAVE):
            assert policies.visible(caller, "wx")
            assert policies.usable(caller, "wx", "forecast")
            assert policies.usable_skills(caller, "wx", SKILLS) == set(SKILLS)
        # enforced: the anonymous caller is one without tenant or groups
        enforced = await _policies(store, "allow", enforced=True)
        assert not enforced.visible(ANONYMOUS, "wx")
        assert enforced.usable(ANONYMOUS, "other-agent")  # no policy, allow
    finally:
        await store.close()


def test_enforcement_follows_client_auth(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    assert Policies(store, make_settings(sqlite_url)).enforced is False
    assert Policies(store, make_settings(sqlite_url, client_auth="api-key")).enforced is True
    assert Policies(store, make_settings(sqlite_url), enforced=True).enforced is True


# --- the values of a policy -----------------------------------------------------------------


def test_rules_are_read_with_their_order_and_without_repeats() -> None:
    rules = parse_rules([{"groups": ["b", "a", "b"], "skills": ["s"]}, {}, Rule(subjects=("x",))])
    assert rules == (
        Rule(groups=("b", "a"), skills=("s",)),
        Rule(),
        Rule(subjects=("x",)),
    )
    assert rules[0].to_api() == {
        "tenants": [],
        "groups": ["b", "a"],
        "subjects": [],
        "skills": ["s"],
    }


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"groups": ["a"]}, "rules"),
        (["groups"], "rules[0]"),
        ([{"group": ["a"]}], "rules[0]"),
        ([{"groups": "ops"}], "rules[0].groups"),
        ([{}, {"skills": ["ok", 3]}], "rules[1].skills[1]"),
        ([{"tenants": [""]}], "rules[0].tenants[0]"),
        ([{"subjects": [" padded "]}], "rules[0].subjects[0]"),
        ([{"subjects": ["x" * 257]}], "rules[0].subjects[0]"),
        ([{}] * (MAX_RULES + 1), "rules"),
        ([{"groups": [f"g{n}" for n in range(MAX_ENTRIES + 1)]}], "rules"),
    ],
)
def test_bad_rules_are_refused_with_where(rules: Any, field: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_rules(rules)
    assert caught.value.code == "invalid_policy"
    assert caught.value.status == 400
    assert caught.value.details[0]["field"] == field
    assert field in caught.value.message


def test_every_problem_is_listed() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_rules([{"groups": [1, 2], "colour": []}])
    fields = [problem["field"] for problem in caught.value.details]
    assert fields == ["rules[0]", "rules[0].groups[0]", "rules[0].groups[1]"]


@pytest.mark.parametrize("tenant", ["", " acme", 5, ["acme"], "t" * 257])
def test_bad_tenants_are_refused(tenant: Any) -> None:
    with pytest.raises(PolicyError, match="tenant"):
        parse_tenant(tenant)
    assert parse_tenant(None) is None
    assert parse_tenant("acme") == "acme"


async def test_put_checks_the_agent_id_and_values(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        policies = await _policies(store)
        with pytest.raises(PolicyError, match="agent id"):
            await policies.put("", None, [], "test")
        with pytest.raises(PolicyError, match="agent id"):
            await policies.put("x" * 65, None, [], "test")
        with pytest.raises(PolicyError, match="rules"):
            await policies.put("wx", None, [{"nope": []}], "test")
        assert policies.all() == []
    finally:
        await store.close()


# --- storage and replicas (SQLite and PostgreSQL) -------------------------------------------


async def test_policies_persist_and_replace(store: Store) -> None:
    policies = await _policies(store)
    first = await policies.put("wx", "acme", [{"groups": ["ops"]}], "api-key:k1 alice")
    assert first.tenant == "acme" and first.updated_by == "api-key:k1 alice"
    replaced = await policies.put("wx", None, [{"skills": ["alerts"]}], "admin-token")
    assert replaced.tenant is None
    assert replaced.rules == (Rule(skills=("alerts",)),)
    await policies.put("abc", "globex", [], "admin-token")

    again = await _policies(store)  # a restart reads what was stored
    assert [p.agent_id for p in again.all()] == ["abc", "wx"]
    assert again.get("wx") == replaced
    assert again.get("wx").to_api() == {
        "agent_id": "wx",
        "tenant": None,
        "rules": [{"tenants": [], "groups": [], "subjects": [], "skills": ["alerts"]}],
        "updated_at": iso(replaced.updated_at),
        "updated_by": "admin-token",
    }
    assert await again.delete("wx", "admin-token") is True
    assert await again.delete("wx", "admin-token") is False
    assert again.get("wx") is None
    assert again.visible(CAROL, "abc") and not again.visible(ALICE, "abc")


async def test_replicas_see_each_others_changes(store: Store) -> None:
    one, two = await _policies(store), await _policies(store)
    assert await two.sync() is False
    await one.put("wx", "acme", [], "admin-token")
    assert two.visible(CAROL, "wx")  # not synced yet
    assert await two.sync() is True
    assert not two.visible(CAROL, "wx")
    assert await two.sync() is False
    await two.put("wx", "acme", [{"subjects": ["alice"]}], "admin-token")  # an update
    assert await one.sync() is True
    assert one.usable(ALICE, "wx") and not one.usable(BOB, "wx")
    await two.delete("wx", "admin-token")
    assert await one.sync() is True
    assert one.get("wx") is None and one.visible(CAROL, "wx")


async def test_load_creates_its_counter_once(store: Store) -> None:
    await _policies(store)
    await _policies(store)
    async with store.session() as session:
        row = await session.get(CatalogStateRow, VERSION_KEY)
    assert row is not None and row.value == 0
