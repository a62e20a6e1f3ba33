"""Import HyperPod Hangs (a CloudWatch Logs subscription on the cluster's log group): each
HANG_DETECTED event of HyperPod's Slurm hung job detection becomes a verdict of rule hyperpod_hang,
kept once per job and episode, observe-only, and told once (steps/import_hyperpod_hangs.py)."""

from hyperpod_recovery.metric_names import VERDICT_NOTICES
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.import_hyperpod_hangs import Teller, import_hyperpod_hangs


@counted_run(VERDICT_NOTICES, "hyperpod hang events read")
def lambda_handler(event: dict, context, deps: Dependencies):
    return import_hyperpod_hangs(
        event=event,
        ledger=deps.ledger,
        teller=Teller(deps.notifier, deps.deployment, deps.settings.dry_run),
        cluster=deps.settings.cluster_name,
        mode=deps.settings.hyperpod_hang_mode,
        limits=deps.event_age_limits,
        now=deps.now(),
    )
