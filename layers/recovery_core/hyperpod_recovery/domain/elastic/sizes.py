"""The node counts a job may run at: what its opt-in allows and what its checkpoint loads at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.checkpoints.resharding import reshardable
from hyperpod_recovery.models.commands import MAX_RESUME_DATA_PARALLEL, CheckpointRef

if TYPE_CHECKING:
    from hyperpod_recovery.models.elastic import ElasticPolicy
    from hyperpod_recovery.models.manifest import CheckpointLayout

# A layout is a claim (it comes from the job's bucket): a node holds at most this many ranks.
# ASSUMPTION: one rank per accelerator core; the densest HyperPod instance, ml.trn2.48xlarge, has 128
# NeuronCores (8 GPUs on the p4d/p5 instances). Only a shrink is refused above it: the job waits.
MAX_RANKS_PER_NODE = 128


@dataclass(frozen=True)
class Reshard:
    """Whether a checkpoint loads at another size, and with which granularity.

    ``ranks_per_node`` and ``replica_ranks`` (tensor x pipeline) come from the checkpoint's v1.1
    layout, checked (layout_problem): the data-parallel degree a copy is told is the layout's, scaled
    to the copy's node count. ``layout_refused``: it would reshard, but its layout (or its lack of one)
    gives no degree a copy could be told; ``why_not`` says why in plain words."""

    reshardable: bool
    why_not: str = ""
    ranks_per_node: int | None = None
    replica_ranks: int | None = None
    layout_refused: bool = False

    def data_parallel(self, nodes: int) -> int | None:
        """The data-parallel degree at ``nodes`` nodes; None when the layout does not tell it, it is not
        whole, or it is more than a resubmission carries."""
        if self.ranks_per_node is None or self.replica_ranks is None:
            return None
        ranks = nodes * self.ranks_per_node
        if ranks % self.replica_ranks or not 1 <= ranks // self.replica_ranks <= MAX_RESUME_DATA_PARALLEL:
            return None
        return ranks // self.replica_ranks

    def loads_at(self, nodes: int) -> bool:
        return self.reshardable and self.data_parallel(nodes) is not None


def layout_problem(layout: CheckpointLayout, job_nodes: int) -> str | None:
    """Why ``layout`` gives no data-parallel degree to tell a copy of a job that runs on ``job_nodes``
    nodes, or None. Checked again here although the manifest's model checks it: what travels in the
    workflow's state is read back, and a shrink must never rest on a layout that contradicts itself."""
    summary = layout.summary()
    if layout.nodes is None:
        return f"its layout ({summary}) does not say how many nodes wrote it (layout.nodes): no data-parallel degree follows"
    replica = layout.tensor * layout.pipeline
    if replica * layout.data != layout.world_size:
        product = f"tensor {layout.tensor} x pipeline {layout.pipeline} x data {layout.data}"
        return f"its layout is inconsistent: {product} is not the world size {layout.world_size}"
    if layout.world_size % layout.nodes:
        return (
            f"its layout is inconsistent: world size {layout.world_size} is not a whole number of ranks on each of {layout.nodes} node(s)"
        )
    per_node = layout.world_size // layout.nodes
    if per_node > MAX_RANKS_PER_NODE:
        return f"its layout claims {per_node} ranks on each of {layout.nodes} node(s); no node holds more than {MAX_RANKS_PER_NODE}"
    if (job_nodes * per_node) % replica:
        return (
            f"its layout ({summary}) does not fit the job's {job_nodes} node(s): {job_nodes} x {per_node} ranks "
            f"are not whole replicas of tensor x pipeline = {replica} ranks"
        )
    return None


def reshard_of(checkpoint: CheckpointRef, job_nodes: int) -> Reshard:
    """What the checkpoint says about loading at another size, for a job that runs on ``job_nodes`` nodes."""
    layout = checkpoint.layout
    if reshardable(checkpoint):  # (one rule: a layout says it, else PyTorch DCP does)
        if layout is None:
            return Reshard(
                False,
                f"its checkpoint at step {checkpoint.step} records no layout (manifest v1.1), so no data-parallel degree "
                "follows for a copy at another size: the global batch could change",
                layout_refused=True,
            )
        problem = layout_problem(layout, job_nodes)
        if problem is not None:
            return Reshard(False, f"its checkpoint at step {checkpoint.step}: {problem}", layout_refused=True)
        assert layout.nodes is not None  # (layout_problem refuses a layout without it)
        return Reshard(True, ranks_per_node=layout.world_size // layout.nodes, replica_ranks=layout.tensor * layout.pipeline)
    if layout is not None:
        return Reshard(False, f"its checkpoint at step {checkpoint.step} says it does not reshard (manifest layout.reshardable false)")
    written = f"a {checkpoint.framework} checkpoint" if checkpoint.framework else "a checkpoint"
    return Reshard(
        False,
        f"its checkpoint at step {checkpoint.step} is {written} that does not say it reshards "
        "(manifest v1.1 layout with reshardable true, or PyTorch DCP)",
    )


def largest_size(full: int, available: int, policy: ElasticPolicy, reshard: Reshard) -> int | None:
    """The largest node count below ``full`` and at most ``available`` that the opt-in allows (at
    least its minimum, whole replicas of ``multiple`` nodes fewer than full size) and the checkpoint
    loads at; None when there is none."""
    for nodes in range(min(full - 1, available), policy.min_nodes - 1, -1):
        if (full - nodes) % policy.multiple == 0 and reshard.loads_at(nodes):
            return nodes
    return None
