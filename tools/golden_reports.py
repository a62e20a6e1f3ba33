"""Rewrite the golden drill reports (tests/golden/drills/) from the drills as they run now.

    python tools/golden_reports.py [SCENARIO ...]      (make golden)

Run it after a change meant to alter what a drill does, and read the diff before committing it: it is
what the change did to every drill. tests/statemachine/test_drill_reports_unchanged.py compares.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from sandbox.golden import GOLDEN, scenarios, write_golden


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (events/drills/NAME.json); default: every simulated drill")
    args = parser.parse_args(argv)
    known = scenarios()
    unknown = sorted(set(args.scenarios) - set(known))
    if unknown:
        parser.error(f"no simulated drill named {', '.join(unknown)} (known: {', '.join(known)})")
    for name in args.scenarios or known:
        print(write_golden(name).relative_to(GOLDEN.parent.parent.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
