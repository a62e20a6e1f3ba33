"""Nothing unbounded travels in a workflow's state.

Step Functions fails an execution whose state passes 256 KiB with States.DataLimitExceeded, which
no Catch of States.ALL catches: the execution dies without its record (Reconcile Execution then
records it, but the recovery is lost). So every list and string the state models carry has a
limit, checked here over the whole model tree, and a state built at realistic maxima (a 100-node
storm, 100 jobs with long names and checkpoint prefixes, every reason at its budget) stays far
below 256 KiB. Batch scripts, job specs and submission environments never travel in state: the
agent keeps them on the controller, the ledger keeps the job descriptions.
"""

from __future__ import annotations

import types
import typing
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from hyperpod_recovery.domain.intake.normalize import group_triggers
from hyperpod_recovery.domain.intake.reason_budget import REQUEST_REASON_BUDGET
from hyperpod_recovery.domain.nodes.rejoin import MAX_BOOT_READINGS
from hyperpod_recovery.models.commands import (
    UNHEALTHY_DETAILS_KEPT,
    BootTimesResult,
    CheckpointRef,
    CommandReply,
    CordonResult,
    JobRef,
    NodeBoot,
    ResubmitResult,
    ResumeResult,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT, MAX_NODES_PER_REQUEST
from hyperpod_recovery.models.job_recovery import JobWorkflowState
from hyperpod_recovery.models.kubernetes import MAX_GRACE_SECONDS_CARRIED, KubeJobRef
from hyperpod_recovery.models.manifest import CheckpointLayout
from hyperpod_recovery.models.node_recovery import (
    MAX_ELASTIC_DECISIONS,
    MAX_GROW_BACK_CHECKS,
    MAX_SHRUNK_JOBS_PER_INCIDENT,
    Assessment,
    CheckpointPlan,
    ElasticDecision,
    FirstGate,
    GateFailure,
    GrowBackJob,
    GrowBackState,
    LockResult,
    NodeTarget,
    OutcomeResult,
    RejoinWatch,
    Replacement,
    ResumePlan,
    SafetyDecision,
    StepError,
    WatchedNode,
    WorkflowState,
)
from hyperpod_recovery.models.requests import MAX_REQUEST_BYTES, Trigger
from hyperpod_recovery.steps.find_newest_checkpoint import stop_only
from tests.fakes import T0

STATE_LIMIT = 256 * 1024
# A manifest v1.1 layout with every field at its longest: 8 + 6 digits, and 10 digits between the
# three degrees (their product is at most 10,000,000), every field present.
WIDEST_LAYOUT = CheckpointLayout(world_size=10_000_000, nodes=100_000, tensor=1_000_000, pipeline=10, data=1, reshardable=False)
# An elastic job's decision with every figure present and at its widest.
WIDEST_DECISION = ElasticDecision(
    action="wait",
    full_nodes=10_000,
    nodes=10_000,
    data_parallel=80_000,
    full_data_parallel=80_000,
    lost_nodes=10_000,
    spare_nodes=10_000,
    expected_wait_seconds=86_400,
    wait_source="parameter",
    grow_back_seconds=86_400,
    grow_back_source="parameter",
    min_nodes=10_000,
    multiple=10_000,
    why="opt_in_unreadable",
)


def _limit(metadata: list[Any]) -> int | None:
    for item in metadata:
        if isinstance(item, FieldInfo):
            found = _limit(list(item.metadata))
            if found is not None:
                return found
        value = getattr(item, "max_length", None)
        if value is not None:
            return int(value)
    return None


def unbounded_fields(annotation: Any, metadata: list[Any], path: str, seen: set[type]) -> list[str]:
    """Every list, dict or string under ``annotation`` that has no maximum length."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return unbounded_fields(args[0], [*metadata, *args[1:]], path, seen)
    if origin in (typing.Union, types.UnionType):
        return [p for a in args if a is not type(None) for p in unbounded_fields(a, metadata, path, seen)]
    if origin in (list, set, tuple, frozenset, dict):
        own = [] if _limit(metadata) is not None else [path]
        return own + [p for a in args for p in unbounded_fields(a, [], f"{path}[]", seen)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return []
        seen.add(annotation)
        return [
            p
            for name, field in annotation.model_fields.items()
            for p in unbounded_fields(field.annotation, list(field.metadata), f"{path}.{name}", seen)
        ]
    if annotation is str:
        patterned = any(getattr(m, "pattern", None) for m in metadata) or any(
            isinstance(m, FieldInfo) and any(getattr(x, "pattern", None) for x in m.metadata) for m in metadata
        )
        return [] if _limit(metadata) is not None or patterned else [path]
    return []


@pytest.mark.parametrize("model", [WorkflowState, JobWorkflowState], ids=lambda m: m.__name__)
def test_every_list_and_string_a_workflow_carries_has_a_limit(model: type[BaseModel]) -> None:
    assert unbounded_fields(model, [], model.__name__, set()) == []


def _node(n: int) -> tuple[str, str]:
    return f"i-{n:017x}", f"ip-10-{n // 250}-{n % 250}-{n % 200}"


def largest_realistic_state() -> WorkflowState:
    """A 100-node storm under 100 jobs, every free text at its budget: the state Record Outcome gets."""
    nodes = [_node(n) for n in range(MAX_NODES_PER_REQUEST)]
    # Every node reported by a health event and an alarm, each with its own long reason.
    triggers = [
        Trigger(source=source, node_ids=[node_id], reason=(f"{source} {node_id} " + "x" * 1024)[:1024], detected_at=T0, event_id="e" * 36)
        for node_id, _ in nodes
        for source in ("hyperpod_node_health", "cloudwatch_alarm")
    ]
    (request,) = group_triggers(triggers, "c" * 63, MAX_NODES_PER_REQUEST)
    request = request.model_copy(update={"incident_id": "hpr-100n-0123456789-20260314T0900", "received_at": T0})
    now = T0 + timedelta(hours=1)
    reply: dict[str, Any] = {"command_id": "x" * 80, "type": "drain_nodes", "requested_at": T0, "started_at": T0, "completed_at": now}
    targets = [NodeTarget(node_id=i, instance_group="g" * 63, slurm_node=h, status="Running") for i, h in nodes]
    safety = SafetyDecision(at=T0, reason="r" * 600, reserved=[i for i, _ in nodes], limit=100)
    # Every node rebooted first, replaced at the reboot deadline, and found by its group under a new
    # name (the longest a watched node gets: a node back from its reboot carries a boot time instead
    # of the replacement's id and name). Logical ids are UUIDs, as HyperPod shows them.
    watch = RejoinWatch(
        at=now,
        started_at=T0,
        deadline=now,
        reboot_deadline=now,
        checks=40,
        nodes=[
            WatchedNode(
                node_id=i,
                slurm_node=h,
                instance_group="g" * 63,
                logical_id=f"{n:08x}-f035-4f28-9b80-b956b92ae21e",
                initiation="already_in_progress",
                status="DeepHealthCheckInProgress",
                replacement_node_id=f"i-{n + 1000:017x}",
                matched_by="instance_group",
                replacement_slurm_node=f"ip-10-{n // 250}-{n % 250 + 128}-{n % 200}",
                rejoined=True,
                escalated_to_replace_at=now,
                # and its first replacement failed the health gate and was not replaced again
                gate_failure=GateFailure(instance=f"i-{n + 2000:017x}", error="E" * 40),
            )
            for n, (i, h) in enumerate(nodes)
        ],
        done=True,
        next_wait_seconds=0,
        boot_readings=MAX_BOOT_READINGS,
        first_gate=FirstGate(
            requested_at=now,
            completed_at=now,
            replaced_at=now,
            said={h: "d" * 1000 for _, h in nodes[:UNHEALTHY_DETAILS_KEPT]},
            refused="r" * 1000,
        ),
    )
    long_uri = "s3://" + "b" * 63 + "/" + "p" * 180

    def planned(j: int) -> ResumePlan:
        return ResumePlan(
            job=JobRef(job_id=str(10_000_000 + j), name="n" * 64),
            checkpoint=CheckpointRef(uri=f"{long_uri}/step-000012000/", step=12000, framework="torch-dcp", layout=WIDEST_LAYOUT),
            rejected=["r" * 200],
            # the elastic jobs (at most MAX_ELASTIC_DECISIONS per incident), every figure at its widest
            elastic=WIDEST_DECISION if j < MAX_ELASTIC_DECISIONS else None,
        )

    plan = CheckpointPlan(at=now, jobs_found=MAX_JOBS_PER_INCIDENT, resumable=[planned(j) for j in range(MAX_JOBS_PER_INCIDENT)])
    # The grow-back of the most jobs that run shrunk, each with its shrink and its grow-back's plan and answer
    # (Grow Back Job's ResultSelector keeps its times, dry_run and result)
    grown = CommandReply[ResubmitResult](
        requested_at=now,
        completed_at=now,
        result=ResubmitResult(old_job_id="1" * 10, new_job_id="2" * 10, new_job_state="s" * 32, nodes=10_000, cancelled_old=True),
    )
    grow_back = GrowBackState(
        at=now,
        jobs=[
            GrowBackJob(
                old_job_id=str(10_000_000 + j),
                copy_id=str(20_000_000 + j),
                copy_label="c" * 200,
                kind="k" * 63,
                name="n" * 64,
                nodes=9_999,
                full_nodes=10_000,
                from_step=12000,
                status="stays",
                shrink=WIDEST_DECISION,
                baseline_step=12000,
                first_at=now,
                checkpoint=planned(j).checkpoint,
                reply=grown,
                failure="E" * 256,
                reason="r" * 300,
            )
            for j in range(MAX_SHRUNK_JOBS_PER_INCIDENT)
        ],
        action="grow",
        next=planned(0),
        wait_seconds=86_400,
        checks=MAX_GROW_BACK_CHECKS,
        answer=grown,
        failure=StepError(Error="E" * 256, Cause="c" * 1000),
    )
    answers = [
        # Resubmit Jobs keeps times, dry_run and the result of each answer (its ResultSelector)
        CommandReply[ResubmitResult](
            requested_at=now, completed_at=now, result=ResubmitResult(old_job_id=str(10_000_000 + j), new_job_id=str(20_000_000 + j))
        )
        for j in range(MAX_JOBS_PER_INCIDENT)
    ]
    return WorkflowState(
        request=request,
        lock=LockResult(at=T0, locked=[i for i, _ in nodes], proceed=True),
        assessment=Assessment(at=T0, orchestrator="slurm", node_recovery="Automatic", targets=targets, proceed=True, safety=safety),
        # Cordon Nodes' answer once Forget Job Details left only the jobs' number in it
        cordon=CommandReply[CordonResult].model_validate(
            {**reply, "type": "cordon_nodes", "result": {"drained": [h for _, h in nodes], "count": 100, "omitted": 7}}
        ),
        replacement=Replacement(at=T0, calls=4, proceed=True, watch=watch),
        # the second health gate failed every node, each with the longest answer
        resume=CommandReply[ResumeResult].model_validate(
            {**reply, "type": "resume_nodes", "result": {"unhealthy": [{"node": h, "detail": "u" * 1000} for _, h in nodes]}}
        ),
        checkpoints=plan,
        resubmissions=answers,
        grow_back=grow_back,
    )


def test_the_largest_realistic_node_recovery_state_stays_far_below_the_limit() -> None:
    state = largest_realistic_state()
    outcome = OutcomeResult(at=T0, incident_id="x" * 80, outcome="escalated", error="E" * 64, cause="c" * 4000, summary="s" * 8000)
    size = len(state.model_dump_json()) + len(outcome.model_dump_json())
    print(f"largest NodeRecovery state and outcome: {size} bytes")
    # 0.75 until each of the 100 planned checkpoints carried manifest v1.1's layout (about 108 bytes
    # each at its widest): 203,648 bytes then, 78% of the limit. 0.85 since shrink-and-continue (eight
    # elastic decisions, four shrunk jobs' grow-backs): 216,506 bytes then, 83%.
    assert size < STATE_LIMIT * 0.85, f"{size} bytes"
    # And with the longest Cause a Catch can put in it (Grow Back Job's, 32,768 characters, until the
    # next check folds it into one line), the state is still below Step Functions' hard limit
    failed = state.model_copy(
        update={"grow_back": state.grow_back.model_copy(update={"failure": StepError(Error="E" * 256, Cause="c" * 32_768)})}
    )
    assert len(failed.model_dump_json()) + len(outcome.model_dump_json()) < STATE_LIMIT


def test_the_largest_state_while_waiting_for_rejoin_with_a_boot_reading_in_flight_stays_far_below_the_limit() -> None:
    # Given the state between Read Boot Times and the Check Rejoin that consumes its answer: nothing
    # resumed, planned or resubmitted yet, and a reading of every node (Escalate Incident gets this
    # state if that Check Rejoin fails)
    state = largest_realistic_state()
    assert state.replacement is not None
    names = [n.slurm_node for n in state.replacement.watch.nodes]
    reading = CommandReply[BootTimesResult](
        command_id="x" * 256,
        type="boot_times",
        requested_at=T0,
        started_at=T0,
        completed_at=T0,
        result=BootTimesResult(nodes=[NodeBoot(name=name, boot_time=T0, state="s" * 64) for name in names]),
    )
    watch = state.replacement.watch.model_copy(update={"boot_check": names, "boot_reading": reading, "done": False})
    waiting = state.model_copy(
        update={
            "replacement": state.replacement.model_copy(update={"watch": watch}),
            "resume": None,
            "checkpoints": None,
            "resubmissions": [],
        }
    )
    outcome = OutcomeResult(at=T0, incident_id="x" * 80, outcome="escalated", error="E" * 64, cause="c" * 4000, summary="s" * 8000)
    size = len(waiting.model_dump_json()) + len(outcome.model_dump_json())
    assert size < STATE_LIMIT * 0.75, f"{size} bytes"


def test_an_eks_job_stopped_at_once_takes_no_more_of_the_state_than_two_jobs_resubmitted() -> None:
    # Given the widest EKS job's plan (its longest names, checkpoint and figures) and the widest answers a
    # re-creation and a stop only get (Resubmit Jobs keeps their times, dry_run and result)
    uid, copy_uid = "00000000-aaaa-4bbb-8ccc-000000000000", "11111111-aaaa-4bbb-8ccc-000000000000"
    kube = KubeJobRef(kind="HyperPodPyTorchJob", namespace="n" * 63, name="j" * 63)
    checkpoint = CheckpointRef(uri="s3://" + "b" * 63 + "/" + "p" * 180 + "/step-000012000/", step=12000, framework="torch-dcp")
    widest = ResumePlan(
        job=JobRef(job_id=uid, name="n" * 64, kube=kube),
        checkpoint=checkpoint.model_copy(update={"layout": WIDEST_LAYOUT}),
        rejected=["r" * 200],
    )

    def answered(result: ResubmitResult) -> int:
        return len(CommandReply[ResubmitResult](requested_at=T0, completed_at=T0, result=result).model_dump_json())

    made = answered(ResubmitResult(old_job_id=uid, new_job_id=copy_uid, new_job_name="n" * 128, new_job_state="s" * 32, cancelled_old=True))
    stopped = answered(ResubmitResult(old_job_id=uid, stop_only=True, declined="d" * 1000))
    # When it is planned after the rejoin with a stop at once (two of the incident's entries, two answers)
    later = widest.model_copy(update={"stop_grace_seconds": MAX_GRACE_SECONDS_CARRIED})
    twin = stop_only(later)
    # Then the two take no more than two jobs resubmitted would: a plan of stops stays within the bound
    # the widest plan of resubmissions is held to (the entries are shared: CheckpointPlan counts both)
    assert len(later.model_dump_json()) + len(twin.model_dump_json()) + made + stopped <= 2 * (len(widest.model_dump_json()) + made)


def test_a_storm_request_fits_its_budget_whatever_its_events_say() -> None:
    request = largest_realistic_state().request
    assert request is not None
    assert len(request.model_dump_json()) <= MAX_REQUEST_BYTES
    assert sum(len(t.reason) for t in request.triggers) <= REQUEST_REASON_BUDGET + 400 * 40


def test_the_agents_largest_check_answer_fits_what_step_functions_and_lambda_accept() -> None:
    # Given a check answer at its limits: 50 running jobs, each name and checkpoint prefix at its longest
    from hyperpod_recovery.models.commands import MAX_CHECKPOINT_URI, MAX_JOBS_CHECKED, AgentCheckResult, RunningJob
    from hyperpod_recovery.models.preflight import CheckDeploymentInput

    assert unbounded_fields(AgentCheckResult, [], "AgentCheckResult", set()) == []
    uri = ("s3://" + "b" * 63 + "/" + "p" * 300)[:MAX_CHECKPOINT_URI]
    jobs = [RunningJob(job_id=str(10_000_000 + j), name="n" * 256, checkpoint_uri=uri) for j in range(MAX_JOBS_CHECKED)]
    answer = CommandReply[AgentCheckResult](
        command_id="x" * 256,
        type="check",
        requested_at=T0,
        completed_at=T0,
        result=AgentCheckResult(
            agent_version="v" * 64, slurm_reachable=True, slurm_detail="d" * 512, running_jobs=jobs, running_jobs_omitted=9
        ),
    )
    # Then SendTaskSuccess's output (256 KiB, the execution's output) takes it with room to spare
    assert len(answer.model_dump_json()) < STATE_LIMIT * 0.25
    # And so does the Check Deployment request built from it (a synchronous Invoke takes 6 MB)
    assert len(CheckDeploymentInput(jobs=jobs).model_dump_json()) < STATE_LIMIT * 0.25
