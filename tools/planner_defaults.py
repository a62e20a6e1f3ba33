"""``python tools/planner_defaults.py``: the goodput planner's defaults for the recovery phases a deployed
stack has no parameter for (detect, cordon, replace), measured in the pipeline's own drills.

Reads the drill goldens (tests/golden/drills/<drill>.json, each drill's report, rewritten by
``make golden``) and writes cli/hyperpod_recovery_cli/planner/measured_defaults.py: per phase the
seconds and where they were measured. tests/unit/goodput/test_measured_defaults.py fails when
regenerating gives another file (a drill's timings changed: run this again and commit the result).
The phases a stack has parameters for (rejoin, health gate, restart) keep those parameters' defaults
(cli/hyperpod_recovery_cli/planner/defaults.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "golden" / "drills"
TARGET = ROOT / "cli" / "hyperpod_recovery_cli" / "planner" / "measured_defaults.py"


@dataclass(frozen=True)
class Measurement:
    """A planner phase as one drill measures it: ``ledger`` the incident record's phases it is made of
    (as cli/hyperpod_recovery_cli/planner/measure.py LEDGER_PHASES maps them); ``from_fault``: from
    the scenario's fault to the end of those phases (detection), else their length."""

    phase: str
    drill: str
    ledger: tuple[str, ...]
    what: str
    from_fault: bool = False


# The slower of the pipeline's two ways to detect is the default (a health event: 5 s in drill default).
MEASUREMENTS = (
    Measurement("detect", "job-hang", ("detect", "assess"), "a silent hang to the go-ahead", from_fault=True),
    Measurement("cordon", "default", ("cordon", "find_jobs"), "draining the node and finding its jobs"),
    Measurement("replace", "default", ("replace",), "the replacement call"),
)
# What a reader should know beside a figure.
CAVEATS = {"replace": "the sandbox's SageMaker answers at once; a real call takes a second or so"}
# Shown beside the default, for the reader to weigh: the other way to detect.
ALSO = Measurement("detect", "default", ("detect", "assess"), "a HyperPod health event", from_fault=True)


def measure(measurement: Measurement, goldens: Path = GOLDENS) -> float:
    """Seconds, from the drill's first incident that went through the phases (its report's own times)."""
    report: dict[str, Any] = json.loads((goldens / f"{measurement.drill}.json").read_text())
    for incident in sorted(report["incidents"], key=lambda i: min((p["start"] for p in i["phases"]), default=0.0)):
        spans = [p for p in incident["phases"] if p["name"] in measurement.ledger]
        if not spans:
            continue
        if measurement.from_fault:
            fault_at = min(job["fault_at"] for job in report["jobs"] if job.get("fault_at") is not None) if report["jobs"] else None
            first_event = min(t["at"] for t in incident["timeline"])
            return round(max(p["end"] for p in spans) - (fault_at if fault_at is not None else first_event), 1)
        return round(sum(p["end"] - p["start"] for p in spans), 1)
    raise ValueError(f"drill {measurement.drill}: no incident went through {', '.join(measurement.ledger)}")


def source(measurement: Measurement, seconds: float) -> str:
    return f"measured in drill {measurement.drill}: {measurement.what}, {seconds:g} s"


def render(goldens: Path = GOLDENS) -> str:
    rows = []
    for measurement in MEASUREMENTS:
        seconds = measure(measurement, goldens)
        said = source(measurement, seconds)
        if measurement.phase == ALSO.phase:
            said += f" ({ALSO.what}: {measure(ALSO, goldens):g} s, drill {ALSO.drill})"
        if measurement.phase in CAVEATS:
            said += f" ({CAVEATS[measurement.phase]})"
        rows.append(
            f"    {json.dumps(measurement.phase)}: (\n        {seconds!r},\n        {json.dumps(said, ensure_ascii=False)},\n    ),"
        )
    body = "\n".join(rows)
    return (
        '"""The recovery phases a deployed stack has no parameter for, as the pipeline\'s own drills measure them.\n\n'
        "Written by tools/planner_defaults.py from tests/golden/drills/: do not edit; run it again when a drill's\n"
        'timings change (tests/unit/goodput/test_measured_defaults.py fails until then)."""\n\n'
        "from __future__ import annotations\n\n"
        "# phase: (seconds, where they were measured)\n"
        f"MEASURED: dict[str, tuple[float, str]] = {{\n{body}\n}}\n"
    )


def main() -> int:
    TARGET.write_text(render())
    print(f"written: {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
