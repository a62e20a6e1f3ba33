"""``hyperpod-recovery drills DIR [--junit FILE]``: every scenario of a folder run through the sandbox
(an in-memory AWS with the real state machines and handlers), each held to its ``expect`` block: a
table, JUnit XML, exit 1 if one fails. The same as ``make drills``.

The sandbox is not part of the operator's wheel (it brings moto and the whole test double): this
command runs from a clone of hyperpod-recovery (its folder, or any folder under it, as the current
directory) and says so in one line anywhere else.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any, TextIO

EXIT_USAGE = 2


class SandboxMissing(Exception):
    """The sandbox cannot be imported here (exit code 2, one line)."""


def _sandbox_drills() -> Any:
    # (imported by name: the sandbox is a clone's test double, not a dependency of this package)
    try:
        return importlib.import_module("sandbox.drills")  # a clone whose root is on the path (pytest, python -m)
    except ImportError:
        root = next((d for d in (Path.cwd(), *Path.cwd().parents) if (d / "sandbox" / "drills.py").is_file()), None)
        if root is None:
            raise SandboxMissing(
                "drills runs in the sandbox, which comes with a clone of hyperpod-recovery, not with this install: "
                "run it (or make drills) from the clone's folder"
            ) from None
        sys.path.insert(0, str(root))
        try:
            return importlib.import_module("sandbox.drills")
        except ImportError as exc:  # the clone is here, its test dependencies (moto) are not in this install
            raise SandboxMissing(
                f"drills runs in the sandbox, which needs the clone's own environment ({exc.name or exc} is not installed here): "
                f"run make drills, or {root}/.venv/bin/hyperpod-recovery drills"
            ) from None


def run_drills(args: argparse.Namespace, out: TextIO) -> int:
    folder: Path = args.folder
    if not folder.is_dir():
        raise SandboxMissing(f"{folder}: not a folder of scenarios")
    drills = _sandbox_drills()
    try:
        code: int = drills.run_folder(folder, args.out, args.junit, out)
    except drills.ScenarioError as exc:
        raise SandboxMissing(str(exc)) from exc
    return code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="a folder of drill scenarios (events/drills, or your own)")
    parser.add_argument("--junit", type=Path, default=None, help="write JUnit XML here (one testcase per scenario)")
    parser.add_argument("--out", type=Path, default=Path("out") / "drills", help="where the reports and logs go (default out/drills)")
