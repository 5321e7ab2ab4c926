"""The byte relay: an agent's stream event passed to the client as the agent wrote it, with
only its task and context IDs swapped for the router's, when that gives the client exactly
what the parsed path (:mod:`router.ids.rewrite`, then a fresh serialization) would.

:class:`FastPath` follows one stream whose client and agent speak the same version and
dialect. The events that can change something go through the parsed path, which tells
:meth:`FastPath.seen` what they named (the rewriter learns their IDs, the path their task
states). A later event is relayed as bytes (:meth:`FastPath.relay`) only when all of this
holds, else it takes the parsed path:

* its JSON-RPC envelope is exactly ``jsonrpc``/``id``/``result``, the ``id`` the client's;
* it is an artifact update, or a status update in the state its task was last seen in (not
  terminal, not 0.3 ``final``: the parsed path records states and ends streams);
* every place the parsed path rewrites (``taskId`` and ``contextId`` of the update and of a
  status message) holds an ID the stream already maps, or nothing; no ``referenceTaskIds``;
* each of those IDs, as the JSON string ``"<id>"``, appears in the data exactly as many
  times as in those places (an ID the agent also wrote in a text, a data part, metadata or
  a key stays as it is on the parsed path, so such an event is not relayed as bytes);
* the data is one line with no character a client could read as a line break.

Then ``"<upstream id>"`` becomes ``"<router id>"`` by plain replacement: the client's event
parses to the same JSON as the parsed path's (key order, whitespace, number spelling and
``\\u`` escapes may differ).

An event relayed so teaches the path its shape (:mod:`router.forward.eventshape`). A later
event of the same shape (only free texts differ: the parts, texts and data that the checks
above do not read) is relayed by :meth:`FastPath.quick` before it is parsed at all, after the
checks that read its whole text: the count of each ID, the line breaks, and for a status
update the state its task is in now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from router.forward.call import Frames
from router.forward.eventshape import Shape, split
from router.forward.sse import SseEvent
from router.protocol.events import event_payload, event_task_state, stream_event_kind
from router.protocol.versions import Version, is_terminal_state

__all__ = ["FastPath", "RawAnswer", "plain_id", "replace_ids", "unparsed"]

_UPDATES = ("status-update", "artifact-update")
_ENVELOPE = frozenset({"jsonrpc", "id", "result"})
# characters str.splitlines() breaks at (httpx aiter_lines(), used by SDK clients) besides
# CR and LF; in valid JSON the ASCII ones cannot occur raw, the others can inside strings
_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")
_SHAPES = 8  # shapes remembered per stream (an agent's events come in a few)


class _Learned:
    """A relayed event's shape and what relaying it took."""

    __slots__ = ("matches", "state", "swaps", "task")

    def __init__(
        self, shape: Shape, swaps: dict[str, str], counts: dict[str, int], update: dict[str, Any]
    ) -> None:
        self.matches = shape.matches
        # '"<upstream id>"', its count in the text, '"<router id>"'
        self.swaps = tuple((f'"{up}"', counts[up], f'"{router}"') for up, router in swaps.items())
        self.state = _state(update)  # a status update's state, and its upstream task
        self.task = update.get("taskId") if self.state is not None else None


class RawAnswer(dict[str, Any]):
    """A JSON-RPC response object parsed from an SSE event, with :attr:`raw`: the event's
    data as text (what was parsed)."""

    __slots__ = ("raw",)

    def __init__(self, obj: Mapping[str, Any], raw: str) -> None:
        super().__init__(obj)
        self.raw = raw


def plain_id(value: str) -> bool:
    """An ID that JSON writes one way only and whose JSON string cannot overlap another's:
    printable, without quotes or backslashes (``json.dumps`` would escape nothing)."""
    return value.isprintable() and '"' not in value and "\\" not in value


def replace_ids(data: str, swaps: Mapping[str, str]) -> str:
    """``data`` with every JSON string ``"<key>"`` of ``swaps`` replaced by ``"<value>"``
    (keys and values :func:`plain_id`, no value equal to another key)."""
    for upstream, router in swaps.items():
        data = data.replace(f'"{upstream}"', f'"{router}"')
    return data


def unparsed(
    events: list[SseEvent | str], quick: Callable[[str], bytes | None] | None
) -> Iterator[SseEvent | Frames]:
    """An upstream chunk's events (:meth:`~router.forward.sse.SseParser.feed_data`), those
    that ``quick`` (:meth:`FastPath.quick`) relays as bytes gathered, in order, into
    :class:`Frames`; the others to parse. Lazily: an event is looked at only once those
    before it are consumed (a parsed event can change what ``quick`` relays)."""
    relayed: list[bytes] = []
    for event in events:
        if type(event) is str:
            data = quick(event) if quick is not None else None
            if data is None:
                event = SseEvent("message", event)
        elif quick is not None and event.event == "message":  # type: ignore[union-attr]
            data = quick(event.data)  # type: ignore[union-attr]
        else:
            data = None
        if data is not None:
            relayed.append(data)
            continue
        if relayed:
            yield Frames(relayed)
            relayed = []
        yield event  # type: ignore[misc]
    if relayed:
        yield Frames(relayed)


