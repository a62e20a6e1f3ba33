"""The ``hyperpod-recovery`` console script (pyproject's entry point, and ``python -m``): the command
line of app.py on this process's arguments and streams. Callers that bring their own clients and
clock (tests, the sandbox's on-call practice) call ``app.run``, never this module."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

# The names scripts and tests know the command line by.
from hyperpod_recovery_cli.app import EXIT_AWS as EXIT_AWS
from hyperpod_recovery_cli.app import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from hyperpod_recovery_cli.app import EXIT_NO as EXIT_NO
from hyperpod_recovery_cli.app import EXIT_OK as EXIT_OK
from hyperpod_recovery_cli.app import EXIT_S3 as EXIT_S3
from hyperpod_recovery_cli.app import EXIT_USAGE as EXIT_USAGE
from hyperpod_recovery_cli.app import Invocation as Invocation
from hyperpod_recovery_cli.app import run
from hyperpod_recovery_cli.aws_session import AwsClients as AwsClients


def main(argv: Sequence[str] | None = None, **given: Any) -> int:
    """``hyperpod-recovery ARGS``: its exit code. ``given``: app.run's clients, streams and clock."""
    return run(argv, **given)


if __name__ == "__main__":
    sys.exit(main())
