"""Identifier shapes shared by every model, taken from the SageMaker service model
(see ../shared/reference/hyperpod-api-and-events.md §1.1)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, StringConstraints

CLUSTER_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
CLUSTER_ARN_PATTERN = r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:cluster/[a-z0-9]{12}$"
NODE_ID_PATTERN = r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$"
# Slurm node names on HyperPod are the short private hostname (ip-10-1-2-3); allow any
# conservative hostname so a renamed partition never breaks us, but nothing a shell would expand.
SLURM_NODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
SLURM_JOB_ID_PATTERN = r"^[0-9]{1,10}(_[0-9]{1,10})?$"

NodeId = Annotated[str, StringConstraints(pattern=NODE_ID_PATTERN)]
SlurmNodeName = Annotated[str, StringConstraints(pattern=SLURM_NODE_PATTERN)]
SlurmJobId = Annotated[str, StringConstraints(pattern=SLURM_JOB_ID_PATTERN)]
Timestamp = AwareDatetime


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
