"""What an incident that ended half-way keeps of its nodes, and why; and what a capped incident left
alone: each sentence once, for every place that says it (the record's summary, the notification's
WHAT HAPPENS NEXT, ``stop``'s answer, ``locks release``'s refusal, docs/runbook.md's on-call
sections).

A stopped (or crashed) recovery keeps its node locks for EscalationHoldSeconds: its nodes may carry
its drain or cordon, or a replacement it started may still be coming up, and a new recovery started by
the next event for them would act on a node a human is handling. The locks are the human's to give
back early, with ``locks release`` (which takes each node's instance id and its hostname lock).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from hyperpod_recovery.domain.record.locked import locked_nodes, locked_text
from hyperpod_recovery.models.kubernetes import instance_of_node_name

KEPT_WHY = (
    "it stopped half-way, so a node may still carry its drain or cordon, or a replacement it started may still be coming up, "
    "and no new recovery may act on a node you are handling"
)
GIVEN_BACK = (
    "its resubmission claims and its places under the cluster cap (a place stays counted while a replacement it started "
    "may still be coming up)"
)
CAP_LEFT_ALONE = (
    "not drained or cordoned, not replaced, not locked: a fault reported again for {them} starts a recovery as usual, "
    "and capped again while the cap is full"
)


def show_command(stack: str, incident: str) -> str:
    return f"hyperpod-recovery incidents show {incident} --stack {stack}"


def release_command(stack: str, instances: Sequence[str]) -> str:
    """Release what an ended incident still holds of its nodes (each one's hostname lock goes with it)."""
    return f"hyperpod-recovery locks release {' '.join(instances)} --stack {stack} --reason 'what you did'"


def stop_answer(incident: str, stack: str, locks: Collection[str], until: datetime | None) -> list[str]:
    """What ``stop`` says it keeps, why, and the command that releases it."""
    show = show_command(stack, incident)
    lines = [f"Reconcile Execution records it as aborted within a minute (`{show}`) and gives back {GIVEN_BACK}."]
    instances, hosts = locked_nodes(locks)
    if not instances and not hosts:
        lines.append("It holds no node lock: nothing is kept for you.")
        return lines
    when = f"until {until:%Y-%m-%d %H:%M} UTC (EscalationHoldSeconds)" if until else "for EscalationHoldSeconds"
    lines.append(f"It keeps the locks on {locked_text(locks)} {when}: {KEPT_WHY}.")
    # (an EKS node's name carries its instance: its record pairs the two, a Slurm hostname is named too)
    release = release_command(stack, [*instances, *(h for h in hosts if h not in instances and instance_of_node_name(h) not in instances)])
    lines.append(f"When you have handled them, once `{show}` shows its record: `{release}`.")
    return lines


def still_running_refusal(held: str, holder: str, stack: str) -> str:
    """``locks release`` under a running incident: stop it instead, and what stopping keeps."""
    return (
        f"{held} is held by incident {holder}, which is still running: releasing it under a running recovery lets a second "
        f"one act on the node. Stop the incident instead: `hyperpod-recovery stop {holder} --stack {stack} --reason '...'` "
        "(it gives back its claims and cap places but keeps its node locks for EscalationHoldSeconds; "
        "`locks release` frees them once it is recorded)"
    )
