"""Which of a job's states, as its orchestrator reports them, mean it still runs."""

from __future__ import annotations

# Slurm (squeue): anything else ended, or is ending (COMPLETING: its processes are being killed, a
# cancel is already under way).
SLURM_STILL_RUNNING = frozenset({"RUNNING", "SUSPENDED", "STOPPED", "RESIZING"})
# EKS: the job object's newest condition (Restarting: its operator is restarting its pods already;
# Created: none runs yet; Succeeded, Failed: it ended).
EKS_STILL_RUNNING = frozenset({"Running"})


# Seen after a failure event, these mean the job runs again already: Slurm requeued it, or on EKS its
# operator restarted its pods (Restarting) or they run again.
EKS_RUNNING_AGAIN = frozenset({"Running", "Restarting"})


def running_again(state: str, orchestrator: str) -> bool:
    return state in (EKS_RUNNING_AGAIN if orchestrator == "eks" else SLURM_STILL_RUNNING)


def still_running(state: str, orchestrator: str) -> bool:
    return state in (EKS_STILL_RUNNING if orchestrator == "eks" else SLURM_STILL_RUNNING)


def still_running_on_either(state: str) -> bool:
    """For a record that does not carry its orchestrator: the two vocabularies share no word
    (squeue's states are upper case, a Kubernetes condition is not), so either set decides."""
    return state in SLURM_STILL_RUNNING or state in EKS_STILL_RUNNING
