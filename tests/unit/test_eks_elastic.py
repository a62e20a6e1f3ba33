"""Shrink-and-continue on EKS: a PyTorchJob's opt-in (its elasticPolicy, or our annotation), its
re-creation at a size, and its grow-back (adapters/eks_orchestrator/jobs.py grow_back) against the
schema-checked API server (sandbox/kube/, its scheduler on: one pod a free node)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_jobs import (
    ELASTIC_ANNOTATION,
    STOPPED_FOR_ANNOTATION,
    UnsizableJob,
    elastic_opt_in,
    job_spec_of,
    recreated_job,
)
from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import CheckpointRef, CordonNodes, JobRef, JobSpec, ResubmitJob, ResubmitResult
from hyperpod_recovery.models.elastic import ElasticPolicy
from hyperpod_recovery.models.kubernetes import OPT_IN_ANNOTATION, KubeJobRef
from hyperpod_recovery.models.node_recovery import ElasticDecision, ResubmitJobInput, ResumePlan
from hyperpod_recovery.steps.resubmit_job import resubmit_job
from sandbox.kube import FakeKube
from sandbox.kube.scheduling import POD_START_SECONDS
from tests.fakes import CLUSTER, T0, FakeLedger, FakeOrchestrator
from tests.unit.eks_stopping import Clock, until_stopped
from tests.unit.test_steps import _request

CHECKPOINT = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000003000/", step=3000)
LATER = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000003100/", step=3100)
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
SHRINK_TOKEN, GROW_TOKEN = "5" * 32, "6" * 32
INCIDENT = "hpr-a"


def _job(
    *, workers: int = 16, master: int = 0, policy: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "train:1"}]}}
    replicas: dict[str, Any] = {"Worker": {"replicas": workers, "restartPolicy": "Never", "template": copy.deepcopy(template)}}
    if master:
        replicas["Master"] = {"replicas": master, "restartPolicy": "Never", "template": copy.deepcopy(template)}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas}
    if policy is not None:
        spec["elasticPolicy"] = policy
    metadata = {"name": "llama", "namespace": "kubeflow", "uid": "11111111-2222-3333-4444-555555555555"}
    metadata["annotations"] = {OPT_IN_ANNOTATION: "true", **(annotations or {})}  # type: ignore[assignment]
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


# --- the opt-in ---------------------------------------------------------------------------------------
def test_an_elastic_policy_opts_a_pytorchjob_in_its_worker_replicas_one_a_node() -> None:
    # Given a PyTorchJob of 16 Workers whose elasticPolicy lets them go down to 12
    job = _job(policy={"minReplicas": 12, "maxReplicas": 16, "rdzvBackend": "c10d"})
    # When the workflow reads it
    spec = job_spec_of(job, LLAMA)
    # Then it may shrink to 12 nodes, from its elasticPolicy, one node a replica at a time
    assert spec is not None and spec.num_nodes == 16 and spec.elastic_problem is None
    assert spec.elastic == ElasticPolicy(min_nodes=12, max_nodes=16, source="elastic_policy")


def test_a_master_beside_elastic_workers_is_one_node_more_at_every_size() -> None:
    policy, problem = elastic_opt_in(_job(workers=15, master=1, policy={"minReplicas": 11, "maxReplicas": 15}), "PyTorchJob")
    assert problem is None and policy == ElasticPolicy(min_nodes=12, max_nodes=16, source="elastic_policy")


def test_an_elastic_policy_without_min_replicas_is_kubeflows_default_the_workers_it_has() -> None:
    policy, _ = elastic_opt_in(_job(workers=16, policy={"maxReplicas": 16}), "PyTorchJob")
    assert policy is not None and policy.min_nodes == 16  # (it may not shrink: it waits, and the record says why)


def test_our_annotation_opts_in_a_job_without_an_elastic_policy() -> None:
    policy, problem = elastic_opt_in(_job(annotations={ELASTIC_ANNOTATION: "min=12,multiple=4"}), "PyTorchJob")
    assert problem is None and policy == ElasticPolicy(min_nodes=12, multiple=4, source="annotation")


@pytest.mark.parametrize(
    ("job", "said"),
    [
        (_job(annotations={ELASTIC_ANNOTATION: "min=twelve"}), "hyperpod-recovery.io/elastic annotation cannot be read"),
        (_job(policy={"minReplicas": 14, "maxReplicas": 12}), "min 14 is above max 12"),
        (_job(policy={"minReplicas": "12"}), "elasticPolicy.minReplicas '12' is not a whole number"),
        (_job(policy={"minReplicas": 0}), "elasticPolicy.minReplicas 0 is not between 1 and 10000"),
    ],
)
def test_an_opt_in_that_cannot_be_read_leaves_the_job_rigid_and_says_why(job: dict[str, Any], said: str) -> None:
    spec = job_spec_of(job, LLAMA)
    assert spec is not None and spec.elastic is None and spec.elastic_problem is not None and said in spec.elastic_problem


def test_a_hyperpod_pytorchjobs_own_elastic_policy_stays_the_training_operators() -> None:
    # Given a HyperPodPyTorchJob with HyperPod's elasticPolicy (and even our annotation)
    job = {
        "apiVersion": "sagemaker.amazonaws.com/v1",
        "kind": "HyperPodPyTorchJob",
        "metadata": {
            "name": "hp",
            "namespace": "team",
            "uid": "11111111-2222-3333-4444-555555555556",
            "annotations": {ELASTIC_ANNOTATION: "min=2"},
        },
        "spec": {"replicaSpecs": [{"name": "pods", "replicas": 4}], "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4}},
    }
    spec = job_spec_of(job, KubeJobRef(kind="HyperPodPyTorchJob", namespace="team", name="hp"))
    # Then it is never elastic for us: its operator restarts (and rescales) it, and it is left alone
    assert spec is not None and spec.elastic is None and spec.elastic_problem is None
    assert spec.restarted_by == "hyperpod_training_operator" and spec.auto_resume


_ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 20_000), st.text(max_size=12), st.lists(st.integers(), max_size=2))


@given(
    annotation=st.one_of(st.none(), st.text(max_size=40)),
    policy=st.one_of(st.none(), _ANY, st.dictionaries(st.sampled_from(["minReplicas", "maxReplicas", "rdzvBackend"]), _ANY)),
    workers=st.one_of(st.none(), st.integers(0, 20_000)),
)
def test_reading_any_opt_in_never_raises_it_gives_a_policy_or_the_reason_it_cannot(annotation: Any, policy: Any, workers: Any) -> None:
    job = _job(annotations={ELASTIC_ANNOTATION: annotation} if annotation is not None else None)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    if policy is not None:
        job["spec"]["elasticPolicy"] = policy
    found, problem = elastic_opt_in(job, "PyTorchJob")
    assert (found is None) or (problem is None)
    assert problem is None or (isinstance(problem, str) and 0 < len(problem) <= 300)
    spec = job_spec_of(job, LLAMA)  # (and the JobSpec built from it is valid)
    assert spec is not None and (spec.elastic, spec.elastic_problem) == (found, problem)


# --- re-creating at a size ----------------------------------------------------------------------------
def _env(job: dict[str, Any], replica: str = "Worker") -> dict[str, str]:
    container = job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container.get("env") or []}


def test_a_shrunk_copy_has_that_many_pods_and_is_told_its_size() -> None:
    # Given a Master and 15 Workers, re-created at 12 nodes with data-parallel 12
    old = _job(workers=15, master=1)
    new = recreated_job(
        old,
        "PyTorchJob",
        name="llama-r1",
        resume_from=CHECKPOINT.uri,
        step=3000,
        incident=INCIDENT,
        token=SHRINK_TOKEN,
        nodes=12,
        data_parallel=12,
    )
    # Then the Master stays one, the Workers are what 12 nodes leave: 11
    replicas = new["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 11)
    # And every container is told the size beside where to resume
    for replica in ("Master", "Worker"):
        env = _env(new, replica)
        assert env["HYPERPOD_RECOVERY_RESUME_NODES"] == "12" and env["HYPERPOD_RECOVERY_RESUME_DATA_PARALLEL"] == "12"
        assert env["HYPERPOD_RECOVERY_RESUME_STEP"] == "3000"
    # And a copy of it re-created at its own size carries no size it was given before
    again = recreated_job(
        new | {"metadata": {**new["metadata"], "uid": "u"}},
        "PyTorchJob",
        name="llama-r2",
        resume_from=LATER.uri,
        step=3100,
        incident=INCIDENT,
        token=GROW_TOKEN,
    )
    assert "HYPERPOD_RECOVERY_RESUME_NODES" not in _env(again) and _env(again)["HYPERPOD_RECOVERY_RESUME_STEP"] == "3100"


def test_a_size_that_leaves_no_worker_is_refused() -> None:
    with pytest.raises(UnsizableJob):
        recreated_job(
            _job(workers=3, master=1),
            "PyTorchJob",
            name="x-r1",
            resume_from=CHECKPOINT.uri,
            step=1,
            incident="i",
            token=SHRINK_TOKEN,
            nodes=1,
        )


# --- a cluster: 16 nodes, the elastic job on all of them ------------------------------------------------
def _node(i: int) -> str:
    return f"hyperpod-i-0123456789abcd{i:03x}"


def _cluster(nodes: int = 16, clock: Clock | None = None) -> tuple[FakeKube, EksOrchestrator]:
    clock = clock or Clock(T0)
    fake = FakeKube(now=clock, epoch=T0, scheduler=True)
    for i in range(nodes):
        fake.add_hyperpod_node(f"i-0123456789abcd{i:03x}")
    fake.add_job(
        "PyTorchJob",
        "kubeflow",
        "llama",
        nodes=[_node(i) for i in range(16)],
        annotations={OPT_IN_ANNOTATION: "true"},
        elastic_policy={"minReplicas": 12, "maxReplicas": 16},
    )
    fake.calls.clear()
    return fake, EksOrchestrator(fake, tasks=None, now=clock)  # type: ignore[arg-type]


def _until_stopped(fake: FakeKube, command: ResubmitJob, orchestrator: EksOrchestrator, incident: str = INCIDENT) -> ResubmitResult:
    """The command as the workflow runs it: tried again while the copy it replaces is Terminating."""
    assert isinstance(fake.now, Clock)
    result, _ = until_stopped(lambda: orchestrator.execute(command, incident), fake.now)
    assert isinstance(result, ResubmitResult)
    return result


def _uid(fake: FakeKube, name: str) -> str:
    return str(fake.jobs[("PyTorchJob", "kubeflow", name)]["metadata"]["uid"])


def _shrunk(fake: FakeKube, orchestrator: EksOrchestrator) -> ResubmitResult:
    """Node 7 cordoned (the incident's), and the job re-created on the 15 others."""
    orchestrator.execute(CordonNodes(nodes=[_node(7)], reason=f"hyperpod-recovery:{INCIDENT}"), INCIDENT)
    command = ResubmitJob(
        job_id=_uid(fake, "llama"), checkpoint=CHECKPOINT, kube=LLAMA, recreation_token=SHRINK_TOKEN, nodes=15, data_parallel=15
    )
    return _until_stopped(fake, command, orchestrator)


def _grow(fake: FakeKube, orchestrator: EksOrchestrator, *, copy_id: str | None = None, incident: str = INCIDENT) -> ResubmitResult:
    command = ResubmitJob(
        job_id=copy_id or _uid(fake, "llama-r1"),
        checkpoint=LATER,
        kube=LLAMA,
        recreation_token=GROW_TOKEN,
        copy_token=SHRINK_TOKEN,
        nodes=16,
        data_parallel=16,
        require_free_nodes=16,
    )
    return _until_stopped(fake, command, orchestrator, incident)


def _running_pods(fake: FakeKube, name: str) -> list[dict[str, Any]]:
    """The job's pods that run once the scheduler's start delay has passed (the pods it bound start then)."""
    assert isinstance(fake.now, Clock)
    fake.now.advance(POD_START_SECONDS)
    fake.tick()
    uid = _uid(fake, name)
    return [
        p
        for p in fake.pods.values()
        if p["status"]["phase"] == "Running" and any(o["uid"] == uid for o in p["metadata"].get("ownerReferences") or [])
    ]


def test_the_cordon_counts_an_elastic_jobs_lost_and_spare_nodes() -> None:
    # Given the elastic job on 16 of 17 nodes
    _, orchestrator = _cluster(nodes=17)
    # When node 7 is cordoned
    result = orchestrator.execute(CordonNodes(nodes=[_node(7)], reason=f"hyperpod-recovery:{INCIDENT}"), INCIDENT)
    # Then the job lost one node, and one node of its group could take it at once
    (job,) = result.jobs
    assert (job.lost_nodes, job.spare_nodes) == (1, 1) and job.elastic is not None


def test_a_shrink_re_creates_the_job_with_fewer_workers_and_the_scheduler_places_them() -> None:
    fake, orchestrator = _cluster()
    result = _shrunk(fake, orchestrator)
    r1 = fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    assert result.nodes == 15 and r1["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 15
    assert r1["spec"]["elasticPolicy"] == {"minReplicas": 12, "maxReplicas": 16}  # (the owner's policy, as written)
    assert _env(r1)["HYPERPOD_RECOVERY_RESUME_NODES"] == "15" and len(_running_pods(fake, "llama-r1")) == 15
    assert {p["spec"]["nodeName"] for p in _running_pods(fake, "llama-r1")} == {_node(i) for i in range(16)} - {_node(7)}


def test_a_grow_back_that_too_few_nodes_could_take_is_declined_and_touches_nothing() -> None:
    # Given the job shrunk to 15, its failed node still cordoned: nothing free
    fake, orchestrator = _cluster()
    _shrunk(fake, orchestrator)
    before = copy.deepcopy(fake.jobs)
    fake.calls.clear()
    # When its grow-back asks for 16
    result = _grow(fake, orchestrator)
    # Then it is declined, saying why, and nothing was written
    assert (
        result.new_job_id is None and result.declined is not None and "only 15 node(s) could take it at once, 16 needed" in result.declined
    )
    assert fake.jobs == before and not [c for c in fake.calls if c[0] in ("patch", "create")]


def test_a_grow_back_with_its_nodes_free_stops_the_shrunk_copy_and_makes_the_full_size_one_once() -> None:
    # Given the job shrunk to 15, and its failed node back in service (uncordoned)
    fake, orchestrator = _cluster()
    _shrunk(fake, orchestrator)
    fake.patch_node(_node(7), [{"op": "remove", "path": "/spec/unschedulable"}])
    fake.nodes[_node(7)]["metadata"]["annotations"] = {}
    fake.nodes[_node(7)]["spec"].pop("taints", None)
    # When it grows back, and the grow-back is retried (a lost answer)
    first = _grow(fake, orchestrator)
    again = _grow(fake, orchestrator)
    # Then the shrunk copy is suspended, marked as stopped for this incident's grow-back
    r1 = fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    assert r1["spec"]["runPolicy"]["suspend"] is True and r1["metadata"]["annotations"][STOPPED_FOR_ANNOTATION] == INCIDENT
    # And one full-size copy runs, on all 16 nodes, from the later step, told its size
    r2 = fake.jobs[("PyTorchJob", "kubeflow", "llama-r2")]
    assert first.new_job_id == again.new_job_id == r2["metadata"]["uid"] and first.nodes == 16 and first.cancelled_old
    assert r2["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 16 and len(_running_pods(fake, "llama-r2")) == 16
    assert _env(r2)["HYPERPOD_RECOVERY_RESUME_STEP"] == "3100" and _env(r2)["HYPERPOD_RECOVERY_RESUME_NODES"] == "16"
    assert STOPPED_FOR_ANNOTATION not in r2["metadata"]["annotations"] and fake.second_copies() == []


def test_a_copy_this_grow_back_stopped_before_a_crash_is_followed_by_its_successor() -> None:
    # Given the shrunk copy marked and suspended by this incident's grow-back, which then crashed
    fake, orchestrator = _cluster()
    _shrunk(fake, orchestrator)
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama-r1")
    fake.patch_job(ref, [{"op": "add", "path": f"/metadata/annotations/{STOPPED_FOR_ANNOTATION.replace('/', '~1')}", "value": INCIDENT}])
    fake.patch_job(ref, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}])
    # When the grow-back runs again (the copy's nodes free now; the count was made before the stop)
    result = _grow(fake, orchestrator)
    # Then it goes on: the successor is made, never counted again
    assert result.new_job_id == _uid(fake, "llama-r2") and result.declined is None


@pytest.mark.parametrize("ending", ["suspended by a human", "failed", "deleted"])
def test_a_shrunk_copy_that_ended_without_us_is_never_started_again(ending: str) -> None:
    # Given the shrunk copy stopped, failed or deleted by someone else
    fake, orchestrator = _cluster()
    _shrunk(fake, orchestrator)
    copy_id = _uid(fake, "llama-r1")
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama-r1")
    if ending == "suspended by a human":
        fake.patch_job(ref, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}])
    elif ending == "failed":
        fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
        fake.job_fails("PyTorchJob", "kubeflow", "llama-r1")
    else:
        del fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    # When its grow-back comes
    result = _grow(fake, orchestrator, copy_id=copy_id)
    # Then it is declined, and nothing new is made
    assert result.new_job_id is None and result.declined is not None and "not started again" in result.declined
    assert ("PyTorchJob", "kubeflow", "llama-r2") not in fake.jobs


