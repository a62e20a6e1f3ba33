"""What the operator's tools accept from a command line or a file, checked before anything reaches AWS.

Every refusal is one line naming the field (exit code 2). Text that is stored and later printed in a
terminal (a breaker's reason, the name it was reset by, a drill's reason) is refused when it holds a
control or format character: an escape sequence kept in the ledger would redraw the screen of
whoever reads the breaker's history, a bidirectional override would show other words than the ones
stored. Stripping them instead would store something the operator did not write.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import unicodedata
from collections.abc import Callable
from typing import Any, NoReturn


class InputRefused(ValueError):
    """An argument or a file's field the command cannot take; the message names it (exit code 2)."""


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks become spaces, any other control or format
    character its escape (\\x1b, \\u202e), so an error message can neither span lines nor drive
    the terminal, whatever it quotes."""
    flat = " ".join(text.splitlines()) if "\n" in text or "\r" in text else text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in flat)


def shown(value: Any, limit: int = 40) -> str:
    """A JSON value as a message quotes it: JSON syntax (its type shows), cut to ``limit``."""
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def control_character(value: str) -> tuple[int, str] | None:
    """The first control or format character of ``value`` (Unicode category C*), with its index."""
    for index, char in enumerate(value):
        if unicodedata.category(char).startswith("C"):
            return index, char
    return None


def plain_text(field: str, value: str, *, limit: int, say: str = "give some text") -> str:
    """``value`` as stored text: not blank, at most ``limit`` characters, no control or format
    character (``say``: what the refusal of a blank one asks for). Returns it without its
    surrounding spaces."""
    found = control_character(value)
    if found is not None:
        index, char = found
        escaped = char.encode("unicode_escape").decode("ascii")
        raise InputRefused(f"{field} holds a control character ({escaped} at position {index + 1}): give plain text")
    stripped = value.strip()
    if not stripped:
        raise InputRefused(f"{field} is empty: {say}")
    if len(stripped) > limit:
        raise InputRefused(f"{field} is {len(stripped)} characters long; at most {limit}")
    return stripped


# A Step Functions execution's ARN: arn:<partition>:states:<region>:<account>:execution:<machine>:<name>.
EXECUTION_ARN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:execution:[^:]+:(?P<name>[^:]+)$")


def incident_id(text: str) -> str:
    """The incident id (the execution's name, the ledger's key) a user means: the id itself, or the
    execution's ARN (as the Step Functions console, the AWS CLI or an older drill print it)."""
    match = EXECUTION_ARN.fullmatch(text.strip())
    return match["name"] if match else text


STACK_VARIABLE = "HYPERPOD_RECOVERY_STACK"  # --stack's default on every command that takes one
# argparse's refusal of a missing required option or group ("...required: --stack", "one of the
# arguments --stack --cluster is required"): the stack may come from the variable instead.
_STACK_MISSING = re.compile(r"required.*--stack\b|--stack\b.*required")


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other failure of the command (exit code 2):
    the usage is what ``--help`` prints."""

    def error(self, message: str) -> NoReturn:
        if _STACK_MISSING.search(message):
            message += f" (or set ${STACK_VARIABLE})"
        self.exit(2, f"{self.prog}: error: {for_make(one_line(message))} (see {self.prog} --help)\n")


# Under make (the Makefile's targets set HYPERPOD_RECOVERY_VIA_MAKE=1), messages name make's variables:
# an option, the variable that passes it; a switch, the variable that sets it.
VIA_MAKE = "HYPERPOD_RECOVERY_VIA_MAKE"
MAKE_VARIABLES = {
    "--stack": "STACK",
    "--cluster": "CLUSTER",
    "--checkpoint-buckets": "BUCKETS",
    "--email": "EMAIL",
    "--param": "PARAMS",
    "--region": "REGION",
    "--scenario": "SCENARIO",
}
MAKE_SWITCHES = {"--yes": "YES=1", "--disarm": "DISARM=1", "--live": "LIVE=1"}
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)(?![\w-])(?: ('[^']*'|\"[^\"]*\"|[A-Z]+\b))?")


def for_make(message: str, environ: Any = None) -> str:
    """``message`` as make's user reads it: ``--stack NAME`` becomes ``STACK=NAME``, ``--stack 'x'``
    ``STACK='x'``, a bare ``--stack`` ``STACK=...``, ``--yes`` ``YES=1``; unchanged outside make."""
    if (os.environ if environ is None else environ).get(VIA_MAKE) != "1":
        return message

    def named(match: re.Match[str]) -> str:
        option, value = match.group(1), match.group(2)
        if option in MAKE_SWITCHES:
            return MAKE_SWITCHES[option] + (f" {value}" if value else "")
        if option not in MAKE_VARIABLES:
            return match.group(0)
        return f"{MAKE_VARIABLES[option]}={value or '...'}"

    return _OPTION.sub(named, message)


def bounded(low: float, high: float, *, above: bool = False, whole: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number from ``low`` (excluded with ``above``) to ``high``, a whole
    one with ``whole``. nan, inf and numbers past the range are refused in one line naming the range
    (argparse names the argument): every figure a planner or a bench is given is one its math can take."""
    kind = "a whole number" if whole else "a number"
    said = f"{kind} {'above' if above else 'from'} {_plain(low)} {'and at most' if above else 'to'} {_plain(high)}"

    def parse(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (low < value if above else low <= value) and value <= high):
            raise argparse.ArgumentTypeError(f"{said}, not {one_line(text)[:40]!r}")
        return value

    return parse


def _plain(number: float) -> str:
    """1000000 as 1,000,000 (not 1e+06); a fraction as it is."""
    return f"{int(number):,}" if float(number).is_integer() and abs(number) < 1e15 else f"{number:g}"
