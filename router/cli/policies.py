"""``policies ...``: a running server's access policies, over ``/api/v1/policies``.

``policies list`` and ``policies show AGENT`` print them; ``policies set AGENT`` sets the
tenant (``--tenant T`` or ``--shared``) and the allow rules (``--allow SPEC``, repeatable;
``--no-rules``), keeping what it is not told to change, or sends a whole policy from
``--file policy.json``; ``policies delete AGENT`` removes one. A SPEC is
``tenants=a,b;groups=g;subjects=s;skills=s1,s2`` (any of the four, singular names too;
an empty SPEC is a rule that matches everyone who sees the agent).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from router.cli.cards import load_json
from router.cli.client import client_options, emit, quote, request
from router.cli.errors import CliError

__all__ = ["add_commands", "parse_allow"]

RULE_KEYS = ("tenants", "groups", "subjects", "skills")
_ALIASES = {key[:-1]: key for key in RULE_KEYS}


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``policies list/show/set/delete`` to the top-level ``commands``."""
    group = commands.add_parser("policies", help="who may see and use each agent")
    group.set_defaults(group_parser=group)
    policies = group.add_subparsers(title="policy commands")

    listing = client_options(policies.add_parser("list", help="list the stored policies"))
    listing.set_defaults(func=cmd_list)

    show = client_options(policies.add_parser("show", help="show an agent's policy"))
    show.add_argument("agent", help="agent id")
    show.set_defaults(func=cmd_show)

    put = client_options(
        policies.add_parser(
            "set",
            help="set an agent's tenant and allow rules",
            description="Change an agent's policy: what is not given is kept (a new policy: "
            "shared, no rules). With --file, the file is the whole policy.",
        )
    )
    put.add_argument("agent", help="agent id")
    tenant = put.add_mutually_exclusive_group()
    tenant.add_argument("--tenant", help="only callers of this tenant see and use the agent")
    tenant.add_argument("--shared", action="store_true", help="every tenant sees the agent")
    rules = put.add_mutually_exclusive_group()
    rules.add_argument(
        "--allow",
        action="append",
        metavar="SPEC",
        help="an allow rule (repeatable; replaces the rules): "
        "'tenants=a,b;groups=g;subjects=s;skills=s1,s2', each part optional",
    )
    rules.add_argument(
        "--no-rules",
        action="store_true",
        help="remove every rule (then SWITCHBOARD_AGENT_ACCESS decides)",
    )
    put.add_argument(
        "--file",
        type=Path,
        help='the whole policy as JSON: {"tenant": ..., "rules": [...]} (no other options)',
    )
    put.set_defaults(func=cmd_set)

    remove = client_options(policies.add_parser("delete", help="delete an agent's policy"))
    remove.add_argument("agent", help="agent id")
    remove.set_defaults(func=cmd_delete)


def parse_allow(spec: str) -> dict[str, list[str]]:
    """One ``--allow`` SPEC as a rule: ``groups=ops,sre;skills=forecast`` gives
    ``{"groups": ["ops", "sre"], "skills": ["forecast"]}``; CliError (status 2) if bad."""
    rule: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, equals, values = part.partition("=")
        key = _ALIASES.get(name.strip(), name.strip())
        if not equals or key not in RULE_KEYS:
            raise CliError(
                f"--allow {spec!r}: {part!r} is not NAME=VALUES, with NAME one of "
                f"{', '.join(RULE_KEYS)}",
                status=2,
            )
        if key in rule:
            raise CliError(f"--allow {spec!r}: {key} is given twice", status=2)
        names = [v.strip() for v in values.split(",") if v.strip()]
        if not names:
            raise CliError(f"--allow {spec!r}: {key} names nothing", status=2)
        rule[key] = names
    return rule


def cmd_list(args: argparse.Namespace) -> int:
    """``policies list``."""
    result = request(args, "GET", "/api/v1/policies")
    policies = result.get("policies")
    if not isinstance(policies, list) or not all(isinstance(p, dict) for p in policies):
        raise CliError("unexpected answer from the server (no 'policies' list): is it Switchboard?")
    emit(args, result, lambda: _print_list(policies))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """``policies show``."""
    policy = request(args, "GET", f"/api/v1/policies/{quote(args.agent)}")
    emit(args, policy, lambda: _print_policy(policy))
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    """``policies set``: PUT the policy, after reading the current one for what is kept."""
    path = f"/api/v1/policies/{quote(args.agent)}"
    if args.file is not None:
        if args.tenant is not None or args.shared or args.allow or args.no_rules:
            raise CliError(
                "--file is the whole policy: give no --tenant, --shared, --allow or --no-rules",
                status=2,
            )
        body = load_json(args.file, "policy")
        if not isinstance(body, dict):
            raise CliError(
                f'policy file {args.file}: expected {{"tenant": ..., "rules": [...]}}', status=2
            )
    else:
        if args.tenant is not None and not args.tenant.strip():
            raise CliError("--tenant needs a tenant name (--shared for a shared agent)", status=2)
        rules = [parse_allow(spec) for spec in args.allow or []]
        if args.tenant is None and not args.shared and not args.allow and not args.no_rules:
            raise CliError(
                "nothing to set: give --tenant T or --shared, --allow SPEC or --no-rules, "
                "or --file",
                status=2,
            )
        current = request(args, "GET", path)
        tenant = None if args.shared else args.tenant or current.get("tenant")
        kept = current.get("rules", [])
        body = {"tenant": tenant, "rules": rules if args.allow or args.no_rules else kept}
    policy = request(args, "PUT", path, body)
    emit(args, policy, lambda: _print_policy(policy, verb="set"))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """``policies delete``."""
    request(args, "DELETE", f"/api/v1/policies/{quote(args.agent)}")
    if not args.json:
        print(f"deleted the policy of {args.agent}: it is shared, without rules")
    return 0


def _tenant(policy: dict[str, Any]) -> str:
    return f"tenant {policy['tenant']}" if policy.get("tenant") else "shared"


def rule_text(rule: dict[str, Any]) -> str:
    """A rule as ``--allow`` takes it (``everyone who sees it`` for an empty rule)."""
    parts = [f"{key}={','.join(rule[key])}" for key in RULE_KEYS if rule.get(key)]
    return ";".join(parts) or "(everyone who sees it)"


def _print_policy(policy: dict[str, Any], verb: str = "") -> None:
    head = f"{verb} the policy of " if verb else ""
    print(f"{head}{policy['agent_id']}: {_tenant(policy)}")
    rules = policy.get("rules") or []
    if not rules:
        print("  no rules: SWITCHBOARD_AGENT_ACCESS decides (allow: every caller who sees it)")
    for rule in rules:
        print(f"  allow {rule_text(rule)}")
    if policy.get("updated_at"):
        print(f"  updated {policy['updated_at']} by {policy.get('updated_by') or '-'}")


def _print_list(policies: list[dict[str, Any]]) -> None:
    if not policies:
        print("no policies: every agent is shared, SWITCHBOARD_AGENT_ACCESS decides")
        return
    width = max(len(str(policy.get("agent_id"))) for policy in policies)
    for policy in policies:
        rules = policy.get("rules") or []
        allowed = "; ".join(f"[{rule_text(rule)}]" for rule in rules) or "no rules"
        print(f"{policy.get('agent_id')!s:<{width}}  {_tenant(policy)}  {allowed}")
