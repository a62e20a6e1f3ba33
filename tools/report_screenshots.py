"""Rewrite the reference screenshots of the drill report (tests/golden/screenshots/), one per drill family.

    python tools/report_screenshots.py [FAMILY ...]      (make golden runs it; needs chromium)

Run it after a change meant to alter how the report looks, on the machine type CI uses (Debian's
chromium and fonts), and look at the PNGs before committing them.
tests/integration/test_report_screenshots.py compares.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from sandbox.browser import ChromiumNotFound
from sandbox.screenshots import FAMILIES, REFERENCES, render_family


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"families (default: all): {', '.join(FAMILIES)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        parser.error(f"no drill family named {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
    REFERENCES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hpr-screens-") as folder:
        for family in args.families or FAMILIES:
            try:
                png = render_family(family, Path(folder))
            except ChromiumNotFound as exc:
                print(f"report_screenshots: {exc}", file=sys.stderr)
                return 3
            target = REFERENCES / f"{family}.png"
            target.write_bytes(png.read_bytes())
            print(target.relative_to(REFERENCES.parent.parent.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
