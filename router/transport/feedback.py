"""Operators correct the router: feedback turns a message into a learned example of a skill.

- ``POST /api/v1/route/feedback`` (admin token): ``{"task_id": ...}`` (a routed task: its
  first user message, read from the agent that owns it), ``{"message": <an A2A message of
  either version>}`` or ``{"text": ...}``, with the right ``"agent"`` and optionally its
  ``"skill"`` (default: the agent's skill closest to the message). The text is stored
  (:mod:`registry.examples`) and embedded; the answer shows the decision before and after.
- ``GET /api/v1/skills/{agent_id}/{skill_id}/examples``: the skill's learned examples (and
  its card's own, for reference).
- ``DELETE /api/v1/skills/{agent_id}/{skill_id}/examples`` (every learned one) and
  ``DELETE .../examples/{example_id}`` (one): 204.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from registry.api import REGISTRY, caller, read_json
from registry.apimodels import ExampleList
from registry.errors import NotFound, RegistryError
from registry.examples import LearnedExamples
from registry.openapi import documented
from registry.records import AgentRecord
from router.choose.semantic import SemanticIndex
from router.forward.handler import Router
from router.ids.idmap import IdMap
from router.protocol import payloads as wire
from router.protocol.errors import RpcError
from router.protocol.versions import Op, Version, method_name
from router.transport.apimodels import Feedback, FeedbackResult
from router.transport.routes import ROUTER

EXAMPLES = web.AppKey("examples", LearnedExamples)
_PREFIX = "/api/v1"
_SOURCES = ("task_id", "message", "text")
_SKILL = {"agent_id": "The agent's id.", "skill_id": "One of its skills' id."}


def add_feedback_routes(app: web.Application) -> None:
    """Register the feedback and learned-example routes on ``app``."""
    app.router.add_post(f"{_PREFIX}/route/feedback", feedback)
    examples = f"{_PREFIX}/skills/{{agent_id}}/{{skill_id}}/examples"
    app.router.add_get(examples, list_examples)
    app.router.add_delete(examples, delete_examples)
    app.router.add_delete(f"{examples}/{{example_id}}", delete_example)


def _bad(message: str, **details: Any) -> RegistryError:
    return RegistryError(message, code="invalid_body", details=details or None)


@documented(
    "Teach the router: a message becomes a learned example of the right skill",
    "routing",
    answer=FeedbackResult,
    status=201,
    body=Feedback,
    errors=(404, 409, 502),
)
async def feedback(request: web.Request) -> web.Response:
    """Store the message of the body as a learned example of the right skill."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise _bad('send a JSON object: {"text"|"message"|"task_id": ..., "agent": ...}')
    given = [key for key in _SOURCES if key in body]
    if len(given) != 1:
        raise _bad(
            'name the message exactly one way: "task_id" (a routed task), "message" (an A2A '
            'message) or "text"',
            given=given,
        )
    agent_id = body.get("agent")
    if not isinstance(agent_id, str) or not agent_id:
        raise _bad('"agent" (the id of the agent that should have answered) is required')
    skill_id = body.get("skill")
    if skill_id is not None and (not isinstance(skill_id, str) or not skill_id):
        raise _bad('"skill" must be a skill id (a non-empty string)')
    router = request.app[ROUTER]
    agent = request.app[REGISTRY].get(agent_id)  # 404 not_found
    if skill_id is not None and all(s.id != skill_id for s in agent.card.skills):
        raise NotFound(
            f"agent {agent_id!r} has no skill {skill_id!r}",
            details={"skills": [s.id for s in agent.card.skills]},
        )
    if not agent.card.skills:
        raise RegistryError(
            f"agent {agent_id!r} declares no skills: an example needs a skill",
            code="no_skills",
            status=409,
        )
    task_id = body.get("task_id")
    ids = router.id_space(caller(request))
    version, message = await _message(router, body, given[0], ids)
    # a NUL (which messages may carry) is a space here: the example is stored as text
    text = wire.message_text(version, message).replace("\x00", " ").strip()
    if not text:
        raise _bad("the message has no text to learn from", source=given[0])
    params = {"message": message}
    before = await _decision(router, version, params)
    skill_id = skill_id or await _closest_skill(router, agent, text)
    example = await request.app[EXAMPLES].add(
        agent_id, skill_id, text, task_id=task_id if isinstance(task_id, str) else None
    )
    semantic = router.matcher.semantic
    learned = semantic is not None
    if semantic is not None:
        await semantic.vectors.ensure([example.text])
    after = await _decision(router, version, params)
    body_out = {
        "example": example.to_api(),
        "learned": learned,
        "before": before,
        "after": after,
    }
    if not learned:
        body_out["warning"] = (
            f"stored, but routing ignores learned examples until it matches by meaning "
            f"({router.matcher.status})"
        )
    return web.json_response(body_out, status=201)


