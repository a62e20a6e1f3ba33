"""At Risk (SNS: Alertmanager alerts and CloudWatch alarms; EventBridge alarm state changes; its
schedule): each at-risk signal kept once per episode as a verdict with its evidence; an enforced one
starts its planned swap; the tick settles outcomes and reads the node history (steps/at_risk.py)."""

from typing import cast

from hyperpod_recovery.metric_names import AT_RISK
from hyperpod_recovery.ports import AtRiskLedger, PlannedSwaps
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.at_risk import AtRiskPorts, at_risk


@counted_run(AT_RISK, "at-risk signals read")
def lambda_handler(event: dict, context, deps: Dependencies):
    s = deps.settings
    ports = AtRiskPorts(
        ledger=cast(AtRiskLedger, deps.ledger),  # (the stack's ledger holds every item family)
        cluster=deps.cluster,
        swaps=cast(PlannedSwaps, deps.workflows),  # (the Step Functions adapter)
        settings=s.signal_settings,
        cluster_name=s.cluster_name,
        orchestrator=s.orchestrator,
        limits=deps.event_age_limits,
        now=deps.now(),
        dry_run=s.dry_run,
        history_days=s.at_risk_history_days,
    )
    return at_risk(event, ports)
