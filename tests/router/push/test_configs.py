"""The clients' push configs: stored under router task and config id, replaced in place
(keeping the receiver the agent knows), a send's config bound to its task once."""

from __future__ import annotations

from dataclasses import replace

from registry.store import Store
from router.push.configs import PushConfig, PushConfigs, new_receiver


def _config(task_id: str | None = "task-1", config_id: str | None = "c1") -> PushConfig:
    key, token = new_receiver()
    return PushConfig(
        receiver_key=key, receiver_token=token, task_id=task_id, config_id=config_id,
        scope="alice", agent_id="agent", version="1.0", url="https://hooks.example/a",
    )  # fmt: skip


async def test_a_config_is_replaced_in_place_and_keeps_its_receiver(store: Store) -> None:
    configs = PushConfigs(store)
    first, new = await configs.put(_config())
    assert new
    again, new = await configs.put(replace(_config(), url="https://hooks.example/b"))
    assert not new and again.receiver_key == first.receiver_key
    assert again.receiver_token == first.receiver_token
    [stored] = await configs.list("task-1")
    assert stored.url == "https://hooks.example/b" and stored.scope == "alice"
    assert (await configs.by_receiver(first.receiver_key)) == stored
    assert await configs.delete("task-1", "c1") == stored
    assert await configs.get("task-1", "c1") is None
    assert await configs.delete("task-1", "c1") is None


async def test_a_sends_config_is_bound_to_the_first_task_only(store: Store) -> None:
    configs = PushConfigs(store)
    pending, _ = await configs.put(_config(task_id=None, config_id=None))
    bound = await configs.bind(pending.receiver_key, "task-9")
    assert bound is not None and (bound.task_id, bound.config_id) == ("task-9", "task-9")
    assert await configs.bind(pending.receiver_key, "task-10") is None
    assert await configs.bind("unknown", "task-9") is None
    assert [c.config_id for c in await configs.list("task-9")] == ["task-9"]
