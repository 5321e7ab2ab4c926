"""router.forward.sse: the incremental event-stream parser (the client-side SSE writer is
tested in tests/router/transport/test_sse.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.forward.sse import SseError, SseEvent, SseParser
from tests.support.streams import parse_all

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"
STREAM_FIXTURES = sorted(p.name for p in WIRE.glob("*.out") if "stream" in p.name) + sorted(
    p.name for p in WIRE.glob("*subscribe*.out")
)


def wire_body(name: str) -> bytes:
    """The SSE body of a captured response (the HTTP head, when recorded, removed)."""
    raw = (WIRE / name).read_bytes()
    if raw.startswith(b"HTTP/"):
        raw = raw.split(b"\r\n\r\n", 1)[1]
    return raw


def wire_data(body: bytes) -> list[str]:
    """The text of every ``data:`` line of a captured body (each event there has one).

    The subscribe captures were cut at 200 characters per line (their data is not complete
    JSON); the stream captures are whole.
    """
    return [
        line[len("data: ") :] for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# --- SseParser ---------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\r\n", b"\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = eol.join([b"data: one", b"", b"data: two", b"", b""])
    for chunks in ([stream], bytewise(stream)):
        assert [e.data for e in parse_all(chunks)] == ["one", "two"]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []  # the LF belongs to the CR: no blank line yet
    assert parser.feed(b"\r") == []
    assert [e.data for e in parser.feed(b"\ndata: b\r\n\r\n")] == ["a", "b"]


def test_events_dispatch_at_the_blank_line_not_before() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"n": 1}\r\n') == []
    assert parser.feed(b"\r\n") == [SseEvent(event="message", data='{"n": 1}')]


def test_comments_are_ignored_and_counted() -> None:
    parser = SseParser()
    events = parser.feed(b": ping\r\n\r\n: another\r\ndata: x\r\n:mid-event\r\n\r\n")
    assert [e.data for e in events] == ["x"]
    assert parser.comments == 3


def test_event_type_id_and_retry() -> None:
    events = parse_all([b"event: error\nid: 7\nretry: 1500\ndata: {}\n\ndata: next\n\n"])
    assert events[0] == SseEvent(event="error", data="{}", id="7", retry=1500)
    assert events[1].event == "message"  # the type is per event
    assert events[1].id == "7"  # the last event id persists


def test_multi_line_data_is_joined_with_newlines() -> None:
    events = parse_all([b'data: {"a":\r\ndata:1,\r\ndata\r\ndata:  "b": 2}\r\n\r\n'])
    assert events[0].data == '{"a":\n1,\n\n "b": 2}'
    assert json.loads(events[0].data) == {"a": 1, "b": 2}


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse_all([b"\r\n\r\nevent: error\r\n\r\nid: 1\r\n\r\ndata: x\r\n\r\n"]) == [
        SseEvent(event="message", data="x", id="1")
    ]


def test_last_event_without_blank_line_is_dispatched_at_eof() -> None:
    parser = SseParser()
    assert [e.data for e in parser.feed(b"data: a\n\ndata: b")] == ["a"]
    assert [e.data for e in parser.feed_eof()] == ["b"]
    parser = SseParser()
    assert parser.feed(b"data: c\r") == []
    assert [e.data for e in parser.feed_eof()] == ["c"]


def test_byte_order_mark_is_skipped_even_when_split() -> None:
    assert [e.data for e in parse_all(bytewise(b"\xef\xbb\xbfdata: x\n\n"))] == ["x"]


def test_line_limit_applies_before_the_line_ends() -> None:
    parser = SseParser(max_line_bytes=64, max_event_bytes=1024)
    parser.feed(b"data: " + b"x" * 50)
    with pytest.raises(SseError, match="line exceeds 64 bytes"):
        parser.feed(b"x" * 20)


def test_event_size_limit() -> None:
    parser = SseParser(max_line_bytes=64, max_event_bytes=100)
    with pytest.raises(SseError, match="event exceeds 100 bytes"):
        parser.feed(b"data: " + b"x" * 40 + b"\n" * 1 + (b"data: " + b"y" * 40 + b"\n") * 2)


def test_long_line_in_small_chunks_is_not_rescanned() -> None:
    parser = SseParser()
    payload = json.dumps({"text": "z" * 200_000}).encode()
    for i in range(0, len(payload), 100):
        assert parser.feed((b"data: " if i == 0 else b"") + payload[i : i + 100]) == []
    assert json.loads(parser.feed(b"\r\n\r\n")[0].data) == {"text": "z" * 200_000}


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_captured_sdk_streams(name: str) -> None:
    body = wire_body(name)
    expected = wire_data(body)
    assert len(expected) >= 3
    for chunks in ([body], bytewise(body)):
        events = parse_all(chunks)
        assert [e.data for e in events] == expected
        assert {e.event for e in events} == {"message"}
    if "stream" in name:  # complete captures: every event is a JSON-RPC response
        assert all(json.loads(e.data)["jsonrpc"] == "2.0" for e in events)


def test_limit_error_keeps_the_events_completed_before_it() -> None:
    parser = SseParser(max_line_bytes=32, max_event_bytes=64)
    with pytest.raises(SseError) as info:
        parser.feed(b"data: a\n\ndata: b\n\ndata: " + b"x" * 40)
    assert [e.data for e in info.value.events] == ["a", "b"]


# the pieces an event stream is made of: the simple events the parser takes whole (one
# ``data:`` line, LF LF) mixed with everything that needs its line walk
_PIECES = st.sampled_from(
    [
        b"data: {}\n\n",
        b'data: {"a":"b"}\n\n',
        b"data:no space\n\n",
        b"data:  two spaces\n\n",
        b"data: \xe2\x80\xa8 \xff\n\n",
        b"data: x\ndata: y\n\n",
        b"data: x\r\n\r\n",
        b"data: x\r\r",
        b": ping\n\n",
        b"event: error\ndata: e\n\n",
        b"id: 7\nretry: 10\n\n",
        b"\n\n",
        b"\n",
        b"data\n\n",
        b"dat",
        b"a: split\n\n",
    ]
)


@given(st.lists(_PIECES, max_size=12), st.integers(min_value=1, max_value=40))
def test_whole_chunks_parse_as_byte_by_byte(pieces: list[bytes], size: int) -> None:
    body = b"".join(pieces)
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    assert parse_all([body]) == parse_all(chunks) == parse_all(bytewise(body))
    plain = SseParser()  # feed_data: the same events, some as their data alone
    events = [*plain.feed_data(body), *plain.feed_eof()]
    data = [e if isinstance(e, str) else e.data for e in events]
    assert data == [e.data for e in parse_all([body])]
    assert all(isinstance(e, SseEvent) or e == e.strip("\r\n") for e in events)


def test_simple_events_keep_the_limits() -> None:
    with pytest.raises(SseError):
        SseParser(max_line_bytes=32).feed(b"data: " + b"x" * 40 + b"\n\n")
    with pytest.raises(SseError):
        SseParser(max_event_bytes=16).feed(b"data: " + b"x" * 20 + b"\n\n")
    assert SseParser(max_event_bytes=16).feed(b"data: " + b"x" * 14 + b"\n\n")[0].data == "x" * 14


def test_a_long_line_in_many_chunks_is_not_matched_again_with_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[int] = []
    taken = SseParser._simple

    def counted(self: SseParser, plain: bool) -> list[Any]:
        runs.append(len(self._buf))
        return taken(self, plain)

    monkeypatch.setattr(SseParser, "_simple", counted)
    parser = SseParser()
    parser.feed(b"data: ")
    for _ in range(1000):
        assert parser.feed(b"x" * 100) == []
    assert [e.data for e in parser.feed(b"\r\n\r\n")] == ["x" * 100_000]
    assert len(runs) <= 2  # the run is looked for when a line end comes, not per chunk
