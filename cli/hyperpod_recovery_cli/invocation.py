"""What a command runs with (``Invocation``), the exit codes and the usage error every command
shares: a light module the command modules import without importing app.py (which imports them)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from hyperpod_recovery_cli.aws_session import AwsClients

EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_AWS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_S3 = EXIT_AWS  # the checkpoint commands' name for it


class UsageError(Exception):
    """The command cannot run with what it was given (exit code 2)."""


@dataclass
class Invocation:
    """What a command runs with: its parsed arguments, where to print, and AWS."""

    args: argparse.Namespace
    out: TextIO
    err: TextIO
    client: Callable[[str], Any] = field(default_factory=lambda: AwsClients(None))
    sleep: Callable[[float], None] = time.sleep
    stdin: TextIO = field(default_factory=lambda: sys.stdin)  # where a change is confirmed (a terminal)
    now: Callable[[], datetime] = field(default_factory=lambda: lambda: datetime.now(UTC))
