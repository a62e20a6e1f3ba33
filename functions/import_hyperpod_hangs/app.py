"""Import HyperPod Hangs (a CloudWatch Logs subscription on the cluster's log group): each
HANG_DETECTED event of HyperPod's Slurm hung job detection becomes a verdict of rule hyperpod_hang,
kept once per job and episode, observe-only (steps/import_hyperpod_hangs.py)."""

from hyperpod_recovery.observability import logger
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.import_hyperpod_hangs import import_hyperpod_hangs


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    counts = import_hyperpod_hangs(
        event=event,
        ledger=deps.ledger,
        cluster=deps.settings.cluster_name,
        mode=deps.settings.hyperpod_hang_mode,
        now=deps.now(),
    )
    logger.info("hyperpod hang events read", extra=counts)
    return counts
