"""registry.rows: the values written for an agent name every column of their tables, and the
ORM rows built from them hold the same values."""

from __future__ import annotations

from registry.records import AgentRecord
from registry.rows import agent_row, agent_values, child_values, revision_row, revision_values
from registry.tables import (
    AgentRow,
    CardRevisionRow,
    InterfaceRow,
    SkillModeRow,
    SkillRow,
    SkillTagRow,
)
from tests.support.helpers import card_v1, make_record


def _record() -> tuple[AgentRecord, bytes]:
    card = card_v1("https://w.example", description="Prévisions ✓")
    card["skills"][0]["examples"] = ["what is the weather"]
    return make_record("wx", card, "https://w.example")


def _columns(model: type) -> set[str]:
    return {c.key for c in model.__table__.columns if c.key != "pk"}  # type: ignore[attr-defined]


def test_the_values_name_every_column_and_match_the_orm_rows() -> None:
    record, raw = _record()
    values = agent_values(record, raw)
    assert set(values) == _columns(AgentRow)
    assert agent_row(record, raw).model_dump() == values
    revision = revision_values(record, raw, {"changed": ["name"]})
    assert set(revision) == _columns(CardRevisionRow)
    assert revision_row(record, raw, {"changed": ["name"]}).model_dump(exclude={"pk"}) == revision


def test_the_index_rows_of_every_interface_skill_tag_and_mode() -> None:
    record, _ = _record()
    children = child_values(record)
    models = (InterfaceRow, SkillRow, SkillTagRow, SkillModeRow)
    assert list(children) == [m.__table__ for m in models]  # type: ignore[attr-defined]
    for model in models:
        rows = children[model.__table__]  # type: ignore[attr-defined]
        assert rows and all(set(row) == _columns(model) for row in rows), model
    skills = record.card.skills
    assert [r["skill_id"] for r in children[SkillRow.__table__]] == [s.id for s in skills]  # type: ignore[attr-defined]
    assert children[SkillRow.__table__][0]["examples"] == ["what is the weather"]  # type: ignore[attr-defined]
    tags = [(r["skill_id"], r["position"], r["tag"]) for r in children[SkillTagRow.__table__]]  # type: ignore[attr-defined]
    assert tags == [(s.id, m, t) for s in skills for m, t in enumerate(s.tags)]
    modes = children[SkillModeRow.__table__]  # type: ignore[attr-defined]
    assert [(r["direction"], r["media_type"]) for r in modes] == [
        (d, mode)
        for s in skills
        for d, media in (("input", s.input_modes), ("output", s.output_modes))
        for mode in media
    ]
