"""The push outbox: durable rows, leases, retries with backoff and jitter, dead letters,
order per task, no redirects, the client's token and credentials; against a real webhook
(an aiohttp server) with the clock moved by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.netguard import AddressPolicy
from registry.store import Store
from router.push.configs import PushConfig
from router.push.outbox import Backoff, Outbox
from tests.support.clock import FakeClock

LOOPBACK = AddressPolicy(["127.0.0.0/8"])


class Webhook:
    """A client's webhook: answers each POST with the next status of ``statuses`` (then
    200) and records what it got."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.got: list[tuple[str, dict[str, str], Any]] = []
        self.hang = False

    async def handle(self, request: web.Request) -> web.Response:
        self.got.append((request.path, dict(request.headers), await request.json()))
        if self.hang:
            await asyncio.Event().wait()  # never answers: the outbox's timeout ends it
        status = self.statuses.pop(0) if self.statuses else 200
        headers = {"Location": "/elsewhere"} if 300 <= status < 400 else None
        return web.Response(status=status, headers=headers)


async def _serve(aiohttp_server: Any, hook: Webhook) -> TestServer:
    app = web.Application()
    app.router.add_post("/{path:.*}", hook.handle)
    return await aiohttp_server(app)


def _config(url: str, task: str = "task-1", **extra: Any) -> PushConfig:
    return PushConfig(
        receiver_key=f"key-{task}", receiver_token="t", task_id=task, config_id="c1",
        scope="", agent_id="agent", version="1.0", url=url, **extra,
    )  # fmt: skip


def _outbox(store: Store, clock: Callable[[], Any], **kwargs: Any) -> Outbox:
    kwargs.setdefault("backoff", Backoff(base=1.0, cap=60.0, attempts=4))
    return Outbox(store, LOOPBACK, clock=clock, rand=lambda: 0.0, **kwargs)


async def test_a_notification_is_retried_with_backoff_until_the_webhook_takes_it(
    aiohttp_server: Any, store: Store
) -> None:
    hook = Webhook([500, 503])
    server = await _serve(aiohttp_server, hook)
    clock = FakeClock()
    outbox = _outbox(store, clock)
    config = _config(str(server.make_url("/hook")), token="client-token",
                     authentication={"scheme": "Bearer", "credentials": "s3cret"})  # fmt: skip
    await outbox.enqueue(config, {"statusUpdate": {"taskId": "task-1"}})
    try:
        assert await outbox.deliver_due() == 1  # fails (500)
        assert await outbox.deliver_due() == 0  # not due: 1 s * jitter 0.5
        clock.advance(0.5)
        assert await outbox.deliver_due() == 1  # fails (503)
        clock.advance(0.9)
        assert await outbox.deliver_due() == 0  # 2 s * 0.5 not yet over
        clock.advance(0.1)
        assert await outbox.deliver_due() == 1  # taken
        assert await outbox.states("task-1") == [("delivered", 3)]
    finally:
        await outbox.close()
    assert len(hook.got) == 3
    _, headers, body = hook.got[-1]
    assert headers["X-A2A-Notification-Token"] == "client-token"
    assert headers["Authorization"] == "Bearer s3cret"
    assert body == {"statusUpdate": {"taskId": "task-1"}}


async def test_a_webhook_that_never_answers_ends_in_the_dead_letters(
    aiohttp_server: Any, store: Store
) -> None:
    hook = Webhook()
    hook.hang = True
    server = await _serve(aiohttp_server, hook)
    clock = FakeClock()
    outbox = _outbox(store, clock, timeout=0.2, backoff=Backoff(base=1.0, attempts=3))
    await outbox.enqueue(_config(str(server.make_url("/hook"))), {"task": {"id": "task-1"}})
    try:
        for _ in range(3):
            assert await outbox.deliver_due() == 1
            clock.advance(60)
        assert await outbox.deliver_due() == 0
    finally:
        await outbox.close()
    assert await outbox.states("task-1") == [("dead", 3)]
    [dead] = await outbox.dead()
    assert dead["taskId"] == "task-1" and dead["attempts"] == 3
    assert "Timeout" in dead["lastError"]
    assert "headers" not in dead  # they carry the client's credentials


async def test_a_tasks_notifications_are_delivered_in_order(
    aiohttp_server: Any, store: Store
) -> None:
    hook = Webhook([500])
    server = await _serve(aiohttp_server, hook)
    clock = FakeClock()
    outbox = _outbox(store, clock)
    url = str(server.make_url("/hook"))
    for n in (1, 2):
        await outbox.enqueue(_config(url), {"n": n})
    await outbox.enqueue(_config(url, task="task-2"), {"n": 3})  # another task is not held up
    try:
        assert await outbox.deliver_due() == 2  # task-1's first fails, task-2's goes
        assert await outbox.deliver_due() == 0  # task-1's second waits for its first
        due = await outbox.next_due()  # the retry of the first, not the held-back second
        assert due is not None and (due - clock()).total_seconds() == 0.5
        clock.advance(1)
        assert await outbox.deliver_due() == 1
        assert await outbox.deliver_due() == 1
    finally:
        await outbox.close()
        assert await outbox.next_due() is None
    task_1 = [body["n"] for _, _, body in hook.got if body["n"] != 3]
    assert task_1 == [1, 1, 2]
    assert await outbox.states("task-1") == [("delivered", 2), ("delivered", 1)]


async def test_redirects_are_not_followed(aiohttp_server: Any, store: Store) -> None:
    hook = Webhook([302])
    server = await _serve(aiohttp_server, hook)
    outbox = _outbox(store, FakeClock())
    await outbox.enqueue(_config(str(server.make_url("/hook"))), {"n": 1})
    try:
        assert await outbox.deliver_due() == 1
    finally:
        await outbox.close()
    assert [path for path, _, _ in hook.got] == ["/hook"]  # /elsewhere never asked
    assert await outbox.states("task-1") == [("pending", 1)]


async def test_a_claimed_row_is_another_replicas_only_when_its_lease_ends(
    aiohttp_server: Any, store: Store
) -> None:
    hook = Webhook()
    server = await _serve(aiohttp_server, hook)
    clock = FakeClock()
    first, second = _outbox(store, clock, lease=30), _outbox(store, clock, lease=30)
    await first.enqueue(_config(str(server.make_url("/hook"))), {"n": 1})
    try:
        assert len(await first.claim()) == 1  # ... and then this replica dies
        assert await second.deliver_due() == 0
        clock.advance(30)
        assert await second.deliver_due() == 1
    finally:
        await first.close()
        await second.close()
    assert len(hook.got) == 1
    assert await second.states("task-1") == [("delivered", 1)]


async def test_a_webhook_on_a_forbidden_network_is_never_contacted(store: Store) -> None:
    outbox = Outbox(store, AddressPolicy(), clock=FakeClock(), backoff=Backoff(attempts=1))
    await outbox.enqueue(_config("http://127.0.0.1:9/hook"), {"n": 1})
    try:
        assert await outbox.deliver_due() == 1
    finally:
        await outbox.close()
    [dead] = await outbox.dead()
    assert "127.0.0.1" in dead["lastError"]


def test_the_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    backoff = Backoff(base=2.0, cap=10.0)
    assert [backoff.delay(n, lambda: 0.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert backoff.delay(1, lambda: 0.999) < 2.0
