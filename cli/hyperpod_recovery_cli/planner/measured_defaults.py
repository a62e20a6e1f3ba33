"""The recovery phases a deployed stack has no parameter for, as the pipeline's own drills measure them.

Written by tools/planner_defaults.py from tests/golden/drills/: do not edit; run it again when a drill's
timings change (tests/unit/goodput/test_measured_defaults.py fails until then)."""

from __future__ import annotations

# phase: (seconds, where they were measured)
MEASURED: dict[str, tuple[float, str]] = {
    "detect": (
        61.6,
        "measured in drill job-hang: a silent hang to the go-ahead, 61.6 s (a HyperPod health event: 5 s, drill default)",
    ),
    "cordon": (
        2.2,
        "measured in drill default: draining the node and finding its jobs, 2.2 s",
    ),
    "replace": (
        0.0,
        "measured in drill default: the replacement call, 0 s (the sandbox's SageMaker answers at once; a real call takes a second or so)",
    ),
}
