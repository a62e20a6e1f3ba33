"""Every ``hyperpod-recovery`` command line the docs show is one the command's own argument parser takes:
a reader who pastes it (placeholders filled in) gets the command, not a usage error."""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from collections.abc import Iterator

import pytest

from hyperpod_recovery_cli.app import _parser
from tests.docs.markdown import CodeBlock
from tests.docs.test_markdown import DOCS, HISTORY

PROG = "hyperpod-recovery"
SHELL_BLOCKS = ("bash", "sh", "shell", "console")
# Where the command ends and the shell goes on (a word's "a|b" is the docs' alternatives, not a pipe).
SHELL_OPERATOR = re.compile(r";|\s(?:&&|\|\||\||>|>>|<|&|2>&1)(?:\s|$)")


def command_lines(block: CodeBlock) -> Iterator[str]:
    """The command lines of a block: in a shell block each line that starts with the command, in any
    block a ``$ hyperpod-recovery …`` prompt line; backslash continuations joined."""
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line, prompted = lines[i].strip(), lines[i].lstrip().startswith("$ ")
        line = line.removeprefix("$ ")
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        if line.startswith(PROG + " ") and (prompted or block.info in SHELL_BLOCKS):
            yield line
        i += 1


def variants(line: str) -> list[list[list[str]]]:
    """The argument vectors a documented line stands for: per alternative of an ``a|b`` word, the line
    without its ``[optional]`` parts and with them. Placeholders (``<stack>``, ``$VAR``) become values."""
    line = re.sub(r"\s#.*$", "", line)  # a comment
    line = re.sub(r"<[^>]*>", "x", line)  # <stack>, <cluster ARN>
    line = re.sub(r"\"?\$\{?[A-Z_]+\}?\"?", "1", line)  # "$SLURM_JOB_NAME", $WORLD_SIZE
    without = re.sub(r"\[[^\]]*\]", "", line)
    with_them = re.sub(r"\[([^\]]*)\]", r"\1", line)
    found = []
    for text in (without, with_them):
        words = shlex.split(SHELL_OPERATOR.split(text, maxsplit=1)[0])[1:]
        found.append([w.split("|") if "|" in w and not w.startswith("-") else [w] for w in words])
    return [[list(combo) for combo in itertools.product(*words)] for words in found]


def parse_problem(argv: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            _parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code:
            return err.getvalue().strip().splitlines()[-1]
    return None


def line_problem(line: str) -> str | None:
    """None when every alternative of the line parses, with or without its optional parts."""
    without, with_them = variants(line)
    for plain, full in zip(without, with_them, strict=True):
        problems = [parse_problem(plain), parse_problem(full)]
        if all(problems):
            return problems[0]
    return None


SHOWN = sorted(
    {
        (path.name, block.line, line)
        for path, doc in DOCS.items()
        if path != HISTORY
        for block in doc.blocks
        for line in command_lines(block)
    }
)


def test_the_docs_show_commands_of_every_kind_the_parser_is_asked_about() -> None:
    groups = {line.split()[1] for _, _, line in SHOWN}
    assert {"breaker", "checkpoint", "drill", "incidents", "locks", "goodput", "verdicts"} <= groups


@pytest.mark.parametrize(("doc", "line", "command"), SHOWN, ids=[f"{d}:{n}" for d, n, _ in SHOWN])
def test_a_command_line_the_docs_show_is_one_the_cli_parses(doc: str, line: int, command: str) -> None:
    assert line_problem(command) is None


def test_the_runbooks_breaker_commands_name_the_stack_as_every_on_call_command_does() -> None:
    runbook = next(doc for path, doc in DOCS.items() if path.name == "runbook.md")
    breaker = [line for block in runbook.blocks for line in command_lines(block) if line.split()[1] == "breaker"]
    assert breaker and all("--stack " in line for line in breaker)


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("hyperpod-recovery breaker reset --stack s", "the following arguments are required: --reason"),
        ("hyperpod-recovery checkpoint latest s3://bucket/prefix --jobs x", "unrecognized arguments: --jobs x"),
        ("hyperpod-recovery breaker open --stack s", "invalid choice: 'open'"),
    ],
)
def test_given_a_command_line_the_cli_refuses_when_checked_then_its_usage_error_is_reported(command: str, problem: str) -> None:
    found = line_problem(command)
    assert found is not None and problem in found


def test_a_documented_line_with_alternatives_and_optional_parts_parses_when_each_alternative_does() -> None:
    assert line_problem("hyperpod-recovery breaker status|reset --stack <stack> [--reason '...']   # a comment") is None
    assert line_problem("hyperpod-recovery locks --stack S; echo done") is None
