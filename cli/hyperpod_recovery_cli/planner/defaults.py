"""What the planner assumes when a figure is neither measured nor given, each with where it comes from
(../shared/reference/goodput-models.md; template.yaml's parameter defaults). Printed as ``default``."""

from __future__ import annotations

from hyperpod_recovery_cli.planner.model import FailureRate, Figure, RecoveryPhase

PHASES: dict[RecoveryPhase, Figure] = {
    "detect": Figure(value=600, provenance="default", source="ByteRobust (SOSP '25): a ~10 min NCCL timeout without active inspection"),
    "cordon": Figure(value=60, provenance="default", source="assumption: one controller-agent command"),
    "replace": Figure(value=60, provenance="default", source="assumption: the replacement call and its check"),
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
CHECKPOINT_INTERVAL = Figure(value=1800, provenance="default", source="assumption: every 30 min (research note §3)")
CHECKPOINT_COST = Figure(value=60, provenance="default", source="assumption: 60 s blocking write (research note §3)")

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
