"""Which nodes to blame for a hang or a slowdown.

From progress: a node whose reporter stopped writing while the others' go on (its process or its
host is gone), else the nodes whose step stayed behind the others' (they stopped first: the
others went on to the next collective and wait there). From the evidence: a node whose stacks are
not where the others' are (the odd signature out). From a slowdown: the node that waits least on
the others (the last to arrive at every collective).

Blame is bounded: a fault on more than half of a job's nodes is not a node's fault (a file
system, the network, the code), so then no node is blamed and the job restarts where it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING

from hyperpod_recovery.models.hangs import MAX_SUSPECTS, NodeProgress

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import NodeStacks

# The slowest node is named only when it waits at most this share of what the others wait.
LAST_TO_ARRIVE_SHARE = 0.5
# ... and the others wait at least this share of a step (else nobody clearly waits for anyone).
OTHERS_WAIT_SHARE = 0.1


def bounded(suspects: Sequence[str], total: int) -> list[str]:
    """The suspects, or none when they are too many to be a node's fault."""
    if not suspects or len(suspects) > max(1, total // 2) or len(suspects) > MAX_SUSPECTS:
        return []
    return sorted(suspects)


def from_progress(nodes: Sequence[NodeProgress], heartbeat_stale_seconds: int, now: datetime) -> tuple[list[str], str]:
    """The nodes that stopped first, and why; ([], why not) when progress names none."""
    if len(nodes) < 2:
        return [], "one node reports: there is no other to compare it with"
    silent = [n.node for n in nodes if (now - n.heartbeat_at).total_seconds() > heartbeat_stale_seconds]
    if silent and len(silent) < len(nodes):
        blamed = bounded(silent, len(nodes))
        if blamed:
            return blamed, f"{', '.join(blamed)} stopped reporting while the other {len(nodes) - len(silent)} nodes report"
        return [], f"{len(silent)} of {len(nodes)} nodes stopped reporting: too many to be a node's fault"
    newest = max(n.step for n in nodes)
    behind = [n.node for n in nodes if n.step < newest]
    if behind:
        blamed = bounded(behind, len(nodes))
        if blamed:
            steps = ", ".join(f"{n.node} at step {n.step}" for n in nodes if n.node in blamed)
            return blamed, f"{steps} while the others reached step {newest}"
        return [], f"{len(behind)} of {len(nodes)} nodes are behind step {newest}: too many to be a node's fault"
    return [], f"every node stopped at step {newest}: progress names no node"


def from_evidence(stacks: Sequence[NodeStacks], total: int, what: str = "stacks") -> tuple[list[str], str]:
    """The nodes whose evidence differs from where most nodes' is, and why. ``what``: the evidence in
    its own words (a Slurm node's "stacks"; on EKS a pod's "last log line")."""
    signed = {s.node: s.signature for s in stacks if s.outcome == "captured" and s.signature}
    if len(signed) < 3:
        return [], f"{what} from {len(signed)} node(s): too few to tell the odd one out"
    common, count = Counter(signed.values()).most_common(1)[0]
    if count <= len(signed) // 2:
        return [], f"the {len(signed)} nodes' {what} share no majority"
    odd = [node for node, signature in signed.items() if signature != common]
    blamed = bounded(odd, total)
    if not blamed:
        return [], f"every node's {what} the same as the others'" if not odd else f"{len(odd)} nodes' {what} differ: too many"
    return blamed, f"{', '.join(blamed)}: {what} not as on the other {count} nodes"


def last_to_arrive(nodes: Sequence[NodeProgress]) -> tuple[list[str], str]:
    """A slowdown's node: the one that waits least on the others, when it clearly does."""
    timed = [n for n in nodes if n.wait_seconds is not None and n.step_seconds]
    if len(timed) < 3:
        return [], "fewer than 3 nodes report their wait in collectives: no node named"
    slowest = min(timed, key=lambda n: n.wait_seconds or 0.0)
    others = median(n.wait_seconds or 0.0 for n in timed if n is not slowest)
    step = median(n.step_seconds or 0.0 for n in timed)
    if others < OTHERS_WAIT_SHARE * step or (slowest.wait_seconds or 0.0) > LAST_TO_ARRIVE_SHARE * others:
        return [], "no node clearly arrives last at the collectives: no node named"
    return [slowest.node], (
        f"{slowest.node} waits {slowest.wait_seconds:.1f} s a step on the others, who wait {others:.1f} s for it (the last to arrive)"
    )
