"""The shell examples of a Markdown page, run against a live ``switchboard serve --demo`` and
compared with the output the page shows (tests/test_doc_examples.py).

How a page is read:

- A fenced ``sh`` block that talks to the server (``curl`` to ``http://127.0.0.1:8080`` or
  ``.venv/bin/switchboard``) is run, as one ``sh`` script, unless an HTML comment
  ``<!-- not run -->`` comes right before it, or it installs (``pip install``), starts a
  server (``serve``) or runs the tests (``pytest``). It must exit 0.
- The next fenced block, when its info string has the word ``output`` (```` ```json output ````,
  ```` ```text output ````), is what the command prints. A ``json`` output is a pattern: every
  key it shows must be there with a matching value (keys it leaves out may be there too), a
  list must have exactly its items unless its last item is ``"..."`` (then at least the ones
  before), and ``...`` inside a string stands for any text (``"..."`` for any value). A
  ``text`` output is compared line by line (blank lines ignored), ``...`` standing for any text
  within a line and a line of its own ``...`` for any number of lines. In a run of dots the
  last three are the wildcard (``"t1...."``: ``t1.`` and anything).
- Before running, ``http://127.0.0.1:8080`` becomes the server's URL, ``.venv/bin/switchboard``
  the CLI of this checkout, and ``<task id>`` the last task ID an earlier command printed;
  after, the server's port in the output becomes ``8080`` again.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DOC_BASE = "http://127.0.0.1:8080"
WILDCARD = "..."
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not run\s*-->\s*$")
_DOTS = re.compile(r"\.\.\.(?!\.)")  # the wildcard: the last three dots of a run ("t1....")
_TASK_ID = re.compile(r'"(?:id|taskId)":\s*"(t1\.[^"]+)"')


@dataclass
class Example:
    """One command block of a page, and the output block after it (if any)."""

    line: int
    command: str
    output: str | None = None
    output_kind: str = "text"


def examples(page: Path) -> list[Example]:
    """The runnable command blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found: list[Example] = []
    last_was_command = False
    for match in _FENCE.finditer(text):
        info, body = match.group(1).split(), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        if "output" in info:
            if last_was_command and found[-1].output is None:
                found[-1].output = body
                found[-1].output_kind = "json" if "json" in info else "text"
            last_was_command = False
            continue
        last_was_command = False
        if info[:1] != ["sh"] or _NOT_RUN.search(text[: match.start()]):
            continue
        if not _talks_to_server(body):
            continue
        found.append(Example(line, body))
        last_was_command = True
    return found


def _talks_to_server(command: str) -> bool:
    if re.search(r"pip install|pytest|switchboard serve", command):
        return False
    return DOC_BASE in command or ".venv/bin/switchboard" in command


@dataclass
class Runner:
    """Runs a page's examples in ``cwd`` against the server at ``base``."""

    base: str
    cwd: Path
    env: dict[str, str]
    task_id: str | None = None
    failures: list[str] = field(default_factory=list)

    def run_page(self, page: Path) -> list[str]:
        """Run every example of ``page``; the failures, one text each."""
        for example in examples(page):
            problem = self.run(example)
            if problem:
                self.failures.append(f"{page.name}:{example.line}: {problem}")
        return self.failures

    def run(self, example: Example) -> str | None:
        """Run one example; a description of what went wrong, or None."""
        command = example.command.replace(DOC_BASE, self.base)
        command = command.replace(".venv/bin/switchboard", f"{sys.executable} -m router.cli")
        if "<task id>" in command:
            if self.task_id is None:
                return "<task id> is used before any command printed a task"
            command = command.replace("<task id>", self.task_id)
        done = subprocess.run(
            ["sh", "-c", command],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        out = done.stdout.replace(self.base, DOC_BASE)
        ids = _TASK_ID.findall(out)
        if ids:
            self.task_id = ids[-1]
        if done.returncode != 0:
            return f"exit status {done.returncode}\n{example.command}\n{done.stderr}{out}"
        if example.output is None:
            return None
        if example.output_kind == "json":
            problem = json_mismatch(example.output, out)
        else:
            problem = text_mismatch(example.output, out)
        if problem:
            return f"{problem}\ncommand:\n{example.command}\nprinted:\n{out}"
        return None


def json_mismatch(expected_text: str, actual_text: str) -> str | None:
    """Why ``actual_text`` does not match the JSON pattern ``expected_text``, or None."""
    expected = json.loads(expected_text)
    try:
        actual = json.loads(actual_text)
    except ValueError:
        return "the command did not print JSON"
    return _mismatch(expected, actual, "$")


def _mismatch(expected: Any, actual: Any, path: str) -> str | None:
    if isinstance(expected, str) and WILDCARD in expected:
        if expected == WILDCARD:
            return None
        if isinstance(actual, str) and _pattern(expected).fullmatch(actual):
            return None
        return f"{path}: {actual!r} does not match {expected!r}"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}: no member {key!r} (members: {sorted(actual)})"
            problem = _mismatch(value, actual[key], f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {actual!r}"
        open_ended = bool(expected) and expected[-1] == WILDCARD
        items = expected[:-1] if open_ended else expected
        if len(actual) < len(items) or (not open_ended and len(actual) != len(items)):
            return f"{path}: {len(actual)} item(s), the page shows {len(items)}: {actual!r}"
        for n, item in enumerate(items):
            problem = _mismatch(item, actual[n], f"{path}[{n}]")
            if problem:
                return problem
        return None
    if expected != actual or type(expected) is not type(actual):
        return f"{path}: {actual!r}, the page shows {expected!r}"
    return None


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(piece) for piece in _DOTS.split(expected)), re.S)


def text_mismatch(expected_text: str, actual_text: str) -> str | None:
    """Why ``actual_text`` does not match the text pattern ``expected_text``, or None."""
    pattern = ""
    for line in expected_text.splitlines():
        if not line.strip():
            continue
        if line.strip() == WILDCARD:
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pieces = _DOTS.split(line.rstrip())
            pattern += "[^\n]*?".join(re.escape(piece) for piece in pieces) + r"\n"
    actual = "".join(line.rstrip() + "\n" for line in actual_text.splitlines() if line.strip())
    if re.fullmatch(pattern, actual):
        return None
    return "the output differs from the page's"
