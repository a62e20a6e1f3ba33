"""Check Deployment: the SDK the functions run with, and the running jobs' checkpoints read with the
pipeline's S3 permissions (invoked by hyperpod-recovery preflight; read-only)."""

from hyperpod_recovery.adapters.checkpoints import S3CheckpointStore
from hyperpod_recovery.models.preflight import CheckDeploymentInput
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import CheckpointReader
from hyperpod_recovery.runtime import parse_input
from hyperpod_recovery.steps.check_deployment import check_deployment


# Not a workflow_step: those refuse to start on an SDK older than the code needs, and this one is
# how the operator finds out that they would.
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event, context, reader: CheckpointReader | None = None):
    report = check_deployment(parse_input(CheckDeploymentInput, event), reader=reader or S3CheckpointStore())
    seen = {"botocore": report.sdk.botocore, "missing": report.sdk.missing, "jobs": len(report.checkpoints)}
    logger.info("deployment checked", extra=seen)
    return report.model_dump(mode="json")