class FastPath:
    """The byte relay of one stream (see the module docstring).

    ``tasks`` and ``contexts`` are the stream's rewriter's maps (upstream ID -> router ID),
    read live; ``request_id`` the client's JSON-RPC id (not None); ``enabled`` says whether
    the transport takes bytes now (when not, nothing is relayed as bytes).
    """

    def __init__(
        self,
        version: Version,
        request_id: Any,
        tasks: Mapping[str, str],
        contexts: Mapping[str, str],
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        self.version = version
        self.request_id = request_id
        self.tasks = tasks
        self.contexts = contexts
        self.enabled = enabled
        self.relayed = 0  # events relayed as bytes
        self.unparsed = 0  # of which recognized by their shape, never parsed
        self._states: dict[str, str] = {}  # upstream task id -> state last seen
        self._learned: list[_Learned] = []

    def quick(self, data: str) -> bytes | None:
        """The client's bytes for an event's data (its JSON text, not parsed yet) when it has
        the shape of one relayed before; None: parse it."""
        if not self._learned or not self.enabled():
            return None
        for learned in self._learned:
            if learned.matches(data):
                break
        else:
            return None
        if learned.task is not None and self._states.get(learned.task) != learned.state:
            return None
        for quoted, count, _ in learned.swaps:
            if data.count(quoted) != count:
                return None
        if "\n" in data or (not data.isascii() and any(c in data for c in _BREAKS)):
            return None
        self.relayed += 1
        self.unparsed += 1
        for quoted, _, router in learned.swaps:
            data = data.replace(quoted, router)
        return data.encode()

    def seen(self, answer: Mapping[str, Any]) -> None:
        """An event that took the parsed path: remember its task's state."""
        task_id, state = event_task_state(self.version, answer)
        if task_id is not None and state is not None:
            self._states[task_id] = state

    def relay(self, answer: Any) -> bytes | None:
        """The client's bytes for ``answer`` (a :class:`RawAnswer`), or None: parse it."""
        raw = getattr(answer, "raw", None)
        if raw is None or answer.keys() != _ENVELOPE or answer["jsonrpc"] != "2.0":
            return None
        rid = answer["id"]
        if type(rid) is not type(self.request_id) or rid != self.request_id:
            return None
        result = answer["result"]
        found = self._payload(result) if isinstance(result, dict) else None
        if found is None or not self._steady(*found):
            return None
        update = found[0]
        expected: dict[str, int] = {}
        swaps: dict[str, str] = {}
        if not self._places(update, expected, swaps):
            return None
        status = update.get("status")
        message = status.get("message") if isinstance(status, dict) else None
        if isinstance(message, dict) and (
            "referenceTaskIds" in message or not self._places(message, expected, swaps)
        ):
            return None
        if any(raw.count(f'"{up}"') != n for up, n in expected.items()):
            return None  # the ID is also somewhere the parsed path leaves alone
        parts = split(raw)
        if not _one_reading(parts, answer) or any(up in parts[0::2] for up in expected):
            return None  # a key twice (clients may read the other), or an ID across strings
        if any(router in expected for router in swaps.values()):
            return None
        if "\n" in raw or (not raw.isascii() and any(c in raw for c in _BREAKS)):
            return None  # the client's SSE line would break
        self.relayed += 1
        self._learn(raw, parts, swaps, expected, update)
        return replace_ids(raw, swaps).encode()

    # -- internals ---------------------------------------------------------------------------

    def _learn(
        self,
        raw: str,
        parts: list[str],
        swaps: dict[str, str],
        expected: dict[str, int],
        update: dict[str, Any],
    ) -> None:
        """Remember the shape of an event just relayed (unless known, or too many are)."""
        if len(self._learned) >= _SHAPES:
            return
        if any(learned.matches(raw) for learned in self._learned):
            return
        shape = Shape.of(parts)
        if shape is None:
            return
        self._learned.append(_Learned(shape, swaps, expected, update))

    def _payload(self, result: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
        """The update of a status or artifact update event, as the parsed path finds it
        (:mod:`router.protocol.events`), and whether it is an artifact update."""
        kind = stream_event_kind(self.version, result)
        if kind not in _UPDATES:
            return None
        if (self.version == "1.0") == ("kind" in result):  # 0.3: its kind said, not guessed
            return None
        update = event_payload(self.version, result)
        return None if update is None else (update, kind == "artifact-update")

    def _steady(self, update: dict[str, Any], artifact: bool) -> bool:
        """An artifact update, or a status update that changes no state and ends nothing."""
        if artifact:
            return True
        if self.version == "0.3" and update.get("final") not in (False, None):
            return False
        state = _state(update)
        if state is None or is_terminal_state(self.version, state):
            return False
        task_id = update.get("taskId")
        return isinstance(task_id, str) and self._states.get(task_id) == state

    def _places(self, obj: dict[str, Any], expected: dict[str, int], swaps: dict[str, str]) -> bool:
        """Count the IDs at ``obj``'s rewritten places; False if one is not known and plain."""
        for key, known in (("taskId", self.tasks), ("contextId", self.contexts)):
            value = obj.get(key)
            if value is None or value == "":
                continue
            router = known.get(value) if isinstance(value, str) else None
            if router is None or not plain_id(value) or not plain_id(router):
                return False
            if swaps.setdefault(value, router) != router:
                return False  # one string, two router IDs: only the structure can tell
            expected[value] = expected.get(value, 0) + 1
        return True


def _one_reading(parts: list[str], value: Any) -> bool:
    """The JSON text cut into ``parts`` (:func:`~router.forward.eventshape.split`) has no
    object with a key twice: as many keys in the text as in ``value``, its parse."""
    written = sum(1 for after in parts[2::2] if after.lstrip(" \t\n\r").startswith(":"))
    return written == _keys(value)


def _keys(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_keys(v) for v in value)
    return 0


def _state(payload: Mapping[str, Any]) -> str | None:
    status = payload.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None
