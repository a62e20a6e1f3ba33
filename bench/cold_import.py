"""Cold import time of each handler (handler + the RecoveryCoreLayer package) against a bare boto3
handler, measured in the same run.

Every sample is a fresh interpreter that imports ``app`` the way the Lambda runtime does (the
function's folder and the layer on sys.path), timing only the import. Prints the median of
--samples runs per handler; the bare handler is sampled once beside each of them. Run with the
project venv (Python 3.13 where installed, as on Lambda, but x86_64 here and arm64 there: read the
figures as relative, the bare boto3 handler is the yardstick). The goal: at most 2.0x for every handler.

    python bench/cold_import.py [--samples 9] [--only intake reconcile_execution]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER = ROOT / "layers" / "recovery_core"
PROBE = """
import sys, time
sys.path[:0] = [{code!r}, {layer!r}]
start = time.perf_counter()
import app
app.lambda_handler
print(time.perf_counter() - start)
"""
BARE_HANDLER = "import boto3\n\n\ndef lambda_handler(event, context):\n    return {}\n"


ENV = {
    "AWS_DEFAULT_REGION": "us-west-2",
    "POWERTOOLS_SERVICE_NAME": "hyperpod-recovery",
    "POWERTOOLS_METRICS_NAMESPACE": "HyperPodRecovery",
    "PATH": "/usr/bin:/bin",
}


def sample_once(code_dir: Path) -> float:
    """Milliseconds a fresh interpreter takes to import the handler in ``code_dir``."""
    probe = PROBE.format(code=str(code_dir), layer=str(LAYER))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=ENV)
    return float(out.stdout.strip()) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=[], help="measure only these handlers (function folder names)")
    args = parser.parse_args()

    apps = [app for app in sorted((ROOT / "functions").glob("*/app.py")) if not args.only or app.parent.name in args.only]
    rows = []
    baseline_timings: list[float] = []
    with tempfile.TemporaryDirectory() as bare:
        (Path(bare) / "app.py").write_text(BARE_HANDLER)
        for app in apps:
            timings = []
            # The yardstick is sampled beside every handler, so a busy moment slows both alike.
            for _ in range(args.samples):
                baseline_timings.append(sample_once(Path(bare)))
                timings.append(sample_once(app.parent))
            rows.append((app.parent.name, statistics.median(timings), min(timings), max(timings)))
    baseline = statistics.median(baseline_timings)

    print(f"cold import, median of {args.samples} fresh interpreters, Python {sys.version.split()[0]}")
    print(f"{'handler':<24}{'median ms':>11}{'min':>8}{'max':>8}{'vs boto3-only':>16}")
    print(f"{'(bare boto3 handler)':<24}{baseline:>11.1f}{min(baseline_timings):>8.1f}{max(baseline_timings):>8.1f}")
    for name, median, low, high in rows:
        print(f"{name:<24}{median:>11.1f}{low:>8.1f}{high:>8.1f}{median - baseline:>+10.1f} ms {median / baseline:>4.1f}x")
    worst = max(rows, key=lambda row: row[1])
    print(f"worst: {worst[0]} {worst[1] / baseline:.2f}x the bare boto3 handler")


if __name__ == "__main__":
    main()
