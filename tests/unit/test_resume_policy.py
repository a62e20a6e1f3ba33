"""When a job on a failed node is resubmitted: the stack's ResumePolicy, the job's own resume= word,
and whether the workflow can resubmit before the wait at all."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.models.commands import RESUME_POLICIES, JobSpec, resume_choice_in_comment
from hyperpod_recovery.models.kubernetes import KubeJobRef
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA
from hyperpod_recovery.models.node_recovery import FindNewestCheckpointInput, WatchedNode
from hyperpod_recovery.steps.find_newest_checkpoint import find_newest_checkpoint
from tests.fakes import T0, FakeCheckpointStore, FakeLedger


def _store(*prefixes: str) -> FakeCheckpointStore:
    store = FakeCheckpointStore()
    for prefix in prefixes:
        store.put_object("ckpt", f"{prefix}/step-000000100/a", b"x")
        manifest = {"schema": MANIFEST_SCHEMA, "job": prefix, "step": 100, "created_at": "2026-03-14T09:00:00Z"}
        manifest["shards"] = [{"key": "a", "size": 1}]
        store.put_object("ckpt", f"{prefix}/step-000000100/manifest.json", json.dumps(manifest).encode())
    return store


def _job(job_id: str, resume: str | None = None) -> JobSpec:
    spec = {"job_id": job_id, "name": f"j{job_id}", "num_nodes": 2, "state": "RUNNING", "checkpoint_uri": f"s3://ckpt/j{job_id}"}
    return JobSpec.model_validate({**spec, "resume": resume})


@pytest.mark.parametrize(
    ("policy", "own", "allowed", "now"),
    [
        ("immediate", None, True, True),
        ("after_rejoin", None, True, False),
        ("after_rejoin", "immediate", True, True),  # the job's own choice wins
        ("immediate", "after_rejoin", True, False),
        ("immediate", None, False, False),  # JobRecovery, or an execution of the earlier workflow
        ("immediate", "immediate", False, False),
    ],
)
def test_given_a_policy_and_a_jobs_choice_then_the_job_is_planned_for_now_or_after_the_rejoin(
    policy: str, own: str | None, allowed: bool, now: bool
) -> None:
    # Given one job with a verified checkpoint
    step = FindNewestCheckpointInput(execution_name="inc-1", jobs=[_job("1", own)], resume_now_allowed=allowed)
    # When its checkpoint is found under the stack's policy
    plan = find_newest_checkpoint(step, ledger=FakeLedger(), reader=_store("j1"), policy=policy, now=T0)  # type: ignore[arg-type]
    # Then it is in exactly one of the two lists, and every resumable job is planned
    assert [p.job.job_id for p in plan.resume_now] == (["1"] if now else [])
    assert [p.job.job_id for p in plan.resumable] == ([] if now else ["1"])
    assert [p.job.job_id for p in plan.planned] == ["1"]


def test_given_jobs_choosing_differently_then_each_goes_its_own_way() -> None:
    jobs = [_job("1"), _job("2", "after_rejoin"), _job("3", "immediate")]
    step = FindNewestCheckpointInput(execution_name="inc-1", jobs=jobs, resume_now_allowed=True)
    plan = find_newest_checkpoint(step, ledger=FakeLedger(), reader=_store("j1", "j2", "j3"), policy="after_rejoin", now=T0)
    assert [p.job.job_id for p in plan.resume_now] == ["3"] and [p.job.job_id for p in plan.resumable] == ["1", "2"]


@pytest.mark.parametrize(
    ("kube", "action", "now"),
    [(True, "reboot", False), (True, "replace", True), (False, "reboot", True)],
    ids=["eks-reboot", "eks-replace", "slurm-reboot"],
)
def test_given_a_node_the_incident_reboots_then_an_eks_job_on_it_waits_for_the_rejoin(kube: bool, action: str, now: bool) -> None:
    # Given a job that asks to be resumed at once, on a node this incident reboots or replaces
    job = _job("1", "immediate")
    if kube:
        job = job.model_copy(update={"kube": KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="j1")})
    repair = WatchedNode(node_id="i-0123456789abcdef0", slurm_node="hyperpod-i-0123456789abcdef0", action=action)  # type: ignore[arg-type]
    step = FindNewestCheckpointInput(execution_name="inc-1", jobs=[job], resume_now_allowed=True, repairs=[repair])
    # When its checkpoint is found
    plan = find_newest_checkpoint(step, ledger=FakeLedger(), reader=_store("j1"), policy="immediate", now=T0)
    # Then on EKS a reboot holds it until the rejoin (its pod there is Terminating until the node is back: no
    # copy may start before), while a replacement, or Slurm (whose scheduler ends the job), resumes it at once
    assert [p.job.job_id for p in plan.resume_now] == (["1"] if now else [])
    assert [p.job.job_id for p in plan.resumable] == ([] if now else ["1"])


@pytest.mark.parametrize(
    ("comment", "choice"),
    [
        ("resume=immediate", "immediate"),
        ("checkpoint=s3://b/p resume=after_rejoin", "after_rejoin"),
        ("hyperpod-recovery:resubmission-of=1 incident=x resume=after_rejoin", "after_rejoin"),
        ("resume=later", None),  # unknown: the stack's policy applies
        ("resume=", None),
        ("presume=immediate", None),
        ("resume=immediate,after_rejoin", None),
        ("", None),
    ],
)
def test_given_a_comment_then_its_resume_word_is_read_exactly(comment: str, choice: str | None) -> None:
    assert resume_choice_in_comment(comment) == choice


@given(st.text(max_size=200))
def test_given_any_comment_then_the_choice_is_a_policy_or_none_and_a_job_spec_carries_it(comment: str) -> None:
    choice = resume_choice_in_comment(comment)
    assert choice is None or choice in RESUME_POLICIES
    assert choice is None or f"resume={choice}" in comment.split()
    assert _job("1", choice).resume == choice


@pytest.mark.parametrize(
    ("configured", "argv"),
    [
        ("", None),
        ("   ", None),
        ("dcgmi diag -r 1", ["dcgmi", "diag", "-r", "1"]),
        ('sh -c "nvidia-smi -L | grep -q GPU"', ["sh", "-c", "nvidia-smi -L | grep -q GPU"]),
    ],
)
def test_given_a_health_check_setting_then_it_is_the_argument_list_the_agent_runs(configured: str, argv: list[str] | None) -> None:
    from tests.fakes import make_settings

    settings = make_settings(REPLACEMENT_HEALTH_CHECK=configured)
    assert (settings.health_check.argv if settings.health_check else None) == argv


def test_given_a_health_check_that_does_not_parse_then_the_function_refuses_to_start() -> None:
    from hyperpod_recovery.errors import ConfigurationError
    from tests.fakes import make_settings

    with pytest.raises(ConfigurationError, match="REPLACEMENT_HEALTH_CHECK"):
        make_settings(REPLACEMENT_HEALTH_CHECK='sh -c "unterminated')
