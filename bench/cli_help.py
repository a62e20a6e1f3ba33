"""Wall time of ``hyperpod-recovery --help``, as an operator runs it: the installed console script,
a fresh process each time. Prints the median and p90 wall time of --runs runs, then the modules that
took longest to import in one ``python -X importtime`` run of the same script (cumulative, top --top).

The goal (issue 49): a median under 0.5 s on the project's machine. It is a benchmark, not a test:
the suite holds only what --help imports (tests/cli/test_lazy_commands.py), never a time.

    python bench/cli_help.py [--runs 15] [--top 12] [--args "--help"] [--script .venv/bin/hyperpod-recovery]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".venv" / "bin" / "hyperpod-recovery"


def wall(command: list[str]) -> float:
    """Seconds one run of ``command`` takes, start to exit."""
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def top_importers(script: Path, args: list[str], top: int) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the ``top`` slowest imports of one run, from -X importtime."""
    interpreter = script.read_text().splitlines()[0].removeprefix("#!").strip() or sys.executable
    run = subprocess.run(
        [interpreter, "-X", "importtime", str(script), *args],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"COLUMNS": "100"},
    )
    rows = []
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|", 2)
        rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes to time (default 15)")
    parser.add_argument("--top", type=int, default=12, help="slowest imports to list (default 12)")
    parser.add_argument("--args", default="--help", help='the command line after the script (default "--help")')
    parser.add_argument("--script", type=Path, default=SCRIPT, help="the console script (default: .venv/bin/hyperpod-recovery)")
    options = parser.parse_args()
    args = shlex.split(options.args)
    command = [str(options.script), *args]
    wall(command)  # one unmeasured run: the files in the page cache, as for an operator's second call
    times = sorted(wall(command) for _ in range(options.runs))
    p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
    load = os.getloadavg()[0]
    print(f"{shlex.join(['hyperpod-recovery', *args])}: {options.runs} runs, median {statistics.median(times):.3f} s, p90 {p90:.3f} s")
    print(f"(load average {load:.2f} on {os.cpu_count()} cores while measuring)")
    print("slowest imports (cumulative ms, one -X importtime run):")
    for micros, name in top_importers(options.script, args, options.top):
        print(f"  {micros / 1000:8.1f}  {name}")


if __name__ == "__main__":
    main()
