"""At Risk's tick (every 15 minutes): each pending at-risk verdict's outcome, settled once known
(bounded per tick), and the ledger's node history as verdicts (steps/at_risk_tick.py ``tick``)."""

from hyperpod_recovery.metric_names import AT_RISK
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.at_risk_tick import tick


@counted_run(AT_RISK, "at-risk tick")
def lambda_handler(event: dict, context, deps: Dependencies):
    ports = deps.at_risk_ports(read_kube=True)  # (EKS: the nodes' warning-only conditions and events; None on Slurm)
    tick(ports)
    return dict(ports.counts)
