"""Every file a comment, a docstring or a doc points to exists: a newcomer following
``see domain/record/incident.py`` finds it. (docs/decisions.md is a log: it names files as they were.)"""

from __future__ import annotations

import re
import subprocess

from tests.conftest import ROOT

# Where a pointer may count from: the repository, each package's own root, the docs, the sample events.
BASES = [
    ROOT,
    ROOT / "layers" / "recovery_core" / "hyperpod_recovery",
    ROOT / "layers" / "recovery_core",
    ROOT / "training" / "hyperpod_recovery",
    ROOT / "agent" / "hyperpod_recovery_agent",
    ROOT / "agent",
    ROOT / "cli" / "hyperpod_recovery_cli",
    ROOT / "docs",
    ROOT / "events",
]
POINTER = re.compile(r"(?<![\w./~$<{*-])((?:[\w-]+/)+[\w.-]*\w\.(?:py|md|json|yaml|yml|toml|sh|service))\b")
# Written by a run, not kept: the drill's report; and examples of paths in a user's bucket or a temp dir,
# or in a training process's stack (py-spy dumps name files relative to the process's sys.path).
GENERATED_OR_EXAMPLE = ("out/", "step-0", "llama", "run/", "configs/", "a/b", "1000/", "s/", "events/drills/NAME",
                        "torch/", "multiprocessing/", "http/")  # fmt: skip
NOT_SCANNED = ("docs/decisions.md", "tests/golden/")


def _scanned() -> list[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [f for f in files if f.endswith((".py", ".md", ".yaml", ".toml")) and not f.startswith(NOT_SCANNED)]


def test_every_file_a_comment_or_doc_points_to_exists() -> None:
    missing = []
    for name in _scanned():
        path = ROOT / name
        for match in POINTER.finditer(path.read_text(errors="replace")):
            pointer = match.group(1)
            if pointer.startswith(GENERATED_OR_EXAMPLE):
                continue
            if not any((base / pointer).exists() for base in [*BASES, path.parent]):
                missing.append(f"{name}: {pointer}")
    assert missing == []
