"""The evaluation set: agent cards and messages as people write them, split in two halves.

``cards/*.json`` are the catalog (A2A 0.3 and 1.0 card shapes); ``messages_*.jsonl`` hold one
message a line: ``id``, ``text``, the right ``agent`` (null: no agent serves it) and
``skill``, optional ``files`` (``{"mediaType", "name"}``) and ``accepted_output_modes``, and
``kind`` tags (paraphrase, typo, indirect, long, terse, media, output-mode, ood, near-ood).
The half of a message is fixed by a hash of its id (:func:`half`), never chosen by hand:
``dev`` is fitted on, ``test`` is reported.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
Half = Literal["dev", "test"]


@dataclass(frozen=True)
class Message:
    """One evaluation message and the agent that should get it (None: refuse)."""

    id: str
    text: str
    agent: str | None
    skill: str | None
    files: tuple[dict[str, str], ...] = ()
    accepted_output_modes: tuple[str, ...] = ()
    kind: tuple[str, ...] = field(default=())

    @property
    def half(self) -> Half:
        """The half this message belongs to."""
        return half(self.id)

    @property
    def in_domain(self) -> bool:
        """Whether some agent should get it."""
        return self.agent is not None

    @property
    def media_decided(self) -> bool:
        """Whether an attachment or the accepted output modes decide it."""
        return bool(self.files or self.accepted_output_modes) and self.in_domain

    def params(self) -> dict[str, Any]:
        """``SendMessage`` params (A2A 1.0) carrying the text, the files and the modes."""
        parts: list[dict[str, Any]] = [{"text": self.text}] if self.text else []
        for n, f in enumerate(self.files):
            name = f.get("name") or f"file{n}"
            parts.append(
                {
                    "url": f"https://files.example.com/{name}",
                    "mediaType": f["mediaType"],
                    "filename": name,
                }
            )
        params: dict[str, Any] = {
            "message": {"role": "ROLE_USER", "messageId": self.id, "parts": parts}
        }
        if self.accepted_output_modes:
            params["configuration"] = {"acceptedOutputModes": list(self.accepted_output_modes)}
        return params


def half(message_id: str) -> Half:
    """``dev`` or ``test``, from a hash of the id."""
    return "dev" if hashlib.sha256(message_id.encode()).digest()[0] % 2 == 0 else "test"


def cards(root: Path = HERE) -> dict[str, dict[str, Any]]:
    """The catalog: agent id (the file name) -> card JSON."""
    return {p.stem: json.loads(p.read_text()) for p in sorted((root / "cards").glob("*.json"))}


def messages(root: Path = HERE) -> list[Message]:
    """Every message of every ``messages_*.jsonl`` file, in file order."""
    out = []
    for path in sorted(root.glob("messages_*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            out.append(
                Message(
                    id=row["id"],
                    text=row["text"],
                    agent=row.get("agent"),
                    skill=row.get("skill"),
                    files=tuple(row.get("files") or ()),
                    accepted_output_modes=tuple(row.get("accepted_output_modes") or ()),
                    kind=tuple(row.get("kind") or ()),
                )
            )
    return out
