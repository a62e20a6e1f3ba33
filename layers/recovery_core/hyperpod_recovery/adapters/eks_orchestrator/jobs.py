"""The job commands on EKS: the jobs on nodes, a job's spec, the running jobs a check names, and the
re-creation of a job from its checkpoint with never two copies running (the rules are
domain/jobs/eks_jobs.py's; the stop is adapters/eks_stop.py's)."""

from __future__ import annotations

import copy
from typing import Any

from hyperpod_recovery.adapters.eks_orchestrator.lookups import Orchestration, installed_jobs, job_pod_nodes, job_pods
from hyperpod_recovery.adapters.eks_stop import stop_only
from hyperpod_recovery.domain.jobs.eks_jobs import (
    RECREATION_TOKEN_LABEL,
    STOPPED_FOR_ANNOTATION,
    UnsizableJob,
    carries_token,
    finished,
    is_pod_of,
    job_condition,
    job_spec_of,
    jobs_of_pods,
    live_pods_of,
    owning_job,
    recreated_job,
    recreated_name,
    sized_spec,
    suspended,
)
from hyperpod_recovery.domain.nodes.eks_nodes import NodeView
from hyperpod_recovery.errors import (
    InvalidCommand,
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeAlreadyExists,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
)
from hyperpod_recovery.models.commands import (
    MAX_JOB_NODES,
    CaptureJobSpec,
    JobsOnNodes,
    JobsOnNodesResult,
    JobSpec,
    JobSpecResult,
    ResubmitJob,
    ResubmitResult,
    RunningJob,
    carried,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.kubernetes import (
    COMPUTE_TYPE_LABEL,
    DNS1123_LABEL_MAX,
    HEALTHY_STATUS,
    INSTANCE_GROUP_LABEL,
    JOB_KINDS,
    KubeJobRef,
)


def _declined(copy_id: str, why: str, *, ended: bool = False) -> ResubmitResult:
    return ResubmitResult(old_job_id=copy_id, new_job_id=None, declined=why, copy_ended=ended)


def _check_size(job: dict[str, Any], kind: str, nodes: int) -> None:
    """The job can be made at ``nodes`` (checked before anything is stopped)."""
    try:
        sized_spec(copy.deepcopy(job.get("spec") or {}), kind, nodes)
    except UnsizableJob as exc:
        raise InvalidCommand(f"{kind} {(job.get('metadata') or {}).get('name')}: {exc}: nothing stopped or created") from exc


def _spare(view: NodeView, groups: set[str | None]) -> bool:
    """A node a pod could be placed on now (the job's pods are placed one a node: ASSUMPTION)."""
    blocking = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in view.taints)
    return (
        view.ready
        and not view.unschedulable
        and not blocking
        and view.marked_by is None
        and view.health_status == HEALTHY_STATUS
        and view.labels.get(INSTANCE_GROUP_LABEL) in groups
    )


