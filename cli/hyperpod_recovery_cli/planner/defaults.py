"""What the planner assumes when a figure is neither measured nor given, each with where it comes from:
the pipeline's own drills for the phases a stack has no parameter for (measured_defaults.py, written by
tools/planner_defaults.py from the drill goldens), template.yaml's parameter defaults for the others,
published figures or a plain assumption for the rest. Printed as ``default``."""

from __future__ import annotations

from hyperpod_recovery_cli.planner.measured_defaults import MEASURED
from hyperpod_recovery_cli.planner.model import FailureRate, Figure, RecoveryPhase, Share

# (a drill measures the sandbox's pipeline: its agent's and AWS doubles' timings, on virtual time)
_FROM_DRILLS: dict[RecoveryPhase, Figure] = {
    "detect": Figure(value=MEASURED["detect"][0], provenance="default", source=MEASURED["detect"][1]),
    "cordon": Figure(value=MEASURED["cordon"][0], provenance="default", source=MEASURED["cordon"][1]),
    "replace": Figure(value=MEASURED["replace"][0], provenance="default", source=MEASURED["replace"][1]),
}
PHASES: dict[RecoveryPhase, Figure] = {
    **_FROM_DRILLS,
    "rejoin": Figure(value=600, provenance="default", source="template.yaml ExpectedReplacementSeconds default"),
    "health_gate": Figure(
        value=120,
        provenance="default",
        source="template.yaml ReplacementHealthCheckSeconds default: the check's time limit, an upper bound",
    ),
    "restart": Figure(value=300, provenance="default", source="template.yaml ElasticGrowBackSeconds default (one restart)"),
}
# The phases a deployed stack's own parameters stand in for until they are measured (template.yaml).
STACK_PARAMETERS: dict[RecoveryPhase, str] = {
    "rejoin": "ExpectedReplacementSeconds",
    "health_gate": "ReplacementHealthCheckSeconds",
    "restart": "ElasticGrowBackSeconds",
}
CHECKPOINT_INTERVAL = Figure(
    value=1800, provenance="default", source="assumption: every 30 min (Meta models 5 to 60 min: Kokolis et al., HPCA 2025)"
)
CHECKPOINT_COST = Figure(
    value=60,
    provenance="default",
    source="assumption: a 60 s blocking write, a synchronous save (async: O(10 s), Kokolis et al., HPCA 2025)",
)

# Published node failure rates (per 1,000 node-days of 8-GPU nodes), by the name --failure-rate takes.
RATE_PRESETS: dict[str, FailureRate] = {
    "llama3": FailureRate(
        failures=419, node_days=2048 * 54, provenance="given", source="Llama 3 (arXiv 2407.21783): 419 unexpected, 2,048 nodes, 54 days"
    ),
    "llama3-hw": FailureRate(per_1000_node_days=2.96, provenance="given", source="Llama 3, the ~78 % hardware share only"),
    "rsc1": FailureRate(per_1000_node_days=6.50, provenance="given", source="Meta RSC-1 (Kokolis et al., HPCA 2025), A100"),
    "rsc2": FailureRate(per_1000_node_days=2.34, provenance="given", source="Meta RSC-2 (Kokolis et al., HPCA 2025), A100"),
}
FAILURE_RATE = RATE_PRESETS["llama3"].model_copy(update={"provenance": "default"})

# Planned swaps (docs/goodput.md, "Planned swaps: what the literature gives"): no study publishes the recall or the
# lead time of precursors of GPU failures, so each figure is an ASSUMPTION until a fleet's verdicts measure it
# (`hyperpod-recovery verdicts`). The recall is used only where planned swaps are a change to consider.
PRECURSOR_RECALL = Share(
    value=0.25,
    provenance="default",
    source="ASSUMPTION: no published recall for GPU failures; under the ~40 % cap of correctable-error prediction for DRAM "
    "(Baeg et al.: ~60 % of DIMMs with uncorrectable errors had no correctable one first)",
)
PRECURSOR_LEAD = Figure(
    value=3600,
    provenance="default",
    source="ASSUMPTION: no published lead time for GPU failures; 1 h, more than a checkpoint period, so a swap waits for the commit",
)
PRECURSOR_FALSE_POSITIVE = Share(
    value=0.5,
    provenance="default",
    source="ASSUMPTION: half the verdicts false (failure predictors' precision: 46 % to 85 %, Liu et al., SYSTOR 2023)",
)
SWAP_LOST = Figure(
    value=10, provenance="default", source="ASSUMPTION: the planned swap's goal, at most 10 s of training past the checkpoint's commit"
)
