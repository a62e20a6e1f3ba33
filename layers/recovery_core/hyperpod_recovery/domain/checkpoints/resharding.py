"""Whether a checkpoint loads at another data-parallel width: what shrinking a job onto fewer nodes
needs. Kept apart from discovery.py (the S3 search), so the shrink decision and the record that
explains it load no S3 listing code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import CheckpointRef

DCP_FRAMEWORK = "pytorch-dcp"  # what discovery calls a checkpoint found by its .metadata marker


def reshardable(checkpoint: CheckpointRef) -> bool:
    """Whether ``checkpoint`` loads at another data-parallel width (what shrinking a job onto fewer
    nodes needs). A v1.1 manifest's layout says it. Without one (a v1 manifest, or a checkpoint found by
    its framework's marker), a PyTorch DCP checkpoint does: its ``.metadata`` maps every tensor to the
    shards holding it, and ``dcp.load`` reshards at load time; its data-parallel degree is unknown then.
    Anything else is not assumed to."""
    if checkpoint.layout is not None:
        return checkpoint.layout.reshardable
    return checkpoint.framework == DCP_FRAMEWORK
