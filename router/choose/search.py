"""Catalog search by meaning, scored by the router: the registry's hook
:data:`registry.appkeys.SEARCH_BY_MEANING` (set by :mod:`router.app`).

A search text is scored as a routed message's text is: embedded once through the semantic
tier's message-vector cache and batches (:meth:`router.choose.semantic.Semantic.query_vector`),
then every skill of the current catalog snapshot gets the fused score routing ranks by
(:meth:`router.choose.semantic.Semantic.scores`: the skill's document, its examples and
learned examples, its agent's description, fused with the words in common; on [0, 1]).
Skills under the threshold routing refuses under (:meth:`Matcher.cutoff`: the calibrated
one, or ``SWITCHBOARD_MATCH_THRESHOLD``) are left out. Agents without skills are
never found (routing never matches them either). The registry filters, ranks and pages the
rest (:mod:`registry.meaningsearch`).

While some skills wait for their vectors (the catalog is being embedded at start, or a card
registered or changed a moment ago), a search goes by words: those skills would score by
their words alone, far below the others, and not be found.
"""

from __future__ import annotations

import numpy as np

from registry.meaningsearch import ScoreByMeaning, Scored, Unavailable
from router.choose.matcher import Matcher
from router.choose.meaning import pending_vectors
from router.choose.skillindex import MAX_QUERY_CHARS

__all__ = ["search_by_meaning"]

_ROUNDING = 1e-6  # scores are compared with the floor after rounding to 6 places, as routing's


def search_by_meaning(matcher: Matcher) -> ScoreByMeaning:
    """The hook for ``matcher``: a text -> the skills it finds by meaning, or why it cannot
    be scored (no model: the matcher's status; skills not embedded yet; the text's embedding
    failed)."""

    async def score(text: str) -> Scored | Unavailable:
        semantic = matcher.semantic
        if semantic is None:
            return Unavailable(matcher.status)
        text = text[:MAX_QUERY_CHARS]
        vector = await semantic.query_vector(text)
        if vector is None:
            return Unavailable(f"the text could not be embedded: {semantic.failure}")
        index = matcher.skill_index()  # after the await: the snapshot of now
        pending = pending_vectors(semantic, index)
        if pending:
            return Unavailable(
                f"{pending} skill(s) not embedded yet (registered or changed a moment ago)"
            )
        scores = semantic.scores(index, vector, text)
        floor = matcher.cutoff().threshold  # what routing refuses under
        found: dict[tuple[str, int], float] = {}
        for n in np.flatnonzero(scores >= floor - _ROUNDING).tolist():
            row, value = index.rows[n], round(float(scores[n]), 6)
            if row.skill is not None and value >= floor:
                found[(row.agent.id, row.position)] = value
        return Scored(index.snapshot, found, floor)

    return score
