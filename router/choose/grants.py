"""What one caller may use: a :class:`Grant` (its agents and skills) and the matcher's view of
the skill index through it (:class:`GrantedIndex`).

Routing, the router's card, explain and the no-match errors only ever consider what the
caller's grant allows: a hidden agent or skill is not a candidate dropped with a reason, it is
not there at all.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from registry.access.policy import Policies
from registry.access.principal import Principal
from registry.textsearch import TextIndex
from router.choose.skillindex import Row, SkillIndex

__all__ = ["EVERYTHING", "Grant", "GrantedIndex", "policy_grants"]


@dataclass(frozen=True)
class Grant:
    """What a caller may use: ``allows(agent_id, skill_id)`` (``skill_id`` None: the agent
    itself, e.g. a task's owner or a per-agent endpoint). ``key`` identifies the grant for
    caches (equal keys: equal answers); None for :data:`EVERYTHING`."""

    key: Hashable
    allows: Callable[[str, str | None], bool] = field(compare=False)

    @property
    def unlimited(self) -> bool:
        """Whether this grant allows everything (no view needed)."""
        return self.key is None


EVERYTHING = Grant(None, lambda agent_id, skill_id: True)
"""The grant of a caller who may use every agent (client authentication off, an admin)."""


def policy_grants(policies: Policies) -> Callable[[Principal], Grant]:
    """The grant of each caller under ``policies`` (everything when they are not enforced,
    for admins too); its key changes with the policies' version."""

    def grant(principal: Principal) -> Grant:
        if not policies.enforced or principal.is_admin:
            return EVERYTHING
        key = (
            policies.version, principal.tenant, principal.subject,
            principal.groups, principal.roles,
        )  # fmt: skip
        return Grant(key, lambda agent_id, skill_id: policies.usable(principal, agent_id, skill_id))

    return grant


class GrantedIndex(SkillIndex):
    """A :class:`SkillIndex` as one grant sees it: the same rows and text index (row numbers
    are the base's), with ``by_agent`` and ``by_skill`` holding only the rows the grant
    allows and :meth:`allowed` saying whether a row is one of them."""

    def __init__(self, base: SkillIndex, grant: Grant) -> None:  # no super(): nothing to build
        self._base = base
        self.snapshot = base.snapshot
        self.rows: list[Row] = base.rows
        self.text: TextIndex = base.text
        self.pairs = base.pairs
        self._allowed: set[int] = set()
        self.by_agent: dict[str, list[int]] = {}
        self.by_skill: dict[str, list[int]] = {}
        for agent_id, rows in base.by_agent.items():
            if not grant.allows(agent_id, None):
                continue
            for n in rows:
                skill = base.rows[n].skill
                if skill is None or grant.allows(agent_id, skill.id):
                    self._allowed.add(n)
                    self.by_agent.setdefault(agent_id, []).append(n)
                    if skill is not None:
                        self.by_skill.setdefault(skill.id, []).append(n)

    @property
    def base(self) -> SkillIndex:
        """The whole index this view is of."""
        return self._base

    def allowed(self, n: int) -> bool:
        """Whether row ``n`` is the grant's to use."""
        return n in self._allowed
