"""An EKS job whose pods may take longer to stop than a re-creation waits (domain/jobs/eks_grace.py): its
grace period read from its pod templates, planned for after the rejoin and rigid, stopped at once by
a stop only (Resubmit Jobs Now), re-created after the rejoin once its pods are gone, and never two
copies at once whatever the grace period and the rejoin's time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_grace import DEFAULT_GRACE_SECONDS, OLD_COPY_WAIT_SECONDS, longest_grace, outlives_the_wait
from hyperpod_recovery.domain.jobs.eks_jobs import job_spec_of
from hyperpod_recovery.errors import OldCopyStillStopping
from hyperpod_recovery.models.commands import CheckpointRef, CordonNodes, JobRef, JobSpec, ResubmitJob, ResubmitResult
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.elastic import ElasticPolicy
from hyperpod_recovery.models.kubernetes import KUEUE_QUEUE_LABEL, MAX_GRACE_SECONDS_CARRIED, OPT_IN_ANNOTATION, KubeJobRef
from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA
from hyperpod_recovery.models.node_recovery import CheckpointPlan, FindNewestCheckpointInput, ResubmitJobInput, ResumePlan
from hyperpod_recovery.steps.find_newest_checkpoint import ElasticSettings, find_newest_checkpoint
from hyperpod_recovery.steps.resubmit_job import resubmit_job
from sandbox.kube import FakeKube
from tests.fakes import CLUSTER, T0, FakeCheckpointStore, FakeLedger, FakeOrchestrator
from tests.unit.eks_stopping import Clock
from tests.unit.test_steps import _request

LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
CHECKPOINT = CheckpointRef(uri="s3://ckpt/llama/step-000000100/", step=100)
TOKEN = "7" * 32
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)


# --- the grace period, from the job's pod templates ----------------------------------------------------
def _pytorchjob(**graces: int | None) -> dict[str, Any]:
    replicas = {}
    for kind, grace in graces.items():
        spec: dict[str, Any] = {"containers": [{"name": "pytorch", "image": "train:1"}]}
        if grace is not None:
            spec["terminationGracePeriodSeconds"] = grace
        replicas[kind] = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}
    metadata = {"name": "llama", "namespace": "kubeflow", "uid": "11111111-2222-3333-4444-555555555555"}
    return {"metadata": {**metadata, "annotations": {OPT_IN_ANNOTATION: "true"}}, "spec": {"pytorchReplicaSpecs": replicas}}


@pytest.mark.parametrize(
    ("graces", "longest"),
    [
        ({"Worker": None}, DEFAULT_GRACE_SECONDS),  # unset: Kubernetes' default
        ({"Master": 60, "Worker": 600}, 600),  # the longest replica type's
        ({"Master": None, "Worker": 0}, DEFAULT_GRACE_SECONDS),  # a Master left at the default outlasts 0
        ({"Worker": 10**12}, MAX_GRACE_SECONDS_CARRIED),  # an int64 past a year: bounded
    ],
)
def test_a_jobs_grace_period_is_its_pod_templates_longest_the_default_where_unset(graces: dict[str, int | None], longest: int) -> None:
    # Given a PyTorchJob whose replicas' pod templates set (or leave unset) terminationGracePeriodSeconds
    spec = job_spec_of(_pytorchjob(**graces), LLAMA, grace=True)
    # Then what the cordon carries of it says how long its pods may run on once it is stopped
    assert spec is not None and spec.stop_grace_seconds == longest


def test_the_cordons_answer_carries_each_jobs_grace_period() -> None:
    # Given a job whose pod template sets a 600 s grace period, on a node being cordoned
    _, _, orchestrator = _cluster(600)
    # When Cordon Nodes lists the jobs on it
    answer = orchestrator.execute(CordonNodes(nodes=[A], reason="hyperpod-recovery:inc-1"), "inc-1")
    # Then the job's facts say how long its pods may run on once stopped (Find Newest Checkpoint plans by it)
    assert [j.stop_grace_seconds for j in answer.jobs] == [600]


@pytest.mark.parametrize("odd", ["600", -5, 1.5, True])
def test_a_grace_period_that_is_no_whole_number_is_not_guessed_short(odd: Any) -> None:
    template = {"template": {"spec": {"terminationGracePeriodSeconds": odd}}}
    assert longest_grace([template]) == MAX_GRACE_SECONDS_CARRIED and outlives_the_wait(longest_grace([template]))


# --- the plan ----------------------------------------------------------------------------------------------
def _store() -> FakeCheckpointStore:
    store = FakeCheckpointStore()
    for prefix in ("j1", "j2", "j3", "j4"):
        store.put_object("ckpt", f"{prefix}/step-000000100/a", b"x")
        manifest = {"schema": MANIFEST_SCHEMA, "job": prefix, "step": 100, "created_at": "2026-03-14T09:00:00Z"}
        manifest["shards"] = [{"key": "a", "size": 1}]
        store.put_object("ckpt", f"{prefix}/step-000000100/manifest.json", json.dumps(manifest).encode())
    return store


def _job(grace: int | None, *, job_id: str = "1", kube: bool = True, **more: Any) -> JobSpec:
    spec = {"job_id": job_id, "name": f"j{job_id}", "num_nodes": 4, "state": "Running", "checkpoint_uri": f"s3://ckpt/j{job_id}"}
    ref = {"kube": KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name=f"j{job_id}")} if kube else {}
    return JobSpec.model_validate({**spec, **ref, "stop_grace_seconds": grace, **more})


def _plan(*jobs: JobSpec, policy: str = "immediate", allowed: bool = True, **step: Any) -> CheckpointPlan:
    found = FindNewestCheckpointInput(execution_name="inc-1", jobs=list(jobs), resume_now_allowed=allowed, **step)
    return find_newest_checkpoint(found, reader=_store(), ledger=FakeLedger(), policy=policy, now=T0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("grace", "kube", "later"),
    [
        (DEFAULT_GRACE_SECONDS, True, False),
        (OLD_COPY_WAIT_SECONDS - 1, True, False),  # gone before the last try comes
        (OLD_COPY_WAIT_SECONDS, True, True),  # its end and the last try's coincide at best: not counted on
        (600, True, True),
        (600, False, False),  # (Slurm carries none: its scheduler ends a job)
    ],
)
def test_a_job_whose_pods_may_outlast_the_re_creations_wait_is_stopped_at_once_and_re_created_after_the_rejoin(
    grace: int, kube: bool, later: bool
) -> None:
    # Given a job asking to be resumed at once, whose pods take ``grace`` seconds to stop
    plan = _plan(_job(grace if kube else None, kube=kube))
    # Then one that may outlast the wait is re-created after the rejoin, and stopped at once (a stop only,
    # first in Resubmit Jobs Now); any other is re-created at once, as it asked
    assert [p.job.job_id for p in plan.resumable] == (["1"] if later else [])
    assert [(p.job.job_id, p.stop_only) for p in plan.resume_now] == [("1", later)]
    assert [p.job.job_id for p in plan.planned] == ["1"] and [p.job.job_id for p in plan.early_stops] == (["1"] if later else [])
    # And the plan says why it waits (the record and the message are written from it)
    assert [p.stop_grace_seconds for p in plan.planned] == [grace if later else None]


def test_a_job_resumed_after_the_rejoin_by_its_own_choice_is_still_stopped_at_once_when_its_pods_are_slow() -> None:
    # Given two jobs resumed after the rejoin (the stack's policy), one with a 600 s grace period
    plan = _plan(_job(600), _job(DEFAULT_GRACE_SECONDS, job_id="2"), policy="after_rejoin")
    # Then both are re-created after the rejoin; only the slow one is stopped at once (its pods get the wait for
    # the rejoin to go: stopped only after it, they would outlast the re-creation's tries and escalate)
    assert [p.job.job_id for p in plan.resumable] == ["1", "2"] and [p.job.job_id for p in plan.early_stops] == ["1"]


def test_an_elastic_job_with_slow_pods_never_shrinks() -> None:
    # Given an elastic job (may run on 2 of its 4 nodes) whose pods take 600 s to stop, and no spare node
    elastic = _job(600, elastic=ElasticPolicy(min_nodes=2, source="elastic_policy"), spare_nodes=0, lost_nodes=1)
    settings_ = ElasticSettings(cluster=CLUSTER, expected_replacement_seconds=3600, grow_back_seconds=60)
    found = FindNewestCheckpointInput(execution_name="inc-1", jobs=[elastic], resume_now_allowed=True)
    plan = find_newest_checkpoint(found, reader=_store(), ledger=FakeLedger(), policy="after_rejoin", elastic=settings_, now=T0)
    # Then it is rigid: no shrunk copy now (it would wait for the same pods), re-created at its size after the rejoin
    assert plan.shrinks == 0 and all(p.elastic is None for p in plan.resume_now + plan.resumable)
    assert [p.job.job_id for p in plan.resumable] == ["1"] and [p.job.job_id for p in plan.early_stops] == ["1"]


def test_the_same_job_is_weighed_for_a_shrink_when_its_pods_stop_in_time() -> None:
    elastic = _job(DEFAULT_GRACE_SECONDS, elastic=ElasticPolicy(min_nodes=2, source="elastic_policy"), spare_nodes=0, lost_nodes=1)
    settings_ = ElasticSettings(cluster=CLUSTER, expected_replacement_seconds=3600, grow_back_seconds=60)
    found = FindNewestCheckpointInput(execution_name="inc-1", jobs=[elastic], resume_now_allowed=True)
    plan = find_newest_checkpoint(found, reader=_store(), ledger=FakeLedger(), policy="after_rejoin", elastic=settings_, now=T0)
    assert plan.planned[0].elastic is not None and plan.early_stops == []  # (it waits here: its checkpoint does not reshard)


def test_a_workflow_that_resubmits_only_at_its_end_plans_no_stop() -> None:
    # Given JobRecovery (or an earlier NodeRecovery): one resubmission point, no Resubmit Jobs Now
    plan = _plan(_job(600), allowed=False)
    # Then the job is resumable there, with no stop at once (nothing would send it) and no word of one
    assert [p.job.job_id for p in plan.resumable] == ["1"] and plan.resume_now == [] and plan.planned[0].stop_grace_seconds is None


def test_an_incident_with_no_room_left_for_a_stop_plans_the_job_after_the_rejoin_without_one() -> None:
    # Given as many jobs as an incident carries, one of them with slow pods
    jobs = [_job(600, job_id="1")] + [
        _job(None, job_id=str(n), kube=False, checkpoint_uri=None) for n in range(2, MAX_JOBS_PER_INCIDENT + 1)
    ]
    plan = _plan(*jobs)
    # Then it waits for the rejoin all the same (never re-created at once), and the plan stays within its bound
    assert [p.job.job_id for p in plan.resumable] == ["1"] and plan.early_stops == [] and plan.planned[0].stop_grace_seconds == 600


def test_a_stop_only_is_refused_where_it_has_no_re_creation_after_the_rejoin() -> None:
    stop = ResumePlan(job=JobRef(job_id="1", name="j1", kube=LLAMA), checkpoint=CHECKPOINT, stop_grace_seconds=600, stop_only=True)
    with pytest.raises(ValidationError, match="stop only"):
        CheckpointPlan(at=T0, resume_now=[stop])
    with pytest.raises(ValidationError, match="never after the rejoin"):
        CheckpointPlan(at=T0, resumable=[stop, stop.model_copy(update={"stop_only": False})])
    assert CheckpointPlan(at=T0, resume_now=[stop], resumable=[stop.model_copy(update={"stop_only": False})]).planned != []


@settings(max_examples=200, deadline=None)
@given(
    graces=st.lists(st.one_of(st.none(), st.integers(0, 1200)), min_size=1, max_size=4),
    policy=st.sampled_from(["immediate", "after_rejoin"]),
    allowed=st.booleans(),
    hung=st.booleans(),
)
def test_every_job_is_planned_once_and_a_slow_one_never_resubmitted_at_once(
    graces: list[int | None], policy: str, allowed: bool, hung: bool
) -> None:
    # Given EKS jobs of any grace periods (None: Slurm's), under either policy, in either workflow, a hang's or not
    jobs = [_job(g, job_id=str(n), kube=g is not None) for n, g in enumerate(graces, 1)]
    execution = "hpj-1-hung-1773478800-nodes" if hung else "inc-1"  # (a hang of job 1: resubmitted at once, rigid)
    found = FindNewestCheckpointInput(execution_name=execution, jobs=jobs, resume_now_allowed=allowed)
    plan = find_newest_checkpoint(found, reader=_store(), ledger=FakeLedger(), policy=policy, now=T0)  # type: ignore[arg-type]
    # Then each job is planned once (all have a verified checkpoint); one whose pods may outlast the wait is never
    # re-created at once, and is stopped at once exactly where the workflow can (a stop only, re-created after the rejoin)
    assert sorted(p.job.job_id for p in plan.planned) == sorted(j.job_id for j in jobs)
    slow = {j.job_id for j in jobs if j.kube is not None and outlives_the_wait(j.stop_grace_seconds)}
    assert not slow & {p.job.job_id for p in plan.resume_now if not p.stop_only}
    assert {p.job.job_id for p in plan.early_stops} == (slow if allowed else set())
    assert all(p.elastic is None for p in plan.planned if p.job.job_id in slow)


# --- the stop only, and the re-creation after it ---------------------------------------------------------
def _cluster(grace: int | None, *, labels: dict[str, str] | None = None, kueue: bool = False) -> tuple[FakeKube, Clock, EksOrchestrator]:
    clock = Clock(AT)
    fake = FakeKube(now=clock, kueue=kueue)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job(
        "PyTorchJob", "kubeflow", "llama", nodes=[A, B], annotations={OPT_IN_ANNOTATION: "true"}, grace_seconds=grace, labels=labels
    )
    return fake, clock, EksOrchestrator(fake, None, clock)  # type: ignore[arg-type]


def _uid(fake: FakeKube) -> str:
    return str(fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"])


def _command(fake: FakeKube, *, stop_only: bool) -> ResubmitJob:
    return ResubmitJob(job_id=_uid(fake), checkpoint=CHECKPOINT, kube=LLAMA, recreation_token=TOKEN, stop_only=stop_only)


def test_a_stop_only_suspends_the_job_creates_nothing_and_does_not_wait_for_its_pods() -> None:
    # Given a running job whose pods take 600 s to stop
    fake, clock, orchestrator = _cluster(600)
    # When Resubmit Jobs Now stops it only
    result = orchestrator.execute(_command(fake, stop_only=True), "inc-1")
    # Then it is suspended, its pods Terminating, nothing created, and the answer says so (no OldCopyStillStopping)
    old = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    assert isinstance(result, ResubmitResult) and result.stop_only and result.cancelled_old and result.new_job_id is None
    assert old["spec"]["runPolicy"]["suspend"] is True and list(fake.jobs) == [("PyTorchJob", "kubeflow", "llama")]
    assert all("deletionTimestamp" in p["metadata"] for p in fake.pods.values()) and fake.second_copies() == []
    # When the re-creation comes after the rejoin, its pods gone by then
    clock.advance(600)
    made = orchestrator.execute(_command(fake, stop_only=False), "inc-1")
    # Then it makes the copy at its first try, the old job found stopped already
    assert made.new_job_name == "kubeflow/llama-r1" and fake.second_copies() == []
    assert [c for c in fake.calls if c[0] == "patch"] == [("patch", "pytorchjobs")]  # (the stop only's suspend, once)


def test_a_stop_only_that_cannot_stop_the_job_for_certain_says_why_and_changes_nothing() -> None:
    # Given a job labelled for a Kueue queue on a cluster without Kueue (a suspend Kueue would undo)
    fake, _, orchestrator = _cluster(600, labels={KUEUE_QUEUE_LABEL: "team-a"})
    # When Resubmit Jobs Now stops it only
    result = orchestrator.execute(_command(fake, stop_only=True), "inc-1")
    # Then it is not stopped, the answer says why (the re-creation after the rejoin tries again, and fails there)
    assert result.stop_only and not result.cancelled_old and "cannot be stopped for certain" in (result.declined or "")
    assert "suspend" not in (fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"].get("runPolicy") or {})


def test_a_stop_only_is_never_sent_to_slurm_nor_as_a_grow_back() -> None:
    with pytest.raises(ValidationError, match="stop_only"):
        ResubmitJob(job_id="1001", checkpoint=CHECKPOINT, stop_only=True)
    with pytest.raises(ValidationError, match="stop_only"):
        ResubmitJob(job_id="1", checkpoint=CHECKPOINT, kube=LLAMA, recreation_token=TOKEN, stop_only=True, require_free_nodes=4)


def test_resubmit_jobs_now_sends_a_stop_only_under_the_jobs_claim_as_a_command_of_its_own() -> None:
    # Given a stop only planned for an EKS job
    ledger, orchestrator = FakeLedger(), FakeOrchestrator()
    stop = ResumePlan(job=JobRef(job_id=_uid(_cluster(600)[0]), name="llama", kube=LLAMA), checkpoint=CHECKPOINT, stop_only=True)
    step = ResubmitJobInput(execution_name="inc-1", task_token="t", request=_request(1), plan=stop)
    # When Resubmit Job Now runs it
    resubmit_job(step, orchestrator=orchestrator, ledger=ledger, claim_ttl=timedelta(hours=1), now=T0)  # type: ignore[arg-type]
    # Then this incident claims the job from the stop on, and the command stops only (its own command id)
    (sent,) = orchestrator.dispatched
    assert isinstance(sent.command, ResubmitJob) and sent.command.stop_only and sent.command_id == f"inc-1:stop:{stop.job.job_id}"
    assert sent.command.recreation_token == ledger.recreation_token(CLUSTER, stop.job.job_id, T0)
    claim = ledger.resubmission_claim(CLUSTER, stop.job.job_id)
    assert claim is not None and claim.incident_id == "inc-1" and claim.new_job_id is None


@settings(max_examples=60, deadline=None)
@given(grace=st.integers(0, 1500), rejoin=st.integers(0, 1500), at_once=st.booleans())
def test_never_two_copies_and_the_copy_is_made_exactly_when_the_old_pods_are_gone_by_the_last_try(
    grace: int, rejoin: int, at_once: bool
) -> None:
    # Given a running job whose pods take ``grace`` s to stop, stopped at once (a stop only) or not
    fake, clock, orchestrator = _cluster(grace)
    if at_once:
        orchestrator.execute(_command(fake, stop_only=True), "inc-1")
    # When its re-creation is tried after a rejoin ``rejoin`` s later, then twice more 45 s apart (the Retry clause)
    clock.advance(rejoin)
    stopped_at = None if at_once else clock()
    made = None
    for attempt in range(3):
        if attempt:
            clock.advance(OLD_COPY_WAIT_SECONDS / 2)
        try:
            made = orchestrator.execute(_command(fake, stop_only=False), "inc-1")
            break
        except OldCopyStillStopping:
            assert len(fake.jobs) == 1
        assert fake.second_copies() == []
    # Then never were two copies live, and the copy exists exactly when the old pods' grace period ended by the last try
    assert fake.second_copies() == []
    had = rejoin + OLD_COPY_WAIT_SECONDS if at_once else OLD_COPY_WAIT_SECONDS
    assert (made is not None) == (grace <= had), (grace, rejoin, at_once, stopped_at)
