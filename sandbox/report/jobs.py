"""Per scenario job, what its users measure: when a fault hit it, how long its lineage was down, where
its newest copy runs."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from hyperpod_recovery.domain.jobs.eks_jobs import RESUBMITTED_FROM_ANNOTATION
from hyperpod_recovery.domain.record.fates import job_label
from hyperpod_recovery.models.manifest import RESUME_STEP_ENV
from hyperpod_recovery.models.records import IncidentRecord, JobFate
from sandbox.job_downtime import CopyRun, down_intervals, node_time_lost, total
from sandbox.real_slurm import RealController
from sandbox.report.source import DrillSource
from sandbox.report.time_split import as_millis, seconds_since
from sandbox.scenario import expand_range


def scenario_jobs(runner: DrillSource, records: list[IncidentRecord], end: float) -> list[dict[str, Any]]:
    """Per scenario job, what its users measure (virtual seconds): the first fault that hit it, the
    intervals its lineage was down (sandbox/job_downtime.py), its newest copy and where that runs.
    ``downtime_seconds`` is their sum once a copy runs again at the drill's end; None when it was
    never hit or is not running again (left pending, never resubmitted, restarted by Slurm itself)."""
    fates = [fate for record in records for fate in record.job_fates]
    if runner.eks is not None:
        return [_kubernetes_job(runner, spec, fates, end) for spec in runner.scenario.jobs]
    if isinstance(runner.slurm, RealController):
        return []
    return [job for spec in runner.scenario.jobs if (job := _slurm_job(runner, spec, fates, end)) is not None]


def _lineage_fate(fates: list[JobFate], ids: set[str], current: str | None) -> JobFate | None:
    """What the records say became of the job's newest copy: an incident about that copy itself,
    else the one that made it, else any record of the lineage."""
    about = [f for f in fates if f.job == current]
    made = [f for f in fates if f.job in ids and f.copy_id == current]
    found = about or made or [f for f in fates if f.job in ids]
    return found[-1] if found else None


def _ms_faults(runner: DrillSource, spec: Any, nodes_at: Any) -> list[tuple[int, set[str] | None]]:
    """Each fault that may hit the job: (moment, the node names it hit then; None: the job's own failure)."""
    found: list[tuple[int, set[str] | None]] = []
    for fault in runner.scenario.faults:
        if fault.job == spec.id:
            found.append((as_millis(fault.at), None))
        elif fault.kind not in ("abort", "at_risk") and fault.node_refs:
            found.append((as_millis(fault.at), {nodes_at(ref, fault.at) for ref in fault.node_refs}))
    return found


def _slurm_job(runner: DrillSource, spec: Any, fates: list[JobFate], end: float) -> dict[str, Any] | None:
    slurm = runner.slurm.slurm
    original = slurm.jobs.get(spec.id)
    if original is None:
        return None

    def root(job: Any) -> str:
        while job.resubmission_of is not None:
            job = slurm.jobs[job.resubmission_of]
        return str(job.job_id)

    lineage = [job for job in slurm.jobs.values() if root(job) == spec.id]
    faults = _ms_faults(runner, spec, lambda ref, at: runner.double.current(ref, t=at).hostname.split(".", 1)[0])
    end_ms = as_millis(end)

    def hits(job: Any) -> list[int]:
        return [at for at, names in faults if names is None or names & set(job.nodes)]

    runs: list[CopyRun] = []
    runs_of: dict[str, list[CopyRun]] = {}
    for job in lineage:
        stop = as_millis((job.ended_at - runner.epoch).total_seconds()) if job.ended_at is not None else end_ms
        starts = [0] if job is original else []
        if job.started_at is not None:
            starts.append(as_millis((job.started_at - runner.epoch).total_seconds()))
        runs_of[job.job_id] = [CopyRun(start, stop, hits(job)) for start in starts]
        runs += runs_of[job.job_id]
    first_hits = [at for job in lineage for at in hits(job)]
    current = slurm.current_incarnation(spec.id)
    copy = current if current is not original else None
    running = copy is not None and current.state == "RUNNING"
    down = down_intervals(runs, first_hits, end_ms)
    fate = _lineage_fate(fates, {j.job_id for j in lineage}, current.job_id)
    hit_nodes = {name for _, names in faults if names for name in names}
    # A replacement that came back under a new hostname is the hit node repaired, not a spare.
    hit_nodes |= {
        r.new_hostname.split(".", 1)[0] for r in runner.double.replacements if r.new_hostname and r.hostname.split(".", 1)[0] in hit_nodes
    }
    full = len(original.nodes)
    sized = [(run, len(job.nodes) or job.node_count or full) for job in lineage for run in runs_of[job.job_id]]
    return {
        "job": spec.id,
        "label": _label(fates, spec.id) or f"job {spec.id} ({spec.name})",
        "fault_at": min(first_hits) / 1000 if first_hits else None,
        "nodes": full,  # the job's own size, which each copy's is read against
        # Every copy made, in order: its size and the step it resumed from (a shrink, a grow-back).
        "copies": [
            {
                "job": job.job_id,
                "nodes": len(job.nodes) or job.node_count,
                "from_step": _step_number(job.environment.get(RESUME_STEP_ENV)),
                "started_at": seconds_since(job.started_at, runner.epoch),
                "ended_at": seconds_since(job.ended_at, runner.epoch),
            }
            for job in sorted(lineage, key=lambda j: int(j.job_id))
            if job is not original
        ],
        "node_seconds_lost": node_time_lost(sized, first_hits, end_ms, full) / 1000 if first_hits else None,
        "running_as": copy.job_id if copy is not None else None,
        "copy": f"job {copy.job_id}" if copy is not None else None,
        "state": current.state,
        "running_again_at": seconds_since(current.started_at, runner.epoch) if running else None,
        "pending_since": seconds_since(current.submitted_at, runner.epoch) if copy is not None and current.state == "PENDING" else None,
        "on": _placement(original.nodes, current.nodes, hit_nodes) if running else None,
        "checkpoint_step": _copy_step(fates, {j.job_id for j in lineage}, copy.job_id if copy is not None else None),
        "fate": fate.fate if fate is not None else None,
        "reason": fate.reason if fate is not None else "",
        "down": [[s / 1000, e / 1000] for s, e in down],
        # (a copy a later fault hit, and nothing replaced, is RUNNING in Slurm but not training)
        "downtime_seconds": total(down) / 1000 if first_hits and running and not _down_at(down, end_ms) else None,
    }


def _down_at(down: list[tuple[int, int]], end: int) -> bool:
    """No copy is training at the drill's end."""
    return bool(down) and down[-1][1] >= end


def _placement(before: list[str], now: list[str], hit: set[str]) -> str:
    """Where the running copy is, against the nodes the job ran on and those the faults hit."""
    if set(now) & hit:
        return "its repaired nodes"
    return "spare nodes" if set(now) - set(before) else "its own nodes"


def _label(fates: list[JobFate], job_id: str) -> str | None:
    """The job as its orchestrator shows it, from the first record that named it."""
    return next((job_label(f) for f in fates if f.job == job_id), None)


def _copy_step(fates: list[JobFate], lineage: set[str], copy_id: str | None) -> int | None:
    """The checkpoint step the newest copy resumed from (in a dry run: would have), from the records."""
    steps = [
        f.checkpoint_step
        for f in fates
        if f.job in lineage and f.checkpoint_step is not None and (f.copy_id == copy_id if copy_id else f.fate == "would_resubmit")
    ]
    return steps[-1] if steps else None


def _pod_phases(pods: list[dict[str, Any]]) -> str:
    """``2 Pending``: the copy's pods by phase (no pod: the operator has not made them)."""
    phases = Counter(str(p["status"].get("phase")) for p in pods)
    return ", ".join(f"{count} {phase}" for phase, count in sorted(phases.items())) or "no pod"


def kube_copy_running_at(runner: DrillSource, spec: Any) -> float | None:
    """When a re-creation of the scenario's job object first ran (all its pods Running: FakeKube.runs())."""
    assert runner.eks is not None
    kube = runner.eks.kube
    namespace = spec.kubernetes.namespace
    original = kube.jobs.get((spec.kubernetes.kind, namespace, spec.name))
    if original is None:
        return None
    trained = kube.runs()
    started = [
        spans[0][0]
        for (_, ns, _), obj in kube.jobs.items()
        if ns == namespace
        and _annotation(obj, RESUBMITTED_FROM_ANNOTATION) == original["metadata"]["uid"]
        and (spans := trained.get(obj["metadata"]["uid"]))
        and spans[0][0] is not None
    ]
    return min(started) if started else None  # type: ignore[type-var]


def _kubernetes_job(runner: DrillSource, spec: Any, fates: list[JobFate], end: float) -> dict[str, Any]:
    """An EKS job by the names kubectl shows; its copies are the objects re-created from it (by the
    annotation that names the uid they came from). A copy runs when every pod it owns is Running."""
    assert runner.eks is not None
    kube = runner.eks.kube
    kind, namespace = spec.kubernetes.kind, spec.kubernetes.namespace
    objects = {obj["metadata"]["uid"]: (k, n, obj) for (k, ns, n), obj in kube.jobs.items() if ns == namespace}
    original = next((uid for uid, (k, n, _) in objects.items() if (k, n) == (kind, spec.name)), None)
    lineage = [original] if original else []
    while lineage:
        newer = [uid for uid, (_, _, obj) in objects.items() if _annotation(obj, RESUBMITTED_FROM_ANNOTATION) == lineage[-1]]
        if not newer:
            break
        lineage.append(newer[-1])
    pods: dict[str, list[dict[str, Any]]] = {}
    for (ns, _), pod in kube.pods.items():
        owner = next((o["uid"] for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
        if ns == namespace and owner is not None:
            pods.setdefault(owner, []).append(pod)

    def runs_now(uid: str) -> bool:
        owned = pods.get(uid, [])
        return bool(owned) and all(p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"] for p in owned)

    def nodes_of(uid: str) -> set[str]:
        return {str(p["spec"].get("nodeName")) for p in pods.get(uid, []) if p["spec"].get("nodeName")}

    eks = runner.eks
    assert eks is not None
    faults = _ms_faults(runner, spec, eks.node_of)
    seeded = {eks.node_of(f"{g}:{i}") for g, i in expand_range(spec.nodes)}
    hits_original = [at for at, names in faults if names is None or names & seeded]
    # (the drill's end, or later: when the pods bound last started, a moment after the pipeline's last step)
    end_ms = as_millis(max(end, eks.settled_at or 0.0))
    runs = [CopyRun(0, end_ms, hits_original)] if original else []
    created: dict[str, float | None] = {}
    trained = kube.runs()  # (when each copy's pods all ran: a copy stopped since ran until then)
    for uid in lineage[1:]:
        stamp = objects[uid][2]["metadata"].get("creationTimestamp")
        created[uid] = seconds_since(datetime.fromisoformat(stamp), runner.epoch) if stamp else None
        ran_on = nodes_of(uid) | set(kube.run_nodes.get(uid, []))  # (a stopped copy's pods are gone: where it trained)
        hit = [at for at, names in faults if names is None or names & ran_on]
        for start, stop in trained.get(uid, []):
            runs.append(CopyRun(as_millis(start or 0), end_ms if stop is None else as_millis(stop), hit))
    copy = lineage[-1] if len(lineage) > 1 else None
    running = copy is not None and runs_now(copy)
    down = down_intervals(runs, hits_original, end_ms)
    fate = _lineage_fate(fates, set(lineage), lineage[-1] if lineage else None)
    copy_kind, copy_name = (objects[copy][0], objects[copy][1]) if copy is not None else (None, None)
    state = _kube_state(objects[lineage[-1]][2]) if lineage else "absent"
    return {
        "job": spec.id,
        "label": f"{kind} {namespace}/{spec.name}",
        "uid": original,
        "fault_at": min(hits_original) / 1000 if hits_original else None,
        "nodes": _kube_size(objects[original][2]) if original else None,
        # Every copy made, in order: its size (its pods, one a node), the step it resumed from, when it ran.
        "copies": [
            {
                "job": uid,
                "name": objects[uid][1],
                "nodes": _kube_size(objects[uid][2]),
                "from_step": _step_number(_kube_env(objects[uid][2]).get(RESUME_STEP_ENV)),
                "created_at": created[uid],
                "started_at": trained[uid][0][0] if trained.get(uid) else None,
                "ended_at": trained[uid][-1][1] if trained.get(uid) else None,
            }
            for uid in lineage[1:]
        ],
        "running_as": copy,
        "copy": f"{copy_kind} {namespace}/{copy_name}" if copy is not None else None,
        "state": state,
        "running_again_at": trained[copy][-1][0] if running and copy is not None and trained.get(copy) else None,
        "pending_since": created[copy] if copy is not None and not running else None,
        "on": None,
        "checkpoint_step": _copy_step(fates, set(lineage), copy),
        "pods": _pod_phases(pods.get(copy, [])) if copy is not None else None,
        "fate": fate.fate if fate is not None else None,
        "reason": fate.reason if fate is not None else "",
        "down": [[s / 1000, e / 1000] for s, e in down],
        # (running: its pods all run at the drill's end, even one started at that very moment: a grow-back
        # made once the copy it replaces is gone, the incident's last step)
        "downtime_seconds": total(down) / 1000 if hits_original and running else None,
    }


def _kube_size(obj: dict[str, Any]) -> int:
    """A job object's pods, every replica type's (Kubeflow's default: 1 where none is given)."""
    spec = obj.get("spec") or {}
    replicas = list((spec.get("pytorchReplicaSpecs") or {}).values()) or list(spec.get("replicaSpecs") or [])
    return sum(1 if r.get("replicas") is None else int(r["replicas"]) for r in replicas)


def _kube_env(obj: dict[str, Any]) -> dict[str, str]:
    """The environment the job object gives its first replica's first container."""
    spec = obj.get("spec") or {}
    replicas = list((spec.get("pytorchReplicaSpecs") or {}).values()) or list(spec.get("replicaSpecs") or [])
    containers = ((replicas[0].get("template") or {}).get("spec") or {}).get("containers") or [{}] if replicas else [{}]
    return {str(e.get("name")): str(e.get("value")) for e in containers[0].get("env") or [] if isinstance(e, dict)}


def _annotation(obj: dict[str, Any], key: str) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(key)


def _kube_state(obj: dict[str, Any]) -> str:
    """The job object's newest true condition (Created, Running, Suspended, Failed ...)."""
    held = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    return str(held[-1].get("type")) if held else "no condition yet"


def _step_number(text: str | None) -> int | None:
    return int(text) if text and text.isascii() and text.isdigit() else None
