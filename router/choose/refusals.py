"""What the router answers when matching finds no agent for a message.

- :func:`closest_rows`: the candidates a ``-32050`` lists as the closest skills, found by
  looking at the best-scored skills first instead of at every skill.
- :func:`content_type_refusal`: ``-32005`` ContentTypeNotSupported instead of ``-32050`` when
  content types are the reason: some skill would take the call but for the media types of
  its parts or the ``acceptedOutputModes``.
- :func:`default_route`: the optional default route (``SWITCHBOARD_DEFAULT_AGENT``, and
  ``SWITCHBOARD_DEFAULT_SKILL``): where a message no tier was confident about goes, if that
  agent can take the call.

Both follow a refusal, which is no rare event (a message no skill is about): they stop at
the first skill that settles the question, and look at every skill only when none does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from registry import mediatypes
from router.choose.choice import CLOSEST, Candidate, Choice, Evaluator
from router.choose.skillindex import SkillIndex
from router.protocol import payloads as wire
from router.protocol.errors import CONTENT_TYPE, NO_MATCHING_AGENT, RpcError
from router.protocol.versions import Op, Version


def closest_rows(
    matcher: Evaluator,
    index: SkillIndex,
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    query: str,
) -> list[tuple[int, Candidate]] | None:
    """The candidates of a message no skill takes (by words, at ``matcher.threshold``) that
    :func:`~router.choose.choice.closest` draws from, as if every row had been evaluated:
    the skills in descending score until :data:`CLOSEST` of routable agents and the rest of
    the last one's agent's skills tied with it are known (ties come in row order, which is
    agent id order: a later agent's tied skills rank after), then, if the words matched too
    few, the unmatched skills (score 0) in agent and skill id order. None when a score is
    not positive (the caller evaluates every row then)."""
    threshold = matcher.threshold
    out: list[tuple[int, Candidate]] = []
    listed, last, last_agent = 0, None, None

    def look(n: int, score: float) -> None:
        nonlocal listed, last, last_agent
        for found in matcher.evaluate(
            index, [n], version, op, media, accepted, {n: score}, threshold, skill_less=False
        ):
            out.append(found)
            c = found[1]
            if c.skill_id is not None and matcher.registry.routable(index.rows[n].agent):
                listed += 1
                if listed == CLOSEST:
                    last, last_agent = c.score, c.agent_id

    matched: set[int] = set()
    for n, score in index.text.ranked(query):
        if round(score, 6) <= 0:  # ranked with the unmatched skills: not this shortcut's
            return None
        if last is not None and (round(score, 6) < last or index.rows[n].agent.id != last_agent):
            return out
        matched.add(n)
        look(n, score)
    for rows in index.by_agent.values():  # agents in id order (the snapshot's)
        unmatched = [n for n in rows if n not in matched and index.rows[n].skill is not None]
        for n in sorted(unmatched, key=lambda n: index.rows[n].skill.id):  # type: ignore[union-attr]
            if listed >= CLOSEST:
                return out
            look(n, 0.0)
    return out


def content_type_refusal(
    matcher: Evaluator,
    index: SkillIndex,
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    refusal: RpcError,
) -> RpcError | None:
    """-32005 instead of the ``refusal`` when content types are why no agent can take the
    call; None when they are not."""
    if not media and not accepted:
        return None

    def fitting(media: list[str], accepted: list[str], first: bool = True) -> list[int]:
        """The rows that could take the call with these media types: only the first found
        (``first``: is there any?), or all."""
        found: list[int] = []
        for start in range(0, len(index.rows), _CHUNK):
            rows = range(start, min(start + _CHUNK, len(index.rows)))
            evaluated = matcher.evaluate(
                index, rows, version, op, media, accepted, {}, None, skill_less=False
            )
            found.extend(n for n, c in evaluated if c.kept)
            if found and first:
                break
        return found

    if fitting(media, accepted):
        return None
    takers = [index.rows[n].skill for n in fitting([], [], first=False)]
    if not takers:
        return None
    facts: dict[str, Any] = {"reason": "content type"}
    problems = []
    if media and not fitting(media, []):
        others = [m for m in media if not mediatypes.matches(m, "text/plain")]
        types = sorted(set(others or media))  # text next to other parts: their instruction
        facts["mediaTypes"] = types
        facts["acceptedInputModes"] = _modes(s.input_modes for s in takers if s)
        problems.append(f"no agent accepts {', '.join(types)}")
    if accepted and not fitting([], accepted):
        facts["acceptedOutputModes"] = accepted
        facts["outputModes"] = _modes(s.output_modes for s in takers if s)
        problems.append(f"no agent outputs any of {', '.join(accepted)}")
    if not problems:  # each filter alone leaves some skill, both together none
        problems.append("no agent both accepts these media types and outputs one of these")
    facts.update((k, v) for k, v in (refusal.data or {}).items() if k == "closest")
    return RpcError(
        CONTENT_TYPE,
        f"Incompatible content types: {'; '.join(problems)}; data says what the skills "
        "that could take this call accept and output",
        facts,
    )


def default_route(
    matcher: Evaluator,
    index: SkillIndex,
    target: tuple[str | None, str | None],
    version: Version,
    op: Op,
    params: Mapping[str, Any],
    refusal: RpcError,
) -> Choice | None:
    """The default route's choice for a call no tier was confident about (``refusal``): the
    agent (and skill, if set) of ``target``, or None when no default is set or the refusal is
    not a no-match. The default must pass the hard filters; if it cannot take the call,
    RpcError: the ``refusal`` saying why in ``data.defaultRoute``."""
    agent_id, skill_id = target
    if agent_id is None or refusal.code != NO_MATCHING_AGENT or agent_id not in index.by_agent:
        return None  # no default route, or not one this caller may use
    message = wire.message_of(version, params)
    media = wire.part_media_types(version, message)
    accepted = list(wire.accepted_output_modes(version, params))
    rows = [
        n
        for n in index.by_agent.get(agent_id, ())
        if skill_id is None or ((skill := index.rows[n].skill) is not None and skill.id == skill_id)
    ]
    evaluated = matcher.evaluate(
        index, rows, version, op, media, accepted, {}, None, skill_less=True
    )
    kept = [(n, c) for n, c in evaluated if c.kept]
    if not kept:
        reasons = [c.reason for _, c in evaluated] or ["no such agent or skill in the catalog"]
        data = refusal.data if isinstance(refusal.data, dict) else {}
        named = agent_id + (f"/{skill_id}" if skill_id else "")
        raise RpcError(
            refusal.code,
            refusal.message,
            {**data, "defaultRoute": {"agent": named, "reason": reasons[0]}},
        )
    n, best = min(kept, key=lambda item: index.rows[item[0]].position)
    why = (
        "the default route (SWITCHBOARD_DEFAULT_AGENT): no other tier was confident "
        f"({refusal.message})"
    )
    decision = matcher.finish(
        index, n, best, [c for _, c in evaluated], "match", why, version, tier="default"
    )
    assert decision.choice is not None
    return decision.choice


_CHUNK = 64  # skills checked at a time while looking for one that fits


def _modes(lists: Iterable[Iterable[str]]) -> list[str]:
    """The union of media type lists, sorted (an empty list: anything), at most 50."""
    found = {m for modes in lists for m in (tuple(modes) or ("*/*",))}
    return sorted(found)[:50]