def test_a_grow_back_never_stops_a_job_we_did_not_create() -> None:
    # Given the shrunk copy, and the grow-back naming the owner's own job (no token of ours on it)
    fake, orchestrator = _cluster()
    _shrunk(fake, orchestrator)
    fake.patch_job(LLAMA, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": False}])
    # When the grow-back names it
    with pytest.raises(InvalidCommand, match="no re-creation of ours"):
        _grow(fake, orchestrator, copy_id=_uid(fake, "llama"))
    # Then nothing of it was touched
    assert ("PyTorchJob", "kubeflow", "llama-r2") not in fake.jobs
    assert STOPPED_FOR_ANNOTATION not in fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["annotations"]


# --- Grow Back Job's command on EKS: the copy found by the token of the re-creation that made it ---------
def test_the_grow_back_command_names_the_job_the_copy_came_from_and_both_tokens() -> None:
    # Given an incident that captured the elastic job object and shrank it (its copy's token recorded)
    ledger, orchestrator = FakeLedger(), FakeOrchestrator()
    original = JobSpec(
        job_id="11111111-2222-3333-4444-555555555555",
        name="llama",
        num_nodes=16,
        state="Running",
        kube=LLAMA,
        elastic=ElasticPolicy(min_nodes=12, source="elastic_policy"),
    )
    ledger.save_jobs("inc-1", [original], T0)
    shrink_token = ledger.recreation_token(CLUSTER, original.job_id, T0)
    copy_id = "22222222-2222-3333-4444-555555555555"
    decision = ElasticDecision(action="full_size", full_nodes=16, nodes=16, data_parallel=16, why="grow_back")
    plan = ResumePlan(job=JobRef(job_id=copy_id, name="llama"), checkpoint=LATER, elastic=decision, require_free_nodes=16)
    # When Grow Back Job runs
    resubmit_job(
        ResubmitJobInput(execution_name="inc-1", task_token="t", request=_request(1), plan=plan),
        orchestrator=orchestrator,  # type: ignore[arg-type]
        ledger=ledger,  # type: ignore[arg-type]
        claim_ttl=timedelta(hours=1),
        now=T0,
    )
    # Then the copy is named with the job it came from and the token that proves it ours, and its
    # successor gets a token of its own
    (sent,) = orchestrator.dispatched
    command = sent.command
    assert isinstance(command, ResubmitJob)
    assert (command.job_id, command.kube, command.copy_token) == (copy_id, LLAMA, shrink_token)
    assert command.recreation_token == ledger.recreation_token(CLUSTER, copy_id, T0) != shrink_token
    assert (command.nodes, command.require_free_nodes) == (16, 16)


# --- the sandbox's training model for EKS copies (not wired into the runner yet) ------------------------
def test_a_shrunk_copy_checkpoints_while_its_pods_run_its_interval_grown_by_full_over_its_size() -> None:
    from sandbox.scenario_jobs import JobSpec as ScenarioJob
    from sandbox.training import KubeTrainingSimulator

    # Given the job trained from t=0, hit at t=120, stopped at t=125 and shrunk to 15 pods once its
    # pods were gone (their 30 s grace period: the copy is made at t=155, its pods run 5 s later)
    clock = Clock(T0)
    fake, orchestrator = _cluster(clock=clock)
    clock.advance(125)
    _shrunk(fake, orchestrator)
    clock.advance(POD_START_SECONDS)
    fake.tick()
    assert fake.runs()[_uid(fake, "llama-r1")] == [[160.0, None]]
    spec = ScenarioJob.model_validate(
        {
            "id": "1001",
            "name": "llama",
            "nodes": "workers:0-15",
            "checkpoint_uri": "s3://ckpt-bucket/llama",
            "checkpoints": [{"step": 3000}],
            "training": {"checkpoint_every_seconds": 300, "steps_per_checkpoint": 100},
        }
    )
    written: list[tuple[int, float, int]] = []
    simulator = KubeTrainingSimulator(
        [spec],
        fake,
        T0,
        hit_at=lambda obj: 120.0 if obj["metadata"]["name"] == "llama" else None,
        write=lambda job, step, created, nodes: written.append((step, (created - T0).total_seconds(), nodes)),
    )
    # When the drill reaches t=800, and again (nothing twice)
    simulator.advance(800.0)
    simulator.advance(800.0)
    # Then only the shrunk copy checkpointed, every 320 s (300 x 16/15) from its start, from the step it resumed at
    assert written == [(3100, 480.0, 15), (3200, 800.0, 15)]
