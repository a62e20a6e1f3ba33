"""The record of an execution that ended before recording (Reconcile Execution), for a job it shrank:
told from its history alone, never as running, and a grow-back in flight as unknown."""

from __future__ import annotations

from datetime import timedelta

from hyperpod_recovery.domain.record.fates import fate_text
from hyperpod_recovery.domain.record.incident import resubmission
from hyperpod_recovery.domain.record.reconcile import EndedExecution, unrecorded_end_record
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, JobRef, ResubmitResult
from hyperpod_recovery.models.node_recovery import ElasticDecision, ResumePlan
from hyperpod_recovery.models.records import Holdings, JobFate, Resubmission
from tests.fakes import T0

SHRINK = ElasticDecision(action="shrink", full_nodes=16, nodes=15, lost_nodes=1, why="shrink_wins")
GROW = ElasticDecision(action="full_size", full_nodes=16, nodes=16, why="grow_back")


def _row(old: str, new: str, decision: ElasticDecision, nodes: int, step: int) -> Resubmission:
    plan = ResumePlan(
        job=JobRef(job_id=old, name="llama"),
        checkpoint=CheckpointRef(uri=f"s3://ckpt/llama/step-{step:09d}/", step=step),
        elastic=decision,
    )
    reply = CommandReply[ResubmitResult](
        requested_at=T0, completed_at=T0, result=ResubmitResult(old_job_id=old, new_job_id=new, nodes=nodes)
    )
    row = resubmission(plan, reply)
    assert row is not None
    return row


def _fates(*rows: Resubmission, kept: frozenset[str] = frozenset()) -> list[JobFate]:
    end = EndedExecution(
        name="hpr-x", workflow="node", status="ABORTED", error=None, cause=None, started_at=T0, stopped_at=T0 + timedelta(hours=1),
        request=None, states_entered=(("Check Shrunk Jobs", T0),), resubmissions=tuple((r, T0) for r in rows),
    )  # fmt: skip
    held = Holdings(incident="hpr-x", cluster="c", claims={"1001", *kept})
    record = unrecorded_end_record(end, "c", held, hold_until=None, dry_run=False, now=T0 + timedelta(hours=1), kept_claims=kept)
    return record.job_fates


def test_given_a_resubmission_at_a_smaller_size_when_recorded_then_the_row_keeps_both_sizes() -> None:
    assert (_row("1001", "1002", SHRINK, 15, 3000).nodes, _row("1001", "1002", SHRINK, 15, 3000).full_nodes) == (15, 16)


def test_given_an_execution_stopped_while_its_shrunk_copy_waited_when_reconciled_then_the_record_says_it_was_not_grown_back() -> None:
    (fate,) = _fates(_row("1001", "1002", SHRINK, 15, 3000))
    assert fate.shrunk is not None and (fate.shrunk.copy_id, fate.shrunk.nodes, fate.full_nodes) == ("1002", 15, 16)
    assert fate.grow_back == "not grown back: the incident ended first; job 1002 was submitted on 15 of 16 node(s)"
    assert "on 15 of 16 node(s)" in fate_text(fate) and "runs on" not in fate_text(fate)


def test_given_an_execution_stopped_after_the_grow_back_when_reconciled_then_the_full_size_copy_is_the_jobs_copy() -> None:
    fates = _fates(_row("1001", "1002", SHRINK, 15, 3000), _row("1002", "1003", GROW, 16, 3200))
    (fate,) = fates  # the copy's own row is told as the job's grow-back
    assert (fate.copy_id, fate.checkpoint_step, fate.shrunk.grown_back if fate.shrunk else None) == ("1003", 3200, True)
    assert "then grown back to 16 node(s) as job 1003 from step 3200" in fate_text(fate)


def test_given_an_execution_stopped_during_the_grow_back_when_reconciled_then_the_copy_is_unknown_not_running() -> None:
    (fate,) = _fates(_row("1001", "1002", SHRINK, 15, 3000), kept=frozenset({"1002"}))
    assert fate.fate == "copy_unknown"
    assert "job 1002 may have been stopped, and a full-size copy may or may not have been submitted" in fate.reason
