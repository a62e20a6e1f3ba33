"""``hyperpod-recovery drills DIR [--junit FILE]``: every scenario of a folder run through the sandbox
(an in-memory AWS with the real state machines and handlers), each held to its ``expect`` block: a
table, JUnit XML, exit 1 if one fails. The same as ``make drills``.

The sandbox is not part of the operator's wheel (it brings moto and the whole test double): this
command runs from a clone of hyperpod-recovery (its folder, or any folder under it, as the current
directory) and says so in one line anywhere else. It runs the clone's own suite as a user would,
``python -m sandbox drills``, in a process of its own: the shipped command never imports the sandbox.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

EXIT_USAGE = 2
# The child's own ending when an import fails: the clone is here, its test dependencies are not.
_NOT_INSTALLED = re.compile(r"^ModuleNotFoundError: No module named '([^']+)'", re.MULTILINE)


class SandboxMissing(Exception):
    """The sandbox cannot be run here (exit code 2, one line)."""


def _clone_root() -> Path | None:
    """The clone whose sandbox runs: one on this interpreter's path (pytest, python -m), else the
    current folder or one above it."""
    here = [Path(p or ".").resolve() for p in sys.path] + [Path.cwd(), *Path.cwd().parents]
    return next((d for d in here if (d / "sandbox" / "drills.py").is_file()), None)


def _command(args: argparse.Namespace) -> list[str]:
    junit = ["--junit", str(args.junit)] if args.junit is not None else []
    jobs = ["--jobs", str(args.jobs)] if getattr(args, "jobs", None) is not None else []
    return [sys.executable, "-m", "sandbox", "drills", str(args.folder), "--out", str(args.out), *junit, *jobs]


def run_drills(args: argparse.Namespace, out: TextIO) -> int:
    folder: Path = args.folder
    if not folder.is_dir():
        raise SandboxMissing(f"{folder}: not a folder of scenarios")
    root = _clone_root()
    if root is None:
        raise SandboxMissing(
            "drills runs in the sandbox, which comes with a clone of hyperpod-recovery, not with this install: "
            "run it (or make drills) from the clone's folder"
        )
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryFile("w+") as err:
        # The suite's table streams as it runs; its errors are read once it ended (a file: no pipe fills).
        with subprocess.Popen(  # noqa: S603 (this interpreter, the clone's module, the user's own paths)
            _command(args), stdout=subprocess.PIPE, stderr=err, text=True, env=os.environ | {"PYTHONPATH": path}
        ) as child:
            assert child.stdout is not None  # stdout=PIPE
            for line in child.stdout:
                out.write(line)
                out.flush()
        code = child.returncode
        err.seek(0)
        said = err.read()
    missing = _NOT_INSTALLED.search(said)
    if code != 0 and missing is not None:
        raise SandboxMissing(
            f"drills runs in the sandbox, which needs the clone's own environment ({missing.group(1)} is not installed here): "
            f"run make drills, or {root}/.venv/bin/hyperpod-recovery drills"
        )
    last = said.strip().splitlines()[-1] if said.strip() else ""
    if code == EXIT_USAGE and last.startswith("error: "):  # the suite refused its usage in one line
        raise SandboxMissing(last.removeprefix("error: "))
    sys.stderr.write(said)
    return code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="a folder of drill scenarios (events/drills, or your own)")
    parser.add_argument("--junit", type=Path, default=None, help="write JUnit XML here (one testcase per scenario)")
    parser.add_argument("--out", type=Path, default=Path("out") / "drills", help="where the reports and logs go (default out/drills)")
    parser.add_argument("--jobs", type=int, default=None, help="drills run at once, one process each (default: the machine's cores)")
