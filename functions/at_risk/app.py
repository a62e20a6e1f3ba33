"""At Risk (SNS: Alertmanager alerts and CloudWatch alarms; EventBridge alarm state changes; its
schedule): each at-risk signal kept once per episode as a verdict with its evidence; an enforced one
starts its planned swap; the tick settles outcomes and reads the node history (steps/at_risk.py)."""

from hyperpod_recovery.metric_names import AT_RISK
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.at_risk import at_risk


@counted_run(AT_RISK, "at-risk signals read")
def lambda_handler(event: dict, context, deps: Dependencies):
    return at_risk(event, deps.at_risk_ports())
