"""A repair that fails the health gate is a failed repair: the ladder's next rung is one more
replacement of it, and the rung after that a human.

Resume Nodes runs ReplacementHealthCheck on each node back under its own name (the agent keeps a
node that fails it drained). When one fails, Replace Unhealthy Nodes calls BatchReplaceClusterNodes
on the instance that failed, and the workflow goes back to waiting for the rejoin: once per
execution (MAX_GATE_REPLACEMENTS in domain/policy/limits.py, which counts it in the history bound and in
JobRecovery's timeout; Check Health Gate goes on only while the watch has no ``first_gate``). A
second failed gate, or a second replacement that cannot start, escalates ReplacementUnhealthy with
the node left drained.

The instance that failed is remembered in the watch (``GateFailure.instance``) and is never taken
for anyone's replacement: HyperPod may show it Running, under the node's hostname, for a while
after the call.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.nodes.cadence import expected_within, next_wait_seconds
from hyperpod_recovery.domain.nodes.replace import ALREADY_IN_PROGRESS_CODES, GONE_CODES
from hyperpod_recovery.models.node_recovery import FirstGate, GateFailure, Initiation, RejoinWatch, ReplaceFailure, WatchedNode

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import BatchOutcome
    from hyperpod_recovery.models.commands import CommandReply, ResumeResult

NOT_ASKED = "NotAsked"  # no replacement was asked for: the watch's first_gate.refused says why
CHECK_DID_NOT_RUN = "CheckDidNotRun"  # the check never ran on it: nothing is known of the instance


def failed_instance(node: WatchedNode) -> str:
    """The instance that ran the check: the node's replacement, or its own instance back from a reboot."""
    return node.replacement_node_id or node.node_id


def to_replace_again(watch: RejoinWatch, resume: CommandReply[ResumeResult]) -> list[WatchedNode]:
    """The watched nodes whose check ran and failed (Resume Nodes asked about them by name). A check
    that could not run says nothing of the instance: replacing it would be a guess."""
    failed = {u.node for u in resume.result.unhealthy if u.verdict == "failed"}
    return [n for n in watch.nodes if n.to_resume and n.service_name in failed]


def systematic_failure(resume: CommandReply[ResumeResult]) -> str:
    """Why nothing should be replaced again when every one of several checked replacements failed:
    several sick instances at once are less likely than a check that fails everywhere (a wrong
    ReplacementHealthCheck) or a bad capacity pool, and replacing them all again would double a
    storm for nothing. "" when the failures are some of the nodes, or one node alone."""
    failed = [u for u in resume.result.unhealthy if u.verdict == "failed"]
    checked = len(resume.result.resumed) + len(resume.result.unhealthy)
    if len(failed) > 1 and len(failed) == checked:
        return (
            f"every one of the {checked} replacements checked failed the health check: more likely the check "
            "or the capacity than that many sick instances"
        )
    return ""


def after_failed_gate(
    watch: RejoinWatch,
    resume: CommandReply[ResumeResult],
    outcome: BatchOutcome,
    already: set[str],
    *,
    refused: str,
    now: datetime,
    deadline_seconds: int,
    first_check_after_seconds: int,
    expected_seconds: int | None,
) -> RejoinWatch:
    """The watch after Replace Unhealthy Nodes: each node whose repair failed the gate watched for
    its new replacement, or left drained (``refused``: why none was asked for; or the call's Failed
    entry for it); each node that passed marked in service, so that the next Resume Nodes leaves it
    alone. ``already``: instances this execution's calls started earlier (a retried Lambda).

    The new replacements get a rejoin deadline of their own (``deadline_seconds`` from now)."""
    verdicts = {u.node: u.verdict for u in resume.result.unhealthy}
    failed_by_id = {f.node_id: f for f in outcome.failed}
    started = set(outcome.successful) | already
    resumed = set(resume.result.resumed)
    nodes: list[WatchedNode] = []
    for node in watch.nodes:
        if not node.to_resume:
            nodes.append(node)
        elif node.service_name in resumed:
            nodes.append(node.model_copy(update={"resumed_at": resume.completed_at}))
        elif verdicts.get(node.service_name) == "could_not_run":
            nodes.append(node.model_copy(update={"gate_failure": GateFailure(instance=failed_instance(node), error=CHECK_DID_NOT_RUN)}))
        elif node.service_name in verdicts:
            nodes.append(_replaced_again(node, started, failed_by_id, refused))
        else:
            nodes.append(node)  # neither resumed nor unhealthy (someone else's drain): as Resume Nodes left it
    again = [n for n in nodes if n.replaced_again and not n.rejoined]
    expected_seconds = expected_within(expected_seconds, deadline_seconds) if expected_seconds is not None else None
    expected_at = now + timedelta(seconds=expected_seconds) if again and expected_seconds is not None else None
    first_gate = FirstGate(
        requested_at=resume.requested_at,
        completed_at=resume.completed_at,
        replaced_at=now,
        said={u.node: u.detail for u in resume.result.unhealthy if u.detail},
        refused=refused,
        checks=watch.checks,
    )
    return watch.model_copy(
        update={
            "at": now,
            "nodes": nodes,
            "done": not again,
            "deadline": now + timedelta(seconds=deadline_seconds) if again else watch.deadline,
            "expected_at": expected_at,
            "announced": watch.announced and expected_at is not None,
            "boot_check": [],
            "next_wait_seconds": next_wait_seconds(
                0,
                first_check_after_seconds,
                first_check_after_seconds,
                deadline_seconds,
                expected_seconds if expected_at is not None else None,
                announced=watch.announced,
            )
            if again
            else 0,
            "first_gate": first_gate,
        }
    )


def _replaced_again(node: WatchedNode, started: set[str], failed_by_id: dict[str, ReplaceFailure], refused: str) -> WatchedNode:
    instance = failed_instance(node)
    initiation: Initiation | None = None
    error = ""
    if instance in started:
        initiation = "initiated"  # (an earlier attempt's call, even if a refusal came up since: it is under way)
    elif refused:
        error = NOT_ASKED
    elif instance in failed_by_id:
        error = failed_by_id[instance].error_code
        initiation = "already_in_progress" if error in ALREADY_IN_PROGRESS_CODES else "vanished" if error in GONE_CODES else None
    else:
        error = "NotAccountedFor"  # neither Successful nor Failed: treated as not started
    if initiation is None:
        return node.model_copy(
            update={"gate_failure": GateFailure(instance=instance, error=error[:40], checked_first=node.action == "check")}
        )
    # Watched afresh for the new replacement: what was found of the failed one is forgotten (its
    # instance is in the failure, which keeps it from being taken for the new one).
    return node.model_copy(
        update={
            "gate_failure": GateFailure(instance=instance, replaced_again=True, checked_first=node.action == "check"),
            "initiation": initiation,
            "action": "replace",
            "status": None,
            "replacement_node_id": None,
            "matched_by": None,
            "replacement_slurm_node": None,
            "renamed_in_service": False,
            "booted_at": None,
            "rejoined": False,
        }
    )
