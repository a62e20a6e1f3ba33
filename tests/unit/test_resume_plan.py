"""The resume plan's timing (domain/jobs/resume_plan.py): a hang's node recovery resubmits the hung
job at once whatever the policy; the job is named by the request's typed field (nested_for_job, set by
JobRecovery's Recover Nodes), never read back from an execution's name."""

from __future__ import annotations

import pytest

from hyperpod_recovery.domain.jobs.resume_plan import timing
from hyperpod_recovery.models.commands import JobSpec
from hyperpod_recovery.models.node_recovery import FindNewestCheckpointInput
from hyperpod_recovery.models.requests import RecoveryRequest, Trigger, TriggerSource
from hyperpod_recovery.steps.find_newest_checkpoint import find_newest_checkpoint
from tests.fakes import T0, FakeLedger
from tests.unit.test_resume_policy import _job, _store

NODE = "i-0123456789abcdef0"


def _request(source: TriggerSource, nested_for_job: str | None) -> RecoveryRequest:
    trigger = Trigger(source=source, node_ids=[NODE], reason="suspect", detected_at=T0)
    return RecoveryRequest(cluster="c", node_ids=[NODE], triggers=[trigger], detected_at=T0, nested_for_job=nested_for_job)


def _step(jobs: list[JobSpec], request: RecoveryRequest | None) -> FindNewestCheckpointInput:
    # (a name that says nothing: the hang is known by the request alone)
    return FindNewestCheckpointInput(execution_name="hpj-9-nodes", jobs=jobs, resume_now_allowed=True, request=request)


def test_given_a_hangs_node_recovery_then_the_hung_job_resumes_at_once_and_the_others_by_the_policy() -> None:
    step = _step([_job("1"), _job("2")], _request("job_hung", nested_for_job="1"))
    plan = find_newest_checkpoint(step, reader=_store("j1", "j2"), policy="after_rejoin", now=T0, ledger=FakeLedger())
    assert [p.job.job_id for p in plan.resume_now] == ["1"]
    assert [p.job.job_id for p in plan.resumable] == ["2"]


@pytest.mark.parametrize(
    "request_",
    [
        _request("job_failed", nested_for_job="1"),  # a job failure's node recovery: the job goes by the policy
        _request("job_hung", nested_for_job=None),  # no job named
        None,  # JobRecovery's own plan
    ],
)
def test_given_no_hangs_job_then_every_job_goes_by_the_policy(request_: RecoveryRequest | None) -> None:
    step = _step([_job("1")], request_)
    assert step.hung_job is None
    assert timing(_job("1"), step, "after_rejoin").now is False


def test_given_the_hung_job_then_it_is_never_shrunk() -> None:
    step = _step([_job("1")], _request("job_hung", nested_for_job="1"))
    when = timing(_job("1"), step, "after_rejoin")
    assert when.now and when.rigid and not when.slow


def test_given_a_request_with_no_job_then_its_state_carries_no_field_for_it() -> None:
    assert "nested_for_job" not in _request("job_hung", nested_for_job=None).model_dump(mode="json")
