"""Shrink-and-continue: how far a job may shrink when no spare node fits it (the job's own opt-in).

Part of the contract (the controller agent reads a Slurm job's opt-in with it): a job opts in by

- its Slurm comment, one word ``resume=elastic,min=12,multiple=4`` (``min`` required, ``multiple``
  the nodes of one data-parallel replica, default 1), for a job submitted with a fixed node count;
- its batch script's own node range (``#SBATCH --nodes=12-16``; the agent reads it, since Slurm
  22.05 forgets a started job's range);
- on EKS, a PyTorchJob's ``elasticPolicy`` (min/max replicas) or our annotation
  ``hyperpod-recovery.io/elastic: min=12,multiple=4``.

A job that does not opt in is rigid: it waits for its replacement as it always has. An opt-in we
cannot read is rigid too (waiting is what the job would have done without us), and says why.
"""

from typing import Final, Literal, Self

from pydantic import ConfigDict, Field, ValidationError, model_validator

from hyperpod_recovery.models.common import Model

ELASTIC_COMMENT_PREFIX: Final = "resume=elastic"
MAX_ELASTIC_NODES: Final = 10_000  # as a job's own node count (commands.MAX_JOB_NODES)

ElasticSource = Literal["comment", "node_range", "elastic_policy", "annotation"]
ELASTIC_SOURCE_TEXT: dict[str, str] = {
    "comment": "its comment's resume=elastic",
    "node_range": "its node range (#SBATCH --nodes=MIN-MAX)",
    "elastic_policy": "its elasticPolicy",
    "annotation": "its hyperpod-recovery.io/elastic annotation",
}


class ElasticPolicy(Model):
    """The sizes a job may run at: from ``min_nodes`` up to its full size, in steps of ``multiple``
    nodes (one data-parallel replica). ``max_nodes`` None: the size it ran at."""

    model_config = ConfigDict(extra="forbid")

    min_nodes: int = Field(ge=1, le=MAX_ELASTIC_NODES)
    max_nodes: int | None = Field(default=None, ge=1, le=MAX_ELASTIC_NODES)
    multiple: int = Field(default=1, ge=1, le=MAX_ELASTIC_NODES)
    source: ElasticSource

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max_nodes is not None and self.max_nodes < self.min_nodes:
            raise ValueError(f"min {self.min_nodes} is above max {self.max_nodes}")
        return self

    def describe(self) -> str:
        multiple = f", {self.multiple} node(s) per replica" if self.multiple > 1 else ""
        return f"elastic down to {self.min_nodes} node(s){multiple} ({ELASTIC_SOURCE_TEXT[self.source]})"


class ElasticOptInUnreadable(ValueError):
    """An opt-in was written but cannot be read: the job is rigid, and the record says why."""


def parse_elastic_options(text: str, source: ElasticSource) -> ElasticPolicy:
    """``min=12,multiple=4`` (any order; ``max`` optional) -> ElasticPolicy; ElasticOptInUnreadable otherwise."""
    values: dict[str, int] = {}
    for part in (p for p in text.split(",") if p):
        key, sep, value = part.partition("=")
        if not sep or key not in ("min", "max", "multiple") or key in values:
            raise ElasticOptInUnreadable(f"{part!r} is not min=N, max=N or multiple=N (each once)")
        if not (value.isascii() and value.isdigit()) or len(value) > 5:
            raise ElasticOptInUnreadable(f"{key}={value!r} is not a whole number of nodes")
        values[key] = int(value)
    if "min" not in values:
        raise ElasticOptInUnreadable("min=N is required: how far the job may shrink")
    try:
        return ElasticPolicy(min_nodes=values["min"], max_nodes=values.get("max"), multiple=values.get("multiple", 1), source=source)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'opt-in'}: {e['msg']}" for e in exc.errors())
        raise ElasticOptInUnreadable(why.replace("min_nodes", "min").replace("max_nodes", "max")) from None


def elastic_choice_in_comment(comment: str) -> ElasticPolicy | None:
    """The job's opt-in, one word ``resume=elastic,min=12[,multiple=4][,max=16]`` of its Slurm
    comment; None when the comment makes none. ElasticOptInUnreadable when it tries and fails."""
    for token in comment.split():
        if token == ELASTIC_COMMENT_PREFIX or token.startswith(ELASTIC_COMMENT_PREFIX + ","):
            return parse_elastic_options(token.removeprefix(ELASTIC_COMMENT_PREFIX).lstrip(","), "comment")
    return None
