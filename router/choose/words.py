"""Matching by words: a message's skills ranked by BM25 alone (``SWITCHBOARD_MATCHER=lexical``,
or tier ``lexical-fallback`` while the model or the vectors are missing), and which words of a
message count at all.

The best skill that can take the call must score at least the lexical threshold (the
matcher's ``threshold``); ties go to an agent already serving the conversation, then to the
smallest agent id. A message without content words (:func:`content_words`: none left after
the search's stop words and :data:`FILLERS`) is routed by its media types alone: a message of
text only gets ``-32050`` reason ``no content`` (:func:`no_content`); a message with other
parts goes to the one agent accepting them, or the one of those already serving the
conversation.
"""

from __future__ import annotations

from functools import lru_cache

from registry import mediatypes
from registry.textsearch import tokenize
from router.choose.choice import (
    CLOSEST,
    ROUTING_EXTENSION,
    Candidate,
    Decision,
    Evaluator,
    closest,
    rank_key,
    ranked,
)
from router.choose.refusals import closest_rows
from router.choose.skillindex import SkillIndex
from router.protocol.errors import NO_MATCHING_AGENT, RpcError
from router.protocol.versions import Op, Version

FILLERS = frozenset(
    tokenize(
        "hi hello hey hiya howdy yo greetings dear good morning afternoon evening night "
        "thanks thank thx ty cheers welcome sorry ok okay yes yeah yep no nope sure great "
        "cool nice fine bye goodbye hmm um uh lol anyone there again so just very much all "
        "help need want question something anything thing we us our do does did am was "
        "were"
    )
)
"""Greetings, thanks and fillers (tokenized like the search's words): they never make a
message routable on their own ("hi", "thanks!", "hello, anyone there?")."""

NO_CONTENT = "the message has no words to route by"


@lru_cache(maxsize=4096)
def search_words(query: str) -> tuple[str, ...]:
    """The search words of a message text (:func:`registry.textsearch.tokenize`: stop words
    and lone letters or digits left out), computed once for the chooser and the matcher."""
    return tuple(tokenize(query))


def content_words(query: str) -> list[str]:
    """The words of a message text that can route it: its search words that are not
    :data:`FILLERS`."""
    return [word for word in search_words(query) if word not in FILLERS]


def no_content(candidates: list[Candidate]) -> Decision:
    """The refusal of a message of text only without content words (``-32050``, reason
    ``no content``): no candidate is taken, whatever it accepts."""
    why = "The message has no words to route by."
    candidates = [c.but(kept=False, reason=why) if c.kept else c for c in candidates]
    error = RpcError(
        NO_MATCHING_AGENT,
        f"no agent can take this message: {NO_CONTENT}; say what you need, or name a skill "
        "or agent with the routing extension",
        {"reason": "no content", "tier": "refused", "extension": ROUTING_EXTENSION},
    )
    return Decision(None, error, ranked(candidates))


def best_scored(
    matcher: Evaluator,
    index: SkillIndex,
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    query: str,
) -> list[tuple[int, Candidate]]:
    """Candidates in descending score (at or above the threshold), evaluated until the
    first one that can take the call, every other with its score and at least
    :data:`CLOSEST` in all; none kept if none can take it."""
    out: list[tuple[int, Candidate]] = []
    best: float | None = None
    threshold = matcher.threshold
    for n, score in index.text.ranked(query):
        score = round(score, 6)
        if score < threshold:
            break
        if best is not None and score < best and len(out) >= CLOSEST:
            break  # the choice and a few runners-up, for the record
        found = matcher.evaluate(
            index, [n], version, op, media, accepted, {n: score}, threshold, skill_less=False
        )
        out += found
        if best is None and found and found[0][1].kept:
            best = found[0][1].score
    return out