class JobCommands(Orchestration):
    def jobs_on_nodes(self, command: JobsOnNodes) -> JobsOnNodesResult:
        return self.jobs_on(command.nodes)

    def jobs_on(self, nodes: list[str]) -> JobsOnNodesResult:
        found = [NodeView.of(node).name for node in map(self.find_node, nodes) if node is not None]
        return self._jobs_on_found(found)

    def _jobs_on_found(self, node_names: list[str]) -> JobsOnNodesResult:
        """The running jobs with a pod on the nodes. A job that already ended (Failed, Succeeded) is
        not a node recovery's: a failed one is JobRecovery's (Find Failed Jobs), with its budget
        and crash-loop rules; a pod of an earlier object of the same name is that object's."""
        pods = [pod for name in node_names for pod in self.kube.list_pods_on_node(name)]
        jobs: list[JobSpec] = []
        seen: set[str] = set()
        omitted = 0
        for ref in jobs_of_pods(pods):
            try:
                job = self.kube.get_job(ref)
            except KubeObjectGone:
                continue  # deleted since its pod was listed: nothing to restart
            if finished(job) or not any(owning_job(p) == ref and is_pod_of(p, job) for p in pods):
                continue
            spec = job_spec_of(job, ref, grace=True)
            if spec is None or spec.job_id in seen:
                continue
            seen.add(spec.job_id)
            if spec.elastic is not None or spec.elastic_problem is not None:
                spec = self._counted(spec, job, pods)  # (``pods``: those on the incident's nodes)
            if len(jobs) < MAX_JOBS_PER_INCIDENT:
                jobs.append(spec)
            else:
                omitted += 1
        return JobsOnNodesResult(jobs=jobs, omitted=omitted)

    def _counted(self, spec: JobSpec, job: dict[str, Any], pods: list[dict[str, Any]]) -> JobSpec:
        """An elastic job's lost nodes (the incident's nodes its pods are on) and the spare nodes that
        could take it at once (spare_nodes): counted only for a job that opted in (they decide nothing
        for a rigid one), after the cordon, so never the failed nodes."""
        lost = sorted(
            {str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName") and owning_job(p) and is_pod_of(p, job)}
        )
        return spec.model_copy(update={"lost_nodes": min(len(lost), MAX_JOB_NODES), "spare_nodes": self._spare_for(lost)})

    def _spare_for(self, job_nodes: list[str], excluded: set[str] | frozenset[str] = frozenset()) -> int:
        """The nodes that could take a pod of a job on ``job_nodes`` at once: HyperPod nodes of the same
        instance group (a pod's GPUs are its group's kind), Ready, schedulable (not cordoned, HyperPod's
        health label Schedulable, no NoSchedule/NoExecute taint) and holding no training job's pod. One
        list of nodes and one of live pods per count (cached for the command)."""
        if self._spare_view is None:
            nodes = self.kube.list_nodes(f"{COMPUTE_TYPE_LABEL}=hyperpod")
            live = self.kube.list_live_pods()
            busy = {str(p["spec"]["nodeName"]) for p in live if (p.get("spec") or {}).get("nodeName") and owning_job(p)}
            self._spare_view = (nodes, busy)
        nodes, busy = self._spare_view
        views = [NodeView.of(n) for n in nodes]
        groups = {v.labels.get(INSTANCE_GROUP_LABEL) for v in views if v.name in job_nodes}
        free = [v for v in views if v.name not in job_nodes and v.name not in busy and v.name not in excluded and _spare(v, groups)]
        return min(len(free), MAX_JOB_NODES)

    def resubmit(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        """Re-create the job from ``command.checkpoint`` (domain/jobs/eks_jobs.py recreated_job), with never
        two copies running: first the name is checked free (or found ours), then the old job is
        stopped the way the controller that owns it honours and the stop verified by reading back,
        and only then the new one created. A retry finds its own work at each step: the old job
        already stopped, and our re-creation by the token the ledger recorded before the create
        (never by an annotation anyone may write). Where the old copy cannot be stopped for certain,
        nothing is created (JobSpecUnavailable, with why)."""
        if command.require_free_nodes is not None:
            return self.grow_back(command, incident_id)
        ref, token = command.kube, command.recreation_token
        if ref is None or token is None:
            raise InvalidCommand("resubmit_job on EKS names the job object to re-create (kube) and its re-creation token: missing")
        try:
            old = self.kube.get_job(ref)
        except KubeObjectGone:
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} no longer exists: there is nothing to re-create it from"
            ) from None
        uid = str((old.get("metadata") or {}).get("uid") or "")
        if uid != command.job_id:
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} is another job now (uid {uid}, not {command.job_id}): never re-created in its stead"
            )
        new = self._our_recreation(ref, token)
        if new is None and command.nodes is not None:
            _check_size(old, ref.kind, command.nodes)
        name = str(new["metadata"]["name"]) if new is not None else self._free_name(ref, old, command.nodes)
        if command.stop_only:
            return stop_only(self._stopper, ref, old, made=new)
        try:
            stopped = self._stopper.stop(ref, old)
        except JobSpecUnavailable as exc:
            if new is None:
                raise
            # (stopped before, since restarted by someone: our copy exists too, and both may run)
            raise JobSpecUnavailable(
                f"{exc} — and its copy {ref.namespace}/{name} (uid {new['metadata']['uid']}) exists: both may run"
            ) from exc
        if new is None:
            new = self._create(ref, old, name, command, incident_id, token, stopped=stopped)
        return ResubmitResult(
            old_job_id=uid,
            new_job_id=str(new["metadata"]["uid"]),
            cancelled_old=stopped,
            new_job_name=f"{ref.namespace}/{new['metadata']['name']}",
            new_job_state=job_condition(new),
            nodes=command.nodes,
        )

    def _create(
        self, ref: KubeJobRef, old: dict[str, Any], name: str, command: ResubmitJob, incident_id: str, token: str, *, stopped: bool
    ) -> dict[str, Any]:
        """The re-creation of ``old`` (stopped) under ``name``, or ours made by a first try whose answer was lost."""
        body = recreated_job(
            old,
            ref.kind,
            name=name,
            resume_from=command.checkpoint.uri,
            step=command.checkpoint.step,
            incident=incident_id,
            token=token,
            nodes=command.nodes,
            data_parallel=command.data_parallel,
        )
        try:
            new = self.kube.create_job(ref.kind, ref.namespace, body)
        except KubeAlreadyExists:
            # Ours if a first try of this request was created and its answer lost; else someone
            # took the name since we looked: nothing of ours runs, the old job stays stopped.
            ours = self._our_recreation(ref, token)
            if ours is None:
                raise JobSpecUnavailable(
                    f"{ref.kind} {ref.namespace}/{name} was created by someone else while {ref.name} was being stopped: "
                    f"nothing created; {ref.name} stays stopped"
                ) from None
            return ours
        except (KubeAccessDenied, KubeRequestRejected, KubeUnavailable, KubeThrottled) as exc:
            if not stopped:
                raise
            # (the same error, retried or escalated under its own name, saying what is true now)
            raise type(exc)(
                f"{exc} — {ref.kind} {ref.namespace}/{ref.name} was stopped for its re-creation and stays stopped: "
                f"nothing of it runs until {ref.namespace}/{name} is created from {command.checkpoint.uri}"
            ) from exc
        return new

    def grow_back(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        """A shrunk copy back to full size (``require_free_nodes``): only a copy we made (it carries the
        token our ledger recorded for its re-creation, ``copy_token``; ``kube`` names the job it was
        re-created from), and only when that many nodes could take the full-size one at once (its own
        and the spare ones); else nothing is touched and the answer says why (``declined``). The copy is
        marked (STOPPED_FOR_ANNOTATION) before it is stopped: a copy that no longer runs is followed by
        its successor only when this incident's grow-back stopped it; one that ended on its own, or was
        stopped or deleted by someone else, is never started again."""
        ref, token, proof, copy_id = command.kube, command.recreation_token, command.copy_token, command.job_id
        if ref is None or token is None or proof is None:
            raise InvalidCommand(
                "a grow-back on EKS names the job its shrunk copy was re-created from (kube), the copy's re-creation token "
                "(copy_token) and the token of its successor: missing"
            )
        made = self._our_recreation(ref, token)
        if made is not None:  # (a retry: the full-size copy was made, its answer lost)
            return ResubmitResult(
                old_job_id=copy_id,
                new_job_id=str(made["metadata"]["uid"]),
                new_job_name=f"{ref.namespace}/{made['metadata']['name']}",
                new_job_state=job_condition(made),
                nodes=command.nodes,
            )
        shrunk = self._our_recreation(ref, proof)
        if shrunk is None or shrunk["metadata"].get("uid") != copy_id:
            found = self.find_job(copy_id)
            if found is not None:
                raise InvalidCommand(
                    f"{found[0].kind} {found[0].namespace}/{found[0].name} (uid {copy_id}) is no re-creation of ours (it lacks "
                    "the token our ledger recorded): a grow-back never stops it"
                )
            return _declined(copy_id, f"{ref.kind} {ref.namespace} uid {copy_id} no longer exists: not started again", ended=True)
        copy_ref = KubeJobRef(kind=ref.kind, namespace=ref.namespace, name=str(shrunk["metadata"]["name"]))
        if command.nodes is not None:
            _check_size(shrunk, ref.kind, command.nodes)
        stopped_here = ((shrunk["metadata"].get("annotations") or {}).get(STOPPED_FOR_ANNOTATION)) == incident_id
        if not stopped_here:
            declined = self._not_grown(copy_ref, shrunk, command)
            if declined is not None:
                return declined
        name = self._free_name(copy_ref, shrunk, command.nodes)  # (named for its full size: before anything is stopped)
        if not stopped_here:
            shrunk = self._mark_stopped_for(copy_ref, shrunk, incident_id)  # (before the stop: what a retry trusts)
        stopped = self._stopper.stop(copy_ref, shrunk)
        new = self._create(copy_ref, shrunk, name, command, incident_id, token, stopped=stopped)
        return ResubmitResult(
            old_job_id=copy_id,
            new_job_id=str(new["metadata"]["uid"]),
            cancelled_old=stopped or stopped_here,
            new_job_name=f"{ref.namespace}/{new['metadata']['name']}",
            new_job_state=job_condition(new),
            nodes=command.nodes,
        )

    def _not_grown(self, copy_ref: KubeJobRef, shrunk: dict[str, Any], command: ResubmitJob) -> ResubmitResult | None:
        """Why a grow-back leaves the shrunk copy as it is (it no longer runs, and this incident did not
        stop it; or too few nodes could take its successor at once), or None: grow it back."""
        copy_id, where = command.job_id, f"{copy_ref.kind} {copy_ref.namespace}/{copy_ref.name}"
        live = live_pods_of(job_pods(self.kube, copy_ref, shrunk), shrunk)
        if finished(shrunk) or suspended(shrunk) or not live:
            state = "suspended" if suspended(shrunk) and not finished(shrunk) else job_condition(shrunk)
            return _declined(copy_id, f"{where} is {state}, and no grow-back of this incident stopped it: not started again", ended=True)
        excluded = set(command.exclude_nodes)
        own = sorted({str(p["spec"]["nodeName"]) for p in live if (p.get("spec") or {}).get("nodeName")} - excluded)
        needed = command.require_free_nodes or 0
        able = len(own) + self._spare_for(own, excluded)
        if able < needed:
            return _declined(
                copy_id, f"only {able} node(s) could take it at once, {needed} needed: {where} keeps running on {len(own)} node(s)"
            )
        return None

    def _mark_stopped_for(self, copy_ref: KubeJobRef, shrunk: dict[str, Any], incident_id: str) -> dict[str, Any]:
        """The copy marked as stopped by this incident's grow-back (STOPPED_FOR_ANNOTATION), if it is still this very copy."""
        add = (
            {"op": "add", "path": f"/metadata/annotations/{STOPPED_FOR_ANNOTATION.replace('/', '~1')}", "value": incident_id}
            if shrunk["metadata"].get("annotations")
            else {"op": "add", "path": "/metadata/annotations", "value": {STOPPED_FOR_ANNOTATION: incident_id}}
        )
        return self.kube.patch_job(copy_ref, [{"op": "test", "path": "/metadata/uid", "value": shrunk["metadata"]["uid"]}, add])

    def _our_recreation(self, ref: KubeJobRef, token: str) -> dict[str, Any] | None:
        """The job carrying our re-creation token, whatever its name (a retry's, or a first try's whose answer was lost)."""
        found = [j for j in self.kube.list_jobs_in(ref.kind, ref.namespace, f"{RECREATION_TOKEN_LABEL}={token}") if carries_token(j, token)]
        return found[0] if found else None

    def _free_name(self, ref: KubeJobRef, old: dict[str, Any], nodes: int | None = None) -> str:
        """The re-creation's name, for the size it is made at (``nodes``; else the old job's), checked
        free before anything is stopped: a name someone else holds (a job that happens to have it, or
        one made to be taken for ours) is never ours."""
        name = recreated_name(old, ref.kind, nodes)
        if name is None:
            size = f" at {nodes} node(s)" if nodes is not None else ""
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name}: no name leaves room{size} for the names its operator derives from it "
                f"(<name>-<replica type>-<index>, at most {DNS1123_LABEL_MAX} characters): nothing stopped, nothing re-created"
            )
        try:
            self.kube.get_job(KubeJobRef(kind=ref.kind, namespace=ref.namespace, name=name))
        except KubeObjectGone:
            return name
        raise JobSpecUnavailable(
            f"{ref.kind} {ref.namespace}/{name} exists and is not our re-creation of {ref.name} (it lacks the token our "
            f"ledger recorded): nothing created, {ref.name} left as it is"
        )

    def capture_job_spec(self, command: CaptureJobSpec) -> JobSpecResult:
        """The job by its uid, as the workflow carries it, with the nodes its pods ran on (None: gone)."""
        found = self.find_job(command.job_id, command.kube)
        if found is None:
            return JobSpecResult(job=None)
        ref, job = found
        spec = job_spec_of(job, ref)
        if spec is None:
            return JobSpecResult(job=None)
        # (as the Slurm agent answers: a job on more nodes than a workflow carries the names of, none of them)
        return JobSpecResult(
            job=carried(spec.model_copy(update={"nodes": job_pod_nodes(self.kube, ref, job)[:MAX_JOB_NODES]}), command.asked)
        )

    def running_jobs(self, limit: int) -> tuple[list[RunningJob], int]:
        """The jobs of every kind whose checkpoints a recovery would read (not Succeeded or Failed),
        by uid, with the name their checkpoints are written under; the first ``limit`` and how many more."""
        running: list[RunningJob] = []
        for kind in JOB_KINDS:
            for job in installed_jobs(self.kube, kind):
                metadata = job.get("metadata") or {}
                if finished(job):
                    continue
                spec = job_spec_of(
                    job, KubeJobRef.model_validate({"kind": kind, "namespace": metadata.get("namespace"), "name": metadata.get("name")})
                )
                if spec is not None:
                    running.append(RunningJob(job_id=spec.job_id, name=spec.name, checkpoint_uri=spec.checkpoint_uri))
        return running[:limit], max(len(running) - limit, 0)
