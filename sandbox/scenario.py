"""The scenario file: the interface every drill, test and benchmark uses (architecture.md).

Nodes are named ``<instance group>:<index>`` ("workers:3"); a job's nodes ``<group>:<a>-<b>``
("workers:0-15"). Times are virtual seconds from the start of the drill.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictBool, ValidationError, model_validator

from hyperpod_recovery_cli.scenario_schema import NODE_REF, SCENARIO_NAME, ExpectSpec, JsonFileError, read_json
from sandbox.scenario_base import MAX_VIRTUAL_SECONDS, NODE_RANGE, Strict
from sandbox.scenario_cluster import BehaviourSpec, ClusterSpec, KubernetesClusterSpec
from sandbox.scenario_jobs import JobSpec
from sandbox.scenario_settings import SettingsSpec

SLURM_JOB_FIELDS = ("batch", "script_bytes", "comment")
# What a refusal lists of a scenario's problems (pydantic may find hundreds in a mangled file).
MAX_PROBLEMS_SHOWN = 5


class ScenarioError(Exception):
    """The scenario file cannot be run; the message says which field and why."""


class FaultSpec(Strict):
    at: float = Field(ge=0, le=MAX_VIRTUAL_SECONDS)
    # hang / slow / pause: what a job that reports progress does (sandbox/progress.py); no event is
    # sent: the detector finds it in the progress its nodes report.
    # hyperpod_hang: HyperPod's own detector says the job hangs (Slurm: its hang agent's event in
    # CloudWatch Logs, through the stack's subscription; EKS: the training operator's HANGING or SLOW
    # fault on a HyperPodPyTorchJob's status). Imported as an observed verdict only.
    # at_risk: a precursor signal for ``node`` (``signal``), delivered ``via`` its real path
    # (sandbox/at_risk.py): an Alertmanager alert or a CloudWatch alarm through SNS to At Risk, or on
    # EKS a node event or condition the real poller reads. Nothing else changes.
    kind: Literal["node_health", "alarm", "job_failed", "drill", "abort", "hang", "slow", "pause", "hyperpod_hang", "at_risk"]
    node: str | None = None
    signal: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,47}$")
    via: Literal["alertmanager", "cloudwatch_alarm", "eks_node_event", "eks_node_condition"] = "alertmanager"
    nodes: list[str] | None = None
    repeat: int = Field(default=0, ge=0, le=1000)  # extra copies of the same event (HyperPod may send several)
    reason: str | None = None
    dry_run: StrictBool | None = None  # drills only: the request's dry_run field
    # Drills only: fields merged into the manual request as sent, to drill validation
    # (e.g. {"node_ids": ["node-7"]} must end as InvalidRecoveryRequest).
    request_overrides: dict[str, Any] | None = None
    # Drills only: the start input exactly as given, instead of a request built from ``node``
    # (a string, a list, a number: what a malformed start-execution sends).
    raw_input: Any = None
    foreign_cluster: StrictBool = False  # the event names another cluster (must be ignored)
    # job_failed (and job drills): the scenario job whose current incarnation fails (after a
    # resubmission, the resubmitted job). ``node``/``nodes`` are then the nodes that went DOWN.
    job: str | None = Field(default=None, pattern=r"^[0-9]{1,10}$")
    job_state: Literal["FAILED", "NODE_FAIL", "TIMEOUT"] = "FAILED"
    exit_code: int | None = Field(default=None, ge=0, le=255)  # default: 1 for FAILED, 0 otherwise
    requeued_by_slurm: StrictBool = False  # Slurm requeued the job itself (the event still arrives)
    # Progress before the failure: the job wrote this (complete) checkpoint first.
    checkpoint_step: int | None = Field(default=None, ge=0)
    # The event's own time stamp is this many seconds before it is delivered at ``at``: a replay,
    # a redrive or a backlog (negative: stamped in the future, a wrong clock). Events only.
    event_age_seconds: float = Field(default=0.0, ge=-MAX_VIRTUAL_SECONDS, le=MAX_VIRTUAL_SECONDS)
    # abort: an operator's StopExecution of the n-th execution the drill started (1 = the first,
    # in start order, nested ones included), wherever it is.
    execution: int | None = Field(default=None, ge=1)
    # hang: how long until it clears by itself (None: never); pause: how long the declared pause
    # lasts (a checkpoint save, by default).
    seconds: float | None = Field(default=None, gt=0, le=MAX_VIRTUAL_SECONDS)
    pause_kind: Literal["checkpoint", "evaluation", "data", "other"] = "checkpoint"
    pause_limit_seconds: int | None = Field(default=None, ge=1, le=86_400)  # what the script declares (default: the library's)
    # hang with a node: that node's rank stopped first; its stack dump is a data loader's (or, with
    # "no_answer", py-spy never answers there; with "secret_in_log", its stack's locals and its last
    # log line hold an AWS secret key and an API token: sandbox/planted.py). reporter_dies: its
    # reporter stops writing too.
    stacks: Literal["data_loader", "no_answer", "secret_in_log"] = "data_loader"
    reporter_dies: StrictBool = False
    factor: float | None = Field(default=None, gt=1, le=10)  # slow: the node's step time over its pace
    # hyperpod_hang: the detector's rule, and on EKS whether the operator found it hanging or slow
    # (HyperPod's Slurm agent only notifies here: a cancel it would make is not modelled).
    hyperpod_rule: str = Field(default="JobHangingDetection", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
    operator_verdict: Literal["hanging", "slow"] = "hanging"

    @property
    def of_progress(self) -> bool:
        return self.kind in ("hang", "slow", "pause")

    @model_validator(mode="after")
    def _has_nodes(self) -> FaultSpec:
        refs = self.node_refs
        if (self.kind == "abort") != (self.execution is not None):
            raise ValueError("'execution' (which execution to stop, 1 = the first started) goes with kind 'abort', and only there")
        if self.kind == "abort":
            if refs or self.job or self.repeat or self.event_age_seconds:
                raise ValueError("an abort names only 'execution'")
            return self
        if (self.kind == "at_risk") != (self.signal is not None):
            raise ValueError("'signal' goes with kind 'at_risk', and an at_risk fault names one")
        if self.kind == "at_risk":
            if not self.node or self.nodes or self.job:
                raise ValueError("an at_risk fault names one 'node' (and its 'signal', 'via')")
            if not NODE_REF.fullmatch(self.node):
                raise ValueError(f"node {self.node!r} must look like 'workers:3'")
            return self
        if self.kind == "hyperpod_hang":
            if not self.job or self.event_age_seconds or self.repeat:
                raise ValueError("a hyperpod_hang fault names 'job' (and 'node', the node whose agent reported it), no repeat or event age")
            return self
        if self.of_progress:
            if not self.job or self.repeat or self.event_age_seconds:
                raise ValueError(f"a {self.kind} fault names 'job' (one reporting progress), and no repeat or event age")
            if (self.kind == "slow") != (self.factor is not None) or (self.kind == "slow" and not self.node):
                raise ValueError("a slow fault names 'node' and 'factor' (and only a slow fault has a factor)")
            if self.kind == "pause" and (self.seconds is None or refs):
                raise ValueError("a pause fault names 'seconds' (how long it lasts) and no node")
            return self
        if self.kind == "job_failed" or (self.kind == "drill" and self.job):
            if not self.job:
                raise ValueError("a job_failed fault needs 'job' (a job id from 'jobs')")
        elif not refs and self.raw_input is None:
            raise ValueError("a fault needs 'node' or 'nodes'")
        elif self.job or self.requeued_by_slurm or self.checkpoint_step is not None or self.exit_code is not None:
            raise ValueError("job, exit_code, requeued_by_slurm and checkpoint_step apply to kind 'job_failed' only")
        for ref in refs:
            if not NODE_REF.fullmatch(ref):
                raise ValueError(f"node {ref!r} must look like 'workers:3'")
        if self.kind == "drill" and self.event_age_seconds:
            raise ValueError("event_age_seconds applies to events, not drills (a drill is stamped when it starts)")
        if self.kind != "drill" and (self.dry_run is not None or self.request_overrides is not None or self.raw_input is not None):
            raise ValueError("dry_run and request_overrides apply to kind 'drill' only (events follow settings.dry_run)")
        return self

    @property
    def node_refs(self) -> list[str]:
        return ([self.node] if self.node else []) + (self.nodes or [])


class Scenario(Strict):
    name: str = Field(pattern=f"^{SCENARIO_NAME.pattern}$")
    description: str = ""
    cluster: ClusterSpec
    jobs: list[JobSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(min_length=1)
    behaviour: BehaviourSpec = Field(default_factory=BehaviourSpec)
    settings: SettingsSpec = Field(default_factory=SettingsSpec)
    # What the drill must show (sandbox/expectations.py); without it, expectations.IMPLICIT.
    expect: ExpectSpec | None = None

    @model_validator(mode="after")
    def _references_exist(self) -> Scenario:
        groups = {g.name: g for g in self.cluster.instance_groups}

        def check(ref: str, where: str) -> None:
            match = NODE_RANGE.fullmatch(ref)
            if not match:
                raise ValueError(f"{where}: {ref!r} is not a node reference")
            group = groups.get(match.group("group"))
            if group is None:
                raise ValueError(f"{where}: no instance group {match.group('group')!r} (have {sorted(groups)})")
            last = int(match.group("end") or match.group("start"))
            if int(match.group("start")) > last or last >= group.count:
                raise ValueError(f"{where}: {ref!r} is outside group {group.name!r} (count {group.count})")

        for i, job in enumerate(self.jobs):
            check(job.nodes, f"jobs.{i}.nodes")
        for i, fault in enumerate(self.faults):
            for ref in fault.node_refs:
                check(ref, f"faults.{i}")
            if fault.job and fault.job not in {j.id for j in self.jobs}:
                raise ValueError(f"faults.{i}.job: no job {fault.job!r} in jobs")
            if fault.of_progress and next(j for j in self.jobs if j.id == fault.job).progress is None:
                raise ValueError(f"faults.{i}: job {fault.job} does not report progress (jobs.*.progress)")
            if fault.kind == "hyperpod_hang" and self.cluster.orchestrator == "eks":
                if next(j for j in self.jobs if j.id == fault.job).kubernetes.kind != "HyperPodPyTorchJob":
                    raise ValueError(
                        f"faults.{i}: on EKS HyperPod's hang verdicts are its training operator's: job {fault.job} is no HyperPodPyTorchJob"
                    )
            elif fault.kind == "hyperpod_hang" and fault.operator_verdict != "hanging":
                raise ValueError(f"faults.{i}: HyperPod's Slurm hang agent reports hangs only (operator_verdict is EKS's)")
        for ref in self.behaviour.never_rejoin:
            check(ref, "behaviour.never_rejoin")
        for ref in self.behaviour.reboot_fails:
            check(ref, "behaviour.reboot_fails")
        for ref in self.behaviour.missing_in_slurm:
            check(ref, "behaviour.missing_in_slurm")
        for ref in self.behaviour.cordoned_before:
            check(ref, "behaviour.cordoned_before")
        if self.behaviour.cordoned_before and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.cordoned_before: EKS only (on Slurm, a drain reason says whose it is)")
        if self.behaviour.kubernetes_errors and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.kubernetes_errors: EKS only")
        if self.cluster.kubernetes != KubernetesClusterSpec() and self.cluster.orchestrator != "eks":
            raise ValueError("cluster.kubernetes: EKS only")
        if self.settings.eks_cluster_name and self.cluster.orchestrator != "eks":
            raise ValueError("settings.eks_cluster_name: EKS only")
        tenants = self.behaviour.kubernetes_impostors + [b.job for b in self.behaviour.kubernetes_bare_pods]
        tenants += self.behaviour.unreadable_failure_times
        if tenants and self.cluster.orchestrator != "eks":
            raise ValueError("behaviour.kubernetes_impostors, kubernetes_bare_pods, unreadable_failure_times: EKS only")
        for job_id in tenants:
            if job_id not in {j.id for j in self.jobs}:
                raise ValueError(f"behaviour: no job {job_id!r} in jobs")
        for i, bare in enumerate(self.behaviour.kubernetes_bare_pods):
            check(bare.node, f"behaviour.kubernetes_bare_pods.{i}.node")
        for i, err in enumerate(self.behaviour.api_errors):
            if err.node:
                check(err.node, f"behaviour.api_errors.{i}.node")
        ids = [j.id for j in self.jobs]
        if len(ids) != len(set(ids)):
            raise ValueError(f"job ids must be unique: {ids}")
        if self.cluster.orchestrator == "eks":
            self._eks_fits()
        else:
            # An EKS job's object in a Slurm scenario would be ignored: nothing on Slurm reads it.
            eks_only = [f"jobs.{i}.kubernetes" for i, job in enumerate(self.jobs) if "kubernetes" in job.model_fields_set]
            if eks_only:
                raise ValueError(f"{', '.join(eks_only)}: EKS only (cluster.orchestrator is {self.cluster.orchestrator!r})")
        return self

    def _eks_fits(self) -> None:
        """What an EKS drill models: worker groups only, jobs named as Kubernetes names them, no Slurm."""
        for group in self.cluster.instance_groups:
            if group.type != "Compute":
                raise ValueError(f"cluster.instance_groups: {group.name!r} is {group.type}; an EKS cluster has worker groups only")
        for i, job in enumerate(self.jobs):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", job.name) or len(job.name) > 55:
                raise ValueError(
                    f"jobs.{i}.name: {job.name!r} is no Kubernetes job name (lowercase DNS-1123, at most 55 to leave room for -r<n>)"
                )
        for i, job in enumerate(self.jobs):
            if job.kubernetes.queue and not self.cluster.kubernetes.kueue:
                raise ValueError(f"jobs.{i}.kubernetes.queue: needs cluster.kubernetes.kueue (Kueue admits from queues)")
        slurm_only = [
            f"faults.{i}" for i, f in enumerate(self.faults) if f.kind == "job_failed" and (f.requeued_by_slurm or f.job_state != "FAILED")
        ]
        slurm_only += ["behaviour.missing_in_slurm"] if self.behaviour.missing_in_slurm else []
        slurm_only += ["behaviour.sbatch_refuses"] if self.behaviour.sbatch_refuses else []
        # A batch script, its size and the job's Slurm comment: nothing on EKS reads them.
        slurm_only += [f"jobs.{i}.{name}" for i, job in enumerate(self.jobs) for name in SLURM_JOB_FIELDS if name in job.model_fields_set]
        if slurm_only:
            raise ValueError(f"{', '.join(slurm_only)}: Slurm only (a Kubernetes job fails as Failed, and nothing requeues it)")


def merge_changes(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, dictionaries key by key (lists are replaced whole)."""
    merged = dict(base)
    for key, value in changes.items():
        merged[key] = merge_changes(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def with_changes(base: Scenario, changes: dict[str, Any]) -> Scenario:
    """``base`` as its file says it (what it set, not every default: a Slurm job's default
    Kubernetes object is no Kubernetes object), with ``changes`` merged in: the fault suite's,
    the tests' and the benchmarks' variations of a drill."""
    return Scenario.model_validate(merge_changes(json.loads(base.model_dump_json(exclude_unset=True)), changes))


def expand_range(ref: str) -> list[tuple[str, int]]:
    match = NODE_RANGE.fullmatch(ref)
    assert match, ref
    start = int(match.group("start"))
    end = int(match.group("end") or start)
    return [(match.group("group"), i) for i in range(start, end + 1)]


def parse_ref(ref: str) -> tuple[str, int]:
    return expand_range(ref)[0]


def load_scenario(path: Path) -> Scenario:
    """The scenario in ``path``; a file that cannot be run is a ScenarioError whose message is one
    printable line naming the file and each field at fault (what `make drill` prints)."""
    try:
        raw = read_json(
            path,
            missing="no such scenario file",
            directory="give a scenario file in it (e.g. events/drills/default.json)",
            unreadable="cannot be read: ",
        )
    except JsonFileError as exc:
        raise ScenarioError(str(exc)) from exc
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()]
        more = len(problems) - MAX_PROBLEMS_SHOWN
        shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        raise ScenarioError(printable_line(f"{path}: invalid scenario: {shown}")) from exc
    except RecursionError as exc:
        raise ScenarioError(f"{path}: nested too deeply to check") from exc


def printable_line(text: str) -> str:
    """Line breaks and other control characters a file's keys or values brought in, escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