def by_words(
    matcher: Evaluator,
    index: SkillIndex,
    query: str,
    has_words: bool,
    version: Version,
    op: Op,
    media: list[str],
    accepted: list[str],
    context_agents: frozenset[str],
    complete: bool = True,
) -> Decision:
    """The decision by words alone (see the module docs); ``complete``: every skill is a
    candidate in the answer (explain), else only those the choice can fall on."""
    threshold = matcher.threshold if has_words else None
    text_only = all(mediatypes.matches(m, "text/plain") for m in media)
    if not has_words and text_only and not complete:
        return no_content([])  # nothing to route by: no candidate needs a look
    if has_words and matcher.threshold > 0 and not complete:
        # only the best-scoring skills that can take the call, and those tied with the
        # best of them, need a look: a choice costs no more than a few candidates
        evaluated = best_scored(matcher, index, version, op, media, accepted, query)
    else:
        scores = index.text.scores(query) if has_words else {}
        rows = range(len(index.rows))
        evaluated = matcher.evaluate(
            index, rows, version, op, media, accepted, scores, threshold, skill_less=False
        )
    kept = [(n, c) for n, c in evaluated if c.kept]
    if not kept and not complete:
        # no match: the error lists the closest skills, scored or not
        found = closest_rows(matcher, index, version, op, media, accepted, query)
        if found is None:  # a score the shortcut cannot order: every row
            return by_words(
                matcher, index, query, has_words, version, op, media, accepted,
                context_agents, True,
            )  # fmt: skip
        evaluated = found
    candidates = [c for _, c in evaluated]
    if not has_words and text_only:
        return no_content(candidates)  # only text, and no word of it routes: never a guess
    decision = _by_words(matcher, index, evaluated, kept, has_words, query, version, media,
                         accepted, context_agents)  # fmt: skip
    if has_words:
        decision.context["scored"] = "words"  # explain: the lexical threshold decided
    return decision


def _by_words(
    matcher: Evaluator,
    index: SkillIndex,
    evaluated: list[tuple[int, Candidate]],
    kept: list[tuple[int, Candidate]],
    has_words: bool,
    query: str,
    version: Version,
    media: list[str],
    accepted: list[str],
    context_agents: frozenset[str],
) -> Decision:
    """The decision among the evaluated candidates (see :func:`by_words`)."""
    candidates = [c for _, c in evaluated]
    if not kept:
        hidden = has_words and hidden_reaches(index, query, matcher.threshold)
        refusal = matcher.no_match(
            index, candidates, has_words, media=media, accepted=accepted, hidden=hidden
        )
        return Decision(None, refusal, ranked(candidates))
    best_n, best = min(kept, key=lambda item: rank_key(item, index, context_agents))
    if has_words:
        rivals = [c for _, c in kept if c.agent_id != best.agent_id and c.score == best.score]
        why = f"it has the best score by words ({best.score:g}; threshold {matcher.threshold:g})"
        if rivals and best.agent_id in context_agents:
            why += ", tied, and its agent already serves this conversation"
        elif rivals:
            why += ", tied, and its agent comes first by id"
        return matcher.finish(index, best_n, best, candidates, "match", why, version)
    agents = sorted({c.agent_id for _, c in kept})
    serving = [a for a in agents if a in context_agents]
    if len(agents) == 1:
        why = "it is the only agent accepting these media types (the message has no words)"
    elif len(serving) == 1:
        best_n, best = min(
            ((n, c) for n, c in kept if c.agent_id == serving[0]),
            key=lambda item: index.rows[item[0]].position,
        )
        why = "it already serves this conversation (the message has no words)"
    else:
        error = RpcError(
            NO_MATCHING_AGENT,
            f"no agent can take this message: it has no words to route by and {len(agents)} "
            "agents accept its media types; name a skill or agent with the routing extension",
            {
                "reason": "ambiguous",
                "tier": "refused",
                "extension": ROUTING_EXTENSION,
                "agents": agents,
                "closest": closest(candidates, matcher.registry, index),
            },
        )
        return Decision(None, error, ranked(candidates))
    return matcher.finish(index, best_n, best, candidates, "match", why, version)


def hidden_reaches(index: SkillIndex, query: str, threshold: float) -> bool:
    """Whether a skill the caller may not use (outside its grant's view of ``index``)
    scores at least ``threshold`` by words."""
    if index.base is index:
        return False  # the whole index: nothing hidden
    for n, score in index.text.ranked(query):
        if round(score, 6) < threshold:
            return False
        if n < len(index.rows) and not index.allowed(n) and index.rows[n].skill is not None:
            return True
    return False