async def _message(
    router: Router, body: dict[str, Any], source: str, ids: IdMap
) -> tuple[Version, dict]:
    """The feedback's message in A2A form, and its version (``ids``: the caller's ID space,
    where a ``task_id`` is looked up)."""
    if source == "text":
        text = body["text"]
        if not isinstance(text, str):
            raise _bad('"text" must be a string')
        return "1.0", {"role": "ROLE_USER", "messageId": "feedback", "parts": [{"text": text}]}
    if source == "message":
        message = body["message"]
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            raise _bad('"message" must be an A2A message object with "parts"')
        parts = message["parts"]
        version: Version = (
            "0.3" if any(isinstance(p, dict) and "kind" in p for p in parts) else "1.0"
        )
        if isinstance(body.get("version"), str):
            version = "1.0" if body["version"].startswith("1") else "0.3"
        return version, message
    return await _task_message(router, body["task_id"], ids)


async def _task_message(router: Router, task_id: Any, ids: IdMap) -> tuple[Version, dict]:
    """The first user message of a routed task of the caller (in its ID space ``ids``, or
    for one version its scope of earlier versions: a task of another caller is not found),
    asked of the agent that owns it."""
    if not isinstance(task_id, str) or not task_id:
        raise _bad('"task_id" must be a task id the router gave out')
    ref = await ids.task(task_id)
    if ref is None and ids.old is not None:
        ref = await ids.scoped(ids.old).task(task_id)
    if ref is None:
        raise NotFound(f"no task with id {task_id!r}", details={"task_id": task_id})
    try:
        target = router.matcher.target_for("1.0", ref.agent_id).target
        method = method_name(target.version, Op.GET)
        answer = await router.upstream.call(
            target,
            method,
            {"id": ref.upstream_task_id, "historyLength": 100},
            request_id="feedback",
            headers={},
        )
    except RpcError as error:
        raise RegistryError(
            f"the agent that owns task {task_id!r} could not be asked for it: {error.message}",
            code="upstream_error",
            status=502,
            details={"agent": ref.agent_id, "rpc_error": error.code},
        ) from None
    result = answer.get("result")
    task = result.get("task", result) if isinstance(result, dict) else None
    history = task.get("history") if isinstance(task, dict) else None
    for message in history if isinstance(history, list) else ():
        if isinstance(message, dict) and message.get("role") in ("user", "ROLE_USER"):
            return target.version, message
    raise RegistryError(
        f"agent {ref.agent_id!r} no longer knows the first message of task {task_id!r}; "
        'send it as "message" or "text" instead',
        code="task_message_unavailable",
        status=409,
        details={"agent": ref.agent_id, "task_id": task_id},
    )


async def _decision(router: Router, version: Version, params: dict[str, Any]) -> dict[str, Any]:
    """Where routing sends the message now: agent, skill and tier, or the refusal."""
    try:
        choice = await router.chooser.choose(version, Op.SEND, params)
    except RpcError as error:
        return {"agent": None, "skill": None, "tier": "refused", "code": error.code}
    return {"agent": choice.agent.id, "skill": choice.skill_id, "tier": choice.tier}


async def _closest_skill(router: Router, agent: AgentRecord, text: str) -> str:
    """The agent's skill closest in meaning to ``text`` (its first without a model)."""
    semantic = router.matcher.semantic
    skills = agent.card.skills
    if semantic is None or len(skills) == 1:
        return skills[0].id
    vector = await semantic.query_vector(text)
    index = SemanticIndex([(agent, s) for s in skills], semantic.vectors, semantic.examples.all)
    if vector is None or not index.dim:
        return skills[0].id
    skill, _, example, learned = index.features(vector)
    best = max(range(len(skills)), key=lambda i: max(skill[i], example[i], learned[i]))
    return skills[best].id


def _skill(request: web.Request) -> tuple[str, str]:
    agent_id, skill_id = request.match_info["agent_id"], request.match_info["skill_id"]
    agent = request.app[REGISTRY].get(agent_id)
    if all(s.id != skill_id for s in agent.card.skills):
        raise NotFound(f"agent {agent_id!r} has no skill {skill_id!r}")
    return agent_id, skill_id


@documented(
    "A skill's learned examples", "routing", answer=ExampleList, errors=(404,), params=_SKILL
)
async def list_examples(request: web.Request) -> web.Response:
    """The learned examples of a skill, oldest first, and the card's own examples."""
    agent_id, skill_id = _skill(request)
    card = next(
        s for s in request.app[REGISTRY].get(agent_id).card.skills if s.id == skill_id
    ).examples
    learned = request.app[EXAMPLES].of_skill(agent_id, skill_id)
    return web.json_response({"examples": [e.to_api() for e in learned], "card_examples": card})


@documented(
    "Delete every learned example of a skill", "routing", status=204, errors=(404,), params=_SKILL
)
async def delete_examples(request: web.Request) -> web.Response:
    """Delete every learned example of a skill."""
    agent_id, skill_id = _skill(request)
    examples = request.app[EXAMPLES]
    for example in examples.of_skill(agent_id, skill_id):
        await examples.remove(agent_id, skill_id, example.id)
    return web.Response(status=204)


@documented(
    "Delete one learned example",
    "routing",
    status=204,
    errors=(404,),
    params={**_SKILL, "example_id": "The example's id."},
)
async def delete_example(request: web.Request) -> web.Response:
    """Delete one learned example."""
    agent_id, skill_id = _skill(request)
    example_id = request.match_info["example_id"]
    if not await request.app[EXAMPLES].remove(agent_id, skill_id, example_id):
        raise NotFound(
            f"skill {skill_id!r} of agent {agent_id!r} has no learned example {example_id!r}"
        )
    return web.Response(status=204)
