"""Identifier shapes shared by every model, taken from the SageMaker service model
(see ../shared/reference/hyperpod-api-and-events.md §1.1)."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, StrictBool, StringConstraints

CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
# The service model's ClusterArn ends in the 12-character cluster id; AWS's own event samples show
# the name form (cluster/<name>). Both parse (events are matched on either), but the stack's
# ClusterArn must be the id form: IAM authorizes HyperPod calls on it (preflight fails the name form).
CLUSTER_ARN_PATTERN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/([a-z0-9]{12}|[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})$"
CLUSTER_NAME_MAX_LENGTH = 63
NODE_ID_PATTERN = r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$"
# ClusterNodeLogicalId (botocore model): 1-128 characters, alphanumeric at both ends.
NODE_LOGICAL_ID_PATTERN = r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,126}[a-zA-Z0-9])?$"
# Slurm node names on HyperPod are the short private hostname (ip-10-1-2-3); allow any
# conservative hostname so a renamed partition never breaks us, but nothing a shell would expand.
SLURM_NODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
SLURM_JOB_ID_PATTERN = r"^[0-9]{1,10}(_[0-9]{1,10})?$"
# A job as the workflow names it: a Slurm job id, or on EKS the job object's metadata.uid (an RFC
# 4122 UUID, as the API server writes it). Both name one submission: a resubmission is a new one.
JOB_ID_PATTERN = r"^(?:[0-9]{1,10}(?:_[0-9]{1,10})?|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"

# Python's re.match accepts "name\n" for a pattern ending in "$"; pydantic's (Rust) regex does not.
# Every Python-side check of these patterns goes through fullmatch so both sides agree.
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")

# Bounds of what travels in a workflow's state (Step Functions refuses a state over 256 KiB, with
# States.DataLimitExceeded, which no Catch of States.ALL catches): every list and string carried
# there has one, and tests/contract/test_state_bounds.py adds them up for the worst case.
MAX_NODES_PER_REQUEST = 100
MAX_JOBS_PER_INCIDENT = 100
MAX_JOB_NODES_CARRIED = 1000  # a failed job's node list (JobRecovery)

NodeId = Annotated[str, StringConstraints(pattern=NODE_ID_PATTERN)]
NodeLogicalId = Annotated[str, StringConstraints(pattern=NODE_LOGICAL_ID_PATTERN)]
SlurmNodeName = Annotated[str, StringConstraints(pattern=SLURM_NODE_PATTERN)]
SlurmJobId = Annotated[str, StringConstraints(pattern=SLURM_JOB_ID_PATTERN)]
JobId = Annotated[str, StringConstraints(pattern=JOB_ID_PATTERN)]
Timestamp = AwareDatetime
# A flag that changes what the pipeline does (dry_run above all) accepts only a JSON boolean:
# "false" as a string must never arm a recovery.
StrictFlag = StrictBool


class Model(BaseModel):
    """The base of every model here: its validator is built when the model is first used, not when its
    module is imported, so a Lambda's cold start builds only the models its step touches."""

    model_config = ConfigDict(defer_build=True)


class StepResult(Model):
    """What a step of either workflow returns into the execution's state: stamped with when it did."""

    model_config = ConfigDict(extra="forbid")
    at: Timestamp


def matches(pattern: str, value: str) -> bool:
    """The whole of ``value`` matches ``pattern``, as pydantic's pattern constraint decides it."""
    return re.fullmatch(pattern, value) is not None


def one_line(text: str, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters: control characters (NUL,
    newlines, escapes) become spaces and runs of blanks collapse. For text that reaches a command
    line or a Slurm field (drain reasons, comments) from an outside event."""
    return " ".join(_CONTROL_CHARACTERS.sub(" ", text).split())[:limit]


def _no_control_characters(value: str) -> str:
    if _CONTROL_CHARACTERS.search(value):
        raise ValueError("must not contain control characters (NUL, newline, escape ...)")
    return value


# Text that is passed to Slurm as an argument: one printable line. The agent enforces the same rule.
SlurmText = Annotated[str, AfterValidator(_no_control_characters)]


def _cut(limit: int) -> Any:
    def cut(value: object) -> object:
        return value[: limit - 1] + "…" if isinstance(value, str) and len(value) > limit else value

    return BeforeValidator(cut)


# Text we write for people (a reason, a summary) and carry in a workflow's state: cut to its limit
# where it is made, so that a long job name or cause can never make a step fail on its own
# explanation (and the state stays bounded).
ShortText = Annotated[str, _cut(300), StringConstraints(max_length=300)]
LongText = Annotated[str, _cut(2048), StringConstraints(max_length=2048)]
CauseText = Annotated[str, _cut(4000), StringConstraints(max_length=4000)]
SummaryText = Annotated[str, _cut(8000), StringConstraints(max_length=8000)]
JobNameText = Annotated[str, _cut(64), StringConstraints(max_length=64)]
# What a health check said on one node (its exit and the end of its output), as the state keeps it.
GateDetailText = Annotated[str, _cut(160), StringConstraints(max_length=160)]


def slurm_node_name(private_dns_hostname: str) -> str:
    """``ip-10-1-2-3.us-west-2.compute.internal`` -> ``ip-10-1-2-3`` (the Slurm NodeName)."""
    return private_dns_hostname.split(".", 1)[0]


def format_validation_error(exc: Exception, drop_prefix: tuple[str, ...] = ()) -> str:
    """One line naming every offending field: ``node_ids.0: String should match pattern ...``.

    ``drop_prefix``: leading location parts to leave out (the tags of a discriminated union).
    """
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    parts = []
    for err in errors():
        loc = list(err.get("loc", ()))
        if loc and loc[0] in drop_prefix:
            loc = loc[1:]
        location = ".".join(str(p) for p in loc) or "request"
        parts.append(f"{location}: {err.get('msg')}")
    return "; ".join(parts)
