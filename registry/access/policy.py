"""Who may see and use each agent: agent tenants and allow rules per agent and skill.

**The model.** Each agent may have one :class:`Policy`:

- ``tenant``: ``None`` makes it a *shared* agent, visible to every tenant; a tenant name
  makes it visible only to callers of that tenant (a caller without a tenant sees shared
  agents only).
- ``rules``: allow rules ``{"tenants": [...], "groups": [...], "subjects": [...],
  "skills": [...]}``. A rule *matches* a caller when every non-empty list among
  ``tenants`` / ``groups`` / ``subjects`` holds the caller's tenant / one of its groups /
  its subject (a rule without those lists matches everyone who can see the agent). A
  matching rule with no ``skills`` grants the whole agent, else only those skill ids.

An agent that may be seen and has no rules (or no policy at all) is usable by everyone who
sees it when ``SWITCHBOARD_AGENT_ACCESS=allow`` (the default), by nobody but admins with
``deny``. An agent with rules grants only what a matching rule grants: rules never widen who
sees an agent, so a rule naming another tenant on a tenant's agent grants that tenant
nothing.

Admins (:attr:`~registry.access.principal.Principal.is_admin`) see and may use every agent;
readers (:attr:`~registry.access.principal.Principal.is_reader`) see every agent (they read
the whole catalog) but use only what the rules grant them. When policies are not
*enforced* (client authentication off, ``SWITCHBOARD_CLIENT_AUTH=none``: there is nobody
to tell apart) every caller sees and uses everything, as before policies existed.

**Storage.** Policies live in the ``agent_policies`` table (one row per agent id) and in
memory: :class:`Policies` answers :meth:`~Policies.visible`, :meth:`~Policies.usable` and
:meth:`~Policies.usable_skills` without touching the database. Every change bumps the
``policies_version`` counter of ``catalog_state``; :meth:`Policies.sync` (the app's sync
loop) reloads when another replica changed them. A policy outlives its agent: removing an
agent keeps its policy (re-registering the id keeps its restrictions) until it is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from registry.access.principal import Principal
from registry.errors import RegistryError
from registry.records import as_utc, iso, utcnow
from registry.settings import Settings
from registry.store import Store, bump
from registry.synced import Synced
from registry.tables import AgentPolicyRow, CatalogStateRow

__all__ = [
    "MAX_ENTRIES",
    "MAX_NAME",
    "MAX_RULES",
    "RULE_KEYS",
    "VERSION_KEY",
    "Policies",
    "Policy",
    "PolicyError",
    "Rule",
    "parse_rules",
    "parse_tenant",
]

log = logging.getLogger(__name__)

VERSION_KEY = "policies_version"
"""The ``catalog_state`` counter that grows with every change of a policy."""
MAX_AGENT_ID = 64
MAX_NAME = 256
"""The longest tenant, group, subject or skill id a policy may name."""
MAX_RULES = 100
"""Rules in one policy."""
MAX_ENTRIES = 1000
"""Names in all the lists of one policy's rules together."""
RULE_KEYS = ("tenants", "groups", "subjects", "skills")
"""The members of a rule, each a list of names."""


class PolicyError(RegistryError):
    """A policy that cannot be stored: ``details`` lists ``{"field", "problem"}`` entries."""

    status = 400
    code = "invalid_policy"


@dataclass(frozen=True)
class Rule:
    """One allow rule: who it matches (tenants, groups, subjects; empty: anyone) and which
    skills it grants (empty: the whole agent). Names keep their order, without repeats."""

    tenants: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()

    def matches(self, principal: Principal) -> bool:
        """Whether the rule applies to ``principal`` (every non-empty list holds it)."""
        if self.tenants and principal.tenant not in self.tenants:
            return False
        if self.subjects and principal.subject not in self.subjects:
            return False
        return not self.groups or not principal.groups.isdisjoint(self.groups)

    def grants(self, skill_id: str | None) -> bool:
        """Whether a match grants ``skill_id`` (None: the agent, i.e. any of its skills)."""
        return skill_id is None or not self.skills or skill_id in self.skills

    def to_api(self) -> dict[str, list[str]]:
        """The API's view: every list, empty or not."""
        return {key: list(getattr(self, key)) for key in RULE_KEYS}


@dataclass(frozen=True)
class Policy:
    """An agent's tenant (None: shared) and allow rules, with who changed it last and when."""

    agent_id: str
    tenant: str | None = None
    rules: tuple[Rule, ...] = ()
    updated_at: datetime | None = None
    updated_by: str | None = None

    def to_api(self) -> dict[str, Any]:
        """The admin API's view (``updated_at`` and ``updated_by`` null: no stored policy)."""
        return {
            "agent_id": self.agent_id,
            "tenant": self.tenant,
            "rules": [rule.to_api() for rule in self.rules],
            "updated_at": iso(self.updated_at) if self.updated_at else None,
            "updated_by": self.updated_by,
        }


