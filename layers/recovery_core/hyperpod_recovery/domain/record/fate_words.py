"""The words for a job's fate, in one table: for each fate, what a summary says of the job and the
step WHAT HAPPENS NEXT gives the human (domain/messages/advice.py renders it with the orchestrator's
commands). A fate's two sentences stand side by side here, so they cannot drift apart.

Pure: a fate in, words out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import JobFate, JobFateKind, ShrunkCopy


class JobCommands(Protocol):
    """The orchestrator's commands a job's step names (domain/messages/advice.py's Commands)."""

    def show_job(self, job_id: str, fate: JobFate) -> str: ...

    def find_copy(self, fate: JobFate) -> str: ...

    def restart(self, fate: JobFate) -> str: ...


# --- names ------------------------------------------------------------------------------------
def job_label(fate: JobFate) -> str:
    """``job 1001 (llama-70b)`` on Slurm; ``PyTorchJob kubeflow/llama-70b`` on EKS."""
    if fate.kind and fate.namespace and fate.name:
        return f"{fate.kind} {fate.namespace}/{fate.name}"
    if fate.kind or fate.namespace:  # an EKS job known by its uid alone
        return f"{fate.kind or 'job'} with uid {fate.job}" + (f" in {fate.namespace}" if fate.namespace else "")
    return f"job {fate.job}" + (f" ({fate.name})" if fate.name and fate.name != fate.job else "")


def copy_label(fate: JobFate) -> str:
    """The live copy by the name a human finds it under: ``job 1002``, ``PyTorchJob kubeflow/llama-r1``."""
    if fate.kind and fate.namespace and fate.copy_name:
        return f"{fate.kind} {fate.namespace}/{fate.copy_name}"
    if fate.kind or fate.namespace:
        return f"{fate.kind or 'job'} with uid {fate.copy_id}" if fate.copy_id else "a copy not yet known by id"
    return f"job {fate.copy_id}" if fate.copy_id else "a copy not yet known by id"


def on_kubernetes(fate: JobFate) -> bool:
    """The job is a Kubernetes object (its kind or namespace known, or its copy known by name)."""
    return bool(fate.kind or fate.namespace or fate.copy_name)


def kube_copy_text(kind: str | None, new_job_name: str, uid: str | None) -> str:
    """A re-created object as kubectl shows it, then its uid: ``PyTorchJob kubeflow/llama-r1 (uid 056d…)``
    (``new_job_name`` is <namespace>/<name>; without its kind, the name alone)."""
    named = f"{kind} {new_job_name}" if kind else new_job_name
    return f"{named} (uid {uid})" if uid else named


def copy_made_text(fate: JobFate) -> str:
    """A copy made, old -> new: ``1001 -> 1002`` on Slurm; on EKS both by the names kubectl shows,
    ``PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1``."""
    if not on_kubernetes(fate):
        return f"{fate.job} -> {fate.copy_id or '-'}"
    return f"{job_label(fate)} -> {copy_label(fate)}"


def claimed_for(fate: JobFate) -> str:
    """What a claim on a job is for: a Slurm job's resubmission, a Kubernetes job object's re-creation."""
    return "re-creation" if fate.kind else "resubmission"


def made_again(fate: JobFate) -> str:
    """The verb for a copy: a Slurm job is resubmitted, a Kubernetes job object re-created."""
    return "re-created" if fate.kind else "resubmitted"


def copy_state_text(fate: JobFate) -> str:
    """``PENDING at 09:02:09 UTC``: the copy's state and when it was seen, never more than that."""
    if not fate.copy_state:
        return "its state not read"
    when = f" at {fate.copy_seen_at:%H:%M:%S} UTC" if fate.copy_seen_at else ""
    return f"{fate.copy_state}{when}"


def _from_step(fate: JobFate) -> str:
    return f" from step {fate.checkpoint_step}" if fate.checkpoint_step is not None else ""


def _shrunk_as(shrunk: ShrunkCopy) -> str:
    """The copy that ran on fewer nodes, by its label (``job <id>`` when none was kept)."""
    return shrunk.copy_label or "job " + shrunk.copy_id


# --- resubmitted: the two fates with most to say -------------------------------------------------
def _said_resubmitted(fate: JobFate) -> str:
    label, step = job_label(fate), _from_step(fate)
    shrunk = fate.shrunk
    if shrunk is not None:
        size = f"on {shrunk.nodes} of {fate.full_nodes} node(s)"
        ran = f"{label} {made_again(fate)} as {_shrunk_as(shrunk)} from step {shrunk.from_step} {size}"
        if shrunk.grown_back:
            grown = shrunk.grown_to or fate.full_nodes
            return f"{ran}, then grown back to {grown} node(s) as {copy_label(fate)}{step} ({copy_state_text(fate)})"
        return f"{ran} ({copy_state_text(fate)}); {fate.grow_back}"
    by = f" by node recovery {fate.by}" if fate.by else ""
    waits = fate.elastic.startswith("waits for its replacement: ")
    waited = f"; it waited for its replacement: {fate.elastic.removeprefix('waits for its replacement: ')}" if waits else ""
    return f"{label} {made_again(fate)}{by} as {copy_label(fate)}{step} ({copy_state_text(fate)}){waited}"


def _next_resubmitted(fate: JobFate, commands: JobCommands) -> str:
    label, where = job_label(fate), _from_step(fate)
    by = f" by node recovery {fate.by}" if fate.by else ""
    see = f" See it: `{commands.show_job(fate.copy_id, fate)}`." if fate.copy_id else ""
    shrunk = fate.shrunk
    ran_shrunk = f"{label} was {made_again(fate)} as {_shrunk_as(shrunk)}{where} on " if shrunk is not None else ""
    if shrunk is not None and shrunk.taken_by is not None:
        # Its shrunk copy was made again by a later incident: that one knows where the job runs now.
        return (
            f"{ran_shrunk}{shrunk.nodes} of its {fate.full_nodes} node(s); "
            f"then incident {shrunk.taken_by} {made_again(fate)} that copy (a fault on it): do not start another copy. "
            "Where it runs now: that incident's record and notification."
        )
    told = f"{label} was {made_again(fate)}{by} as {copy_label(fate)}{where} ({copy_state_text(fate)}): do not start another copy.{see}"
    if shrunk is not None and shrunk.ended:
        return (
            f"{ran_shrunk}{shrunk.nodes} of its {fate.full_nodes} node(s); that copy then ended without the pipeline "
            f"({fate.grow_back.removeprefix('not grown back: ')}), and nothing was started again. "
            "If it should still be training, find out why it ended before you resubmit it."
        )
    if shrunk is not None and not shrunk.grown_back:
        # It trains on, on fewer nodes: nothing is urgent, and growing it back is a choice, not a repair.
        told += (
            f" It runs on {shrunk.nodes} of its {fate.full_nodes} node(s) ({fate.grow_back.removeprefix('not grown back: ')}); "
            f"it keeps training. To give it its {fate.full_nodes} nodes again once they are in service, stop it right after "
            "a checkpoint and submit it again at its full size (docs/runbook.md#elastic-jobs-on-slurm-shrink-then-grow-back)."
        )
    return told


def _said_resubmitted_before(fate: JobFate) -> str:
    by = fate.by or "another incident"
    if not fate.copy_id:
        return f"{job_label(fate)} claimed for {claimed_for(fate)} by {by} (no copy recorded yet)"
    return f"{job_label(fate)} already {made_again(fate)} by {by} as {copy_label(fate)}"


def _next_resubmitted_before(fate: JobFate, commands: JobCommands) -> str:
    label, by = job_label(fate), fate.by or "another incident"
    if not fate.copy_id:  # an open claim: its incident may be restarting the job, or may have left it
        return f"{label} is claimed for {claimed_for(fate)} by {by}, which has recorded no copy yet: do not start another copy."
    see = f" See it: `{commands.show_job(fate.copy_id, fate)}`."
    return f"{label} was already {made_again(fate)} by {by} as {copy_label(fate)}: do not start another copy.{see}"


# --- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FateWords:
    """One fate's words: ``said`` in a summary's or timeline's sentence, ``next`` as the human's step."""

    said: Callable[[JobFate], str]
    next: Callable[[JobFate, JobCommands], str]


def _parts(fate: JobFate) -> dict[str, str]:
    return {"label": job_label(fate), "reason": fate.reason, "again": made_again(fate), "step": _from_step(fate)}


def _texts(said: str, step: str) -> FateWords:
    """A fate told by two templates: its summary words and its step (the commands filled in)."""

    def next_step(fate: JobFate, commands: JobCommands) -> str:
        named = {"show": commands.show_job(fate.job, fate), "find_copy": commands.find_copy(fate), "restart": commands.restart(fate)}
        return step.format_map(_parts(fate) | named)

    return FateWords(lambda fate: said.format_map(_parts(fate)), next_step)


FATE_WORDS: dict[JobFateKind, FateWords] = {
    "resubmitted": FateWords(_said_resubmitted, _next_resubmitted),
    "resubmitted_before": FateWords(_said_resubmitted_before, _next_resubmitted_before),
    # The other fates: a template each for the summary and the step, filled with {label}, {reason},
    # {again}, {step} (_parts) and, in a step, the orchestrator's commands {show}, {find_copy}, {restart}.
    "requeued_by_slurm": _texts(
        "{label} requeued by Slurm (it restarts by itself)",
        "{label} was requeued by Slurm and restarts by itself: do not start another copy. See it: `{show}`.",
    ),
    "restarted_by_owner": _texts(
        "{label} left to what restarts it: {reason}",
        "{label} is left to what restarts it ({reason}): do not start another copy.",
    ),
    "would_resubmit": _texts("{label} would be {again}{step}", "{label} would be {again}{step} (dry run)."),
    "would_not_resubmit": _texts("{label} would not be {again}: {reason}", "{label} would not be {again} (dry run): {reason}."),
    "copy_unknown": _texts(
        "{label}: a resubmission was asked for and its answer is lost ({reason})",
        "{label}: {reason}. Look for its copy first (`{find_copy}`); only if there is none, and it is not running (`{show}`), {restart}.",
    ),
    "left_running": _texts(
        "{label} left running as it was: {reason}",
        "{label} runs on as it was ({reason}): nothing was done to it. See it: `{show}`.",
    ),
    "ended_by_itself": _texts(
        "{label} left alone: {reason}",
        "{label} ended by itself ({reason}); if it failed, its failure starts a recovery of its own.",
    ),
    "not_resubmitted": _texts(
        "{label} NOT {again}: {reason}",
        "{label} was NOT {again}: {reason}. First check that it is not running (`{show}`); if not, {restart}.",
    ),
}


def fate_text(fate: JobFate) -> str:
    """One job's fate in a sentence's words (for summaries and timelines)."""
    return FATE_WORDS[fate.fate].said(fate)


def job_step(fate: JobFate, commands: JobCommands) -> str:
    """One job's step: its live copy and not to start another, or why there is none and how to restart it."""
    return FATE_WORDS[fate.fate].next(fate, commands)


# Past this many jobs, a summary names the copies made as ``old -> new`` (a rack's storm carries 100
# jobs: the summary keeps its size); every job without a copy is still said in full, with its reason.
JOBS_SAID_IN_FULL = 5


def jobs_sentence(fates: Sequence[JobFate], omitted: int = 0) -> str:
    """The jobs part of a summary, from the fates: each job once, by what became of it."""
    if not fates and not omitted:
        return "no job ran on these nodes"
    copies = [f for f in fates if f.fate == "resubmitted" and f.copy_id and not f.by]
    if len(fates) <= JOBS_SAID_IN_FULL or len(copies) < 2:
        parts = [fate_text(f) for f in fates]
    else:
        states = sorted({f.copy_state or "state not read" for f in copies})
        listed = ", ".join(copy_made_text(f) for f in copies)
        parts = [f"{made_again(copies[0])} {len(copies)} job(s) ({', '.join(states)} when submitted): {listed}"]
        parts += [fate_text(f) for f in fates if f not in copies]
    if omitted:
        parts.append(f"{omitted} more job(s) not carried (past what one incident carries): not resubmitted")
    return "; ".join(parts)
