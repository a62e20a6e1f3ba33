"""Start Planned Swap (PlannedSwap): the at-risk verdict's request -> the node and the job on it, or
InvalidRecoveryRequest naming what is wrong (not our cluster, not enforced, a node HyperPod does not list).

Which job runs on the node is the orchestrator's own answer (JobNodeSource: slurmctld's running jobs
through the agent's snapshot; on EKS the live pods' owners), never a progress report. Without a fresh
reading, nothing is known, and nothing is done: the swap says so and leaves the node to the reactive path.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import TypeAdapter

from hyperpod_recovery.domain.hangs.acting import one_kube_job
from hyperpod_recovery.domain.planned_swap.repair import repair_for
from hyperpod_recovery.domain.planned_swap.wait import wait_bound
from hyperpod_recovery.errors import InvalidRecoveryRequest, KubeAccessDenied, KubeObjectGone
from hyperpod_recovery.models.at_risk import PlannedSwapRequest
from hyperpod_recovery.models.kubernetes import JOB_KINDS, KubeJobRef
from hyperpod_recovery.models.planned_swap import SwapTarget
from hyperpod_recovery.models.progress import kube_job_key
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.admission import parse_start_input

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.normalize import GuardedCluster
    from hyperpod_recovery.models.planned_swap import StartPlannedSwapInput
    from hyperpod_recovery.ports import Cluster, JobNodeSource, KubeApi

_START_INPUT: TypeAdapter[PlannedSwapRequest] = TypeAdapter(PlannedSwapRequest)


def start_planned_swap(
    step: StartPlannedSwapInput,
    *,
    guarded: GuardedCluster,
    stack_dry_run: bool,
    cluster: Cluster,
    job_nodes: JobNodeSource | None,
    kube: KubeApi | None = None,
    now: datetime,
) -> SwapTarget:
    request: PlannedSwapRequest = parse_start_input(_START_INPUT, step.request)
    verdict = request.verdict
    if not guarded.owns(verdict.cluster):
        raise InvalidRecoveryRequest(f"verdict.cluster: {verdict.cluster!r} is not the cluster this stack guards ({guarded.name!r})")
    if verdict.mode != "enforce":
        raise InvalidRecoveryRequest(f"verdict.mode: {verdict.mode!r}: only an enforced verdict starts a planned swap")
    request = request.model_copy(
        update={"dry_run": stack_dry_run or request.dry_run, "verdict": verdict.model_copy(update={"cluster": guarded.name})}
    )
    verdict = request.verdict
    listed = cluster.describe_nodes([verdict.instance_id])
    if not listed:
        raise InvalidRecoveryRequest(f"verdict.instance_id: {verdict.instance_id} is not a node of cluster {guarded.name!r}")
    node = listed[0]
    name = node.name_in(guarded.orchestrator) or verdict.node
    if name is None:
        raise InvalidRecoveryRequest(
            f"verdict.instance_id: {verdict.instance_id} has no hostname yet: the orchestrator cannot be asked about it"
        )
    repair, repair_why = repair_for(verdict.signal)
    target = SwapTarget(
        at=now,
        request=request,
        node_id=node.node_id,
        node=name,
        instance_group=node.instance_group[:64],
        repair=repair,
        repair_why=repair_why,
        wait_until=wait_bound(now, verdict.horizon_seconds),
        said="",
    )
    return _with_job(target, guarded.orchestrator, job_nodes, kube, step.execution_name, now)


def _with_job(
    target: SwapTarget,
    orchestrator: Literal["slurm", "eks"],
    job_nodes: JobNodeSource | None,
    kube: KubeApi | None,
    execution_name: str,
    now: datetime,
) -> SwapTarget:
    """The job on the node (the first, in key order, when several share it), or why none is named."""
    reading = job_nodes.running_job_nodes() if job_nodes is not None else None
    if reading is None or not reading.fresh(now):
        return target.model_copy(
            update={
                "jobs_known": False,
                "said": f"which job runs on {target.node} cannot be told now (no fresh reading of the orchestrator)",
            }
        )
    keys = sorted(key for key, nodes in reading.jobs.items() if target.node in nodes)
    if not keys:
        return target.model_copy(update={"said": f"no job runs on {target.node}: the swap is the node's {target.repair}"})
    ids: list[str] = []
    for key in keys:
        job_id, why = _job_id(key, orchestrator, kube)
        if job_id is None:
            return target.model_copy(update={"jobs_known": False, "said": f"the job {key} on {target.node}: {why}"[:1024]})
        ids.append(job_id)
    verdict = target.request.verdict
    job_request = JobRecoveryRequest(
        cluster=verdict.cluster,
        job_id=ids[0],
        source="at_risk",
        reason=f"planned swap: {verdict.summary}"[:2048],
        event_id=verdict.verdict_id,
        detected_at=verdict.observed_at,
        dry_run=target.request.dry_run,
        incident_id=execution_name,
        received_at=now,
    )
    return target.model_copy(
        update={
            "job_id": ids[0],
            "other_jobs": ids[1:16],
            "job_request": job_request,
            "job_nodes": len(reading.jobs[keys[0]]),
            "said": f"job {keys[0]} runs on {target.node}",
        }
    )


def _job_id(key: str, orchestrator: Literal["slurm", "eks"], kube: KubeApi | None) -> tuple[str | None, str]:
    """The id a job's capture takes: a Slurm job's own; an EKS job's uid (its reading names it namespace/name)."""
    if orchestrator == "slurm":
        return key, ""
    parts = kube_job_key(key)
    if parts is None or kube is None:
        return None, "names no Kubernetes job object this stack can read"
    namespace, name = parts
    found: list[tuple[str, str]] = []
    for kind in JOB_KINDS:
        try:
            job = kube.get_job(KubeJobRef.model_validate({"kind": kind, "namespace": namespace, "name": name}))
        except KubeObjectGone:
            continue
        except KubeAccessDenied as exc:
            return None, f"the Kubernetes API refused to read it: {str(exc)[:200]}"
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if uid:
            found.append((kind, uid))
    return one_kube_job(namespace, name, found)
