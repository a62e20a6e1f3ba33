"""At Risk's tick (every 15 minutes): each pending at-risk verdict's outcome, settled once known
(bounded per tick), and the ledger's node history as verdicts (steps/at_risk.py ``tick``)."""

from typing import cast

from hyperpod_recovery.metric_names import AT_RISK
from hyperpod_recovery.ports import AtRiskLedger, PlannedSwaps
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.at_risk_tick import AtRiskPorts, tick


@counted_run(AT_RISK, "at-risk tick")
def lambda_handler(event: dict, context, deps: Dependencies):
    s = deps.settings
    ports = AtRiskPorts(
        ledger=cast(AtRiskLedger, deps.ledger),  # (the stack's ledger holds every item family)
        cluster=deps.cluster,
        swaps=cast(PlannedSwaps, deps.workflows),  # (an enforced node_history verdict starts its swap)
        settings=s.signal_settings,
        cluster_name=s.cluster_name,
        orchestrator=s.orchestrator,
        limits=deps.event_age_limits,
        now=deps.now(),
        dry_run=s.dry_run,
        history_days=s.at_risk_history_days,
    )
    tick(ports)
    return dict(ports.counts)