# --- validation ------------------------------------------------------------------------------


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.strip() == value


def parse_tenant(value: Any, field: str = "tenant") -> str | None:
    """A policy's tenant: None (shared) or a name of 1 to :data:`MAX_NAME` characters."""
    if value is None or _name(value):
        return value
    raise PolicyError(
        f'"{field}" must be null (a shared agent) or a tenant name of 1 to {MAX_NAME} '
        "characters without surrounding spaces",
        details=[{"field": field, "problem": "not null or a tenant name"}],
    )


def parse_rules(value: Any) -> tuple[Rule, ...]:
    """Rules from JSON (a list of objects with lists of names) or :class:`Rule` objects;
    :class:`PolicyError` naming each problem otherwise."""
    if not isinstance(value, list | tuple):
        raise PolicyError(
            '"rules" must be a list of rules like {"groups": ["ops"], "skills": ["forecast"]}',
            details=[{"field": "rules", "problem": "not a list"}],
        )
    if len(value) > MAX_RULES:
        raise PolicyError(
            f"a policy has at most {MAX_RULES} rules; this one has {len(value)}",
            details=[{"field": "rules", "problem": f"more than {MAX_RULES} rules"}],
        )
    problems: list[dict[str, str]] = []
    rules = []
    for n, item in enumerate(value):
        if isinstance(item, Rule):
            item = item.to_api()
        where = f"rules[{n}]"
        if not isinstance(item, Mapping):
            problems.append({"field": where, "problem": "not an object"})
            continue
        unknown = sorted(str(key) for key in item if key not in RULE_KEYS)
        if unknown:
            problems.append(
                {
                    "field": where,
                    "problem": f"unknown member(s) {', '.join(unknown)}; "
                    f"a rule has {', '.join(RULE_KEYS)}",
                }
            )
        lists: dict[str, tuple[str, ...]] = {}
        for key in RULE_KEYS:
            names = item.get(key, [])
            if not isinstance(names, list | tuple):
                problems.append({"field": f"{where}.{key}", "problem": "not a list of names"})
                continue
            bad = [i for i, name in enumerate(names) if not _name(name)]
            problems += [
                {
                    "field": f"{where}.{key}[{i}]",
                    "problem": f"not a name of 1 to {MAX_NAME} characters without "
                    "surrounding spaces",
                }
                for i in bad
            ]
            lists[key] = tuple(dict.fromkeys(name for name in names if _name(name)))
        rules.append(Rule(**lists))
    if problems:
        raise PolicyError(
            f"the policy's rules are not valid: {problems[0]['field']}: {problems[0]['problem']}",
            details=problems,
        )
    entries = sum(len(getattr(rule, key)) for rule in rules for key in RULE_KEYS)
    if entries > MAX_ENTRIES:
        raise PolicyError(
            f"a policy's rules name at most {MAX_ENTRIES} tenants, groups, subjects and skills "
            f"together; these name {entries}",
            details=[{"field": "rules", "problem": f"more than {MAX_ENTRIES} names"}],
        )
    return tuple(rules)


def _agent_id(agent_id: Any) -> str:
    if isinstance(agent_id, str) and 0 < len(agent_id) <= MAX_AGENT_ID:
        return agent_id
    raise PolicyError(
        f"an agent id is a string of 1 to {MAX_AGENT_ID} characters",
        details=[{"field": "agent_id", "problem": "not an agent id"}],
    )


def _policy(row: AgentPolicyRow) -> Policy:
    rules = tuple(
        Rule(**{key: tuple(rule.get(key, ())) for key in RULE_KEYS}) for rule in row.rules
    )
    return Policy(row.agent_id, row.tenant, rules, as_utc(row.updated_at), row.updated_by)


# --- the policies ----------------------------------------------------------------------------


