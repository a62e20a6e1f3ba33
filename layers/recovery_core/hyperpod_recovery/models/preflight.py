"""What ``hyperpod-recovery preflight`` asks the deployed stack, and what the stack answers.

Two functions of the stack answer the preflight: Check Controller Agent (the agent-check workflow's
one step: a ``check`` command to the controller agent) and Check Deployment (invoked directly: the
SDK the functions run with, and the running jobs' checkpoints read with the pipeline's own S3
permissions). Both are read-only.
"""

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.commands import MAX_CHECKPOINT_URI, MAX_JOBS_CHECKED, RunningJob
from hyperpod_recovery.models.common import JobId, Model
from hyperpod_recovery.models.node_recovery import StepInput


class CheckControllerAgentInput(StepInput):
    task_token: str = Field(min_length=1)


class CheckDeploymentInput(Model):
    """The running jobs the agent reported, whose checkpoints are to be read."""

    model_config = ConfigDict(extra="forbid")
    jobs: list[RunningJob] = Field(default_factory=list, max_length=MAX_JOBS_CHECKED)


class SdkReport(Model):
    """The SDK the stack's functions run with, as one of them sees it."""

    python: str
    boto3: str
    botocore: str
    minimum_botocore: str
    # What the code calls or reads that this SDK's models lack (``sagemaker:Op.response:Path``).
    missing: list[str] = Field(default_factory=list)
    package_version: str  # hyperpod_recovery in the layer (the agent should run the same release)


class CheckpointProbe(Model):
    """One running job's checkpoints, read as Find Newest Checkpoint reads them."""

    job_id: JobId
    name: str
    checkpoint_uri: str | None = Field(default=None, max_length=MAX_CHECKPOINT_URI)
    readable: bool  # S3 answered (with or without a verified checkpoint)
    # S3 did not answer at all (throttled, 5xx, timed out): the check could not be made, which is
    # not the same as being refused (readable False, store_unavailable False).
    store_unavailable: bool = False
    step: int | None = None  # the newest verified step; None: none verifies (or unreadable)
    detail: str = Field(default="", max_length=1024)


class DeploymentReport(Model):
    sdk: SdkReport
    checkpoints: list[CheckpointProbe] = Field(default_factory=list)
