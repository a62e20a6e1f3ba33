"""The node counts a job may run at: what its opt-in allows and what its checkpoint loads at."""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_recovery.domain.checkpoints import reshardable
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.elastic import ElasticPolicy


@dataclass(frozen=True)
class Reshard:
    """Whether a checkpoint loads at another size, and with which granularity.

    ``ranks_per_node`` and ``replica_ranks`` (tensor x pipeline) come from a v1.1 layout; without
    one (a DCP checkpoint found by its marker) any node count loads and the data-parallel degree is
    the script's to derive."""

    reshardable: bool
    why_not: str = ""
    ranks_per_node: int | None = None
    replica_ranks: int | None = None

    def data_parallel(self, nodes: int) -> int | None:
        """The data-parallel degree at ``nodes`` nodes; None when the layout does not tell it or it is not whole."""
        if self.ranks_per_node is None or self.replica_ranks is None:
            return None
        ranks = nodes * self.ranks_per_node
        return ranks // self.replica_ranks if ranks % self.replica_ranks == 0 else None

    def loads_at(self, nodes: int) -> bool:
        if not self.reshardable:
            return False
        if self.ranks_per_node is None or self.replica_ranks is None:
            return True
        return self.data_parallel(nodes) is not None


def reshard_of(checkpoint: CheckpointRef) -> Reshard:
    """What the checkpoint says about loading at another size."""
    layout = checkpoint.layout
    if reshardable(checkpoint):  # (discovery's one rule: a layout says it, else PyTorch DCP does)
        if layout is None or layout.nodes is None:
            return Reshard(True)
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