class Policies(Synced):
    """Every agent's policy in memory, over the ``agent_policies`` table.

    ``enforced`` (default: client authentication is on, ``settings.client_auth != "none"``)
    False lets every caller see and use everything. Queries are synchronous and read memory
    only; writes go to the database first, then reload.
    """

    VERSION_KEY = VERSION_KEY

    def __init__(self, store: Store, settings: Settings, *, enforced: bool | None = None) -> None:
        self.store = store
        self.enforced = settings.client_auth != "none" if enforced is None else enforced
        self.default_allow = settings.agent_access == "allow"
        self.version = -1
        self._policies: dict[str, Policy] = {}

    # --- queries (no database) -------------------------------------------------------------

    def get(self, agent_id: str) -> Policy | None:
        """The stored policy of ``agent_id``, or None (shared, no rules)."""
        return self._policies.get(agent_id)

    def all(self) -> list[Policy]:
        """Every stored policy, by agent id."""
        return [self._policies[key] for key in sorted(self._policies)]

    def visible(self, principal: Principal, agent_id: str) -> bool:
        """Whether ``principal`` may see the agent: it is shared or of the caller's tenant
        (admins and readers see all; everyone does when not enforced)."""
        if not self.enforced or principal.is_reader:
            return True
        return self._in_tenant(principal, self._policies.get(agent_id))

    def usable(self, principal: Principal, agent_id: str, skill_id: str | None = None) -> bool:
        """Whether ``principal`` may use ``skill_id`` of the agent, or (None) the agent at
        all: for a pass-through call or a task it owns, true when any skill is granted."""
        if not self.enforced or principal.is_admin:
            return True
        policy = self._policies.get(agent_id)
        if not self._in_tenant(principal, policy):
            return False
        if policy is None or not policy.rules:
            return self.default_allow
        return any(rule.matches(principal) and rule.grants(skill_id) for rule in policy.rules)

    def usable_skills(
        self, principal: Principal, agent_id: str, skill_ids: Iterable[str]
    ) -> set[str]:
        """Those of ``skill_ids`` that ``principal`` may use on the agent."""
        wanted = set(skill_ids)
        if not self.enforced or principal.is_admin:
            return wanted
        policy = self._policies.get(agent_id)
        if not self._in_tenant(principal, policy):
            return set()
        if policy is None or not policy.rules:
            return wanted if self.default_allow else set()
        granted: set[str] = set()
        for rule in policy.rules:
            if rule.matches(principal):
                if not rule.skills:
                    return wanted
                granted.update(rule.skills)
        return wanted & granted

    @staticmethod
    def _in_tenant(principal: Principal, policy: Policy | None) -> bool:
        return policy is None or policy.tenant is None or policy.tenant == principal.tenant

    # --- loading and replicas ----------------------------------------------------------------

    async def load(self) -> None:
        """Create the counter if missing and read every policy (at start)."""
        await self.create_counter()
        await self._reload()

    async def _reload(self) -> None:
        async with self.store.session() as session:
            state = await session.get(CatalogStateRow, VERSION_KEY)  # first: never ahead
            rows = (await session.exec(select(AgentPolicyRow))).all()
        self._policies = {row.agent_id: _policy(row) for row in rows}
        self.version = state.value if state else 0

    # --- writes ------------------------------------------------------------------------------

    async def put(
        self,
        agent_id: str,
        tenant: str | None,
        rules: Sequence[Rule | Mapping[str, Any]],
        by: str,
    ) -> Policy:
        """Set (create or replace) the policy of ``agent_id``; ``by`` says who (for the
        record). Checks the values (:class:`PolicyError`), not whether the agent exists."""
        agent_id = _agent_id(agent_id)
        tenant = parse_tenant(tenant)
        parsed = parse_rules(rules)
        stored = [rule.to_api() for rule in parsed]
        for attempt in range(2):
            try:
                async with self.store.session() as session, session.begin():
                    now = utcnow()
                    row = await session.get(AgentPolicyRow, agent_id)
                    if row is None:
                        row = AgentPolicyRow(agent_id=agent_id, created_at=now, updated_at=now)
                    row.tenant, row.rules = tenant, stored
                    row.updated_at, row.updated_by = now, by[:MAX_NAME]
                    session.add(row)
                    await bump(session, VERSION_KEY)
                break
            except IntegrityError:  # another process created it at the same moment: update
                if attempt:
                    raise
        log.info("policy of agent %s set by %s", agent_id, by)
        await self._reload()
        policy = self._policies.get(agent_id)
        assert policy is not None, "a policy just written is read back"
        return policy

    async def delete(self, agent_id: str, by: str) -> bool:
        """Delete the policy of ``agent_id`` (the agent becomes shared, without rules);
        False if it had none. ``by`` says who, for the log."""
        async with self.store.session() as session, session.begin():
            result = await session.exec(
                delete(AgentPolicyRow).where(col(AgentPolicyRow.agent_id) == agent_id)
            )
            if not result.rowcount:  # type: ignore[attr-defined]
                return False
            await bump(session, VERSION_KEY)
        log.info("policy of agent %s deleted by %s", agent_id, by)
        await self._reload()
        return True
