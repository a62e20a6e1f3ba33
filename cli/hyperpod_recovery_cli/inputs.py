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


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other failure of the command (exit code 2):
    the usage is what ``--help`` prints."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


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
