"""In-memory fakes with the same interface as the adapters (hyperpod_recovery/ports.py).

tests/contract/test_adapter_contracts.py, test_ledger_contract.py and test_cluster_contract.py run the
same expectations against each fake and its real adapter on moto (or the sandbox's HyperPod double),
so a fake cannot drift from reality without a test failing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.nodes.replace import chunked
from hyperpod_recovery.errors import CheckpointWriteConflict
from hyperpod_recovery.models.cluster import BatchOutcome, ClusterInfo, ClusterNode, InstanceGroupInfo
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply
from hyperpod_recovery.models.events import ExecutionStatusDetail
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.node_recovery import ReplaceFailure
from hyperpod_recovery.models.progress import ProgressReport
from hyperpod_recovery.models.progress_memory import JobMemory, Sighting, epoch_ms
from hyperpod_recovery.ports import ClosedExecution, Listing, ResubmissionSeen, ResubmissionsRead, StartOutcome
from hyperpod_recovery.runtime import Dependencies
from tests.fakes_ledger import FakeLedger

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
# template.yaml's defaults: MaxEventAgeSeconds 3600, MaxClockSkewSeconds 300.
LIMITS = EventAgeLimits(max_age_seconds=3600, max_skew_seconds=300)
CLUSTER = "llm-train"
CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/a1b2c3d4e5f6"


def settings_env(**overrides: str) -> dict[str, str]:
    env = {
        "CLUSTER_NAME": CLUSTER,
        "CLUSTER_ARN": CLUSTER_ARN,
        "LEDGER_TABLE": "ledger",
        "COMMAND_QUEUE_URL": "https://sqs.us-west-2.amazonaws.com/123456789012/commands",
        "NOTIFICATION_TOPIC_ARN": "arn:aws:sns:us-west-2:123456789012:notifications",
        "STATE_MACHINE_ARN": "arn:aws:states:us-west-2:123456789012:stateMachine:hpr-node-recovery",
        "JOB_STATE_MACHINE_ARN": "arn:aws:states:us-west-2:123456789012:stateMachine:hpr-job-recovery",
        "INTAKE_DLQ_URL": "https://sqs.us-west-2.amazonaws.com/123456789012/intake-dlq",
        "DRY_RUN": "false",
        "RESUME_POLICY": "immediate",
        "REJOIN_POLL_SECONDS": "30",
        "REJOIN_MAX_POLL_SECONDS": "60",
        "REJOIN_DEADLINE_SECONDS": "2700",
        "EXPECTED_REPLACEMENT_SECONDS": "600",
        "REPLACEMENT_HEALTH_CHECK": "",
        "REPLACEMENT_HEALTH_CHECK_SECONDS": "120",
        "REBOOT_DEADLINE_SECONDS": "900",
        "EPISODE_WINDOW_SECONDS": "600",
        "MAX_EVENT_AGE_SECONDS": "3600",
        "MAX_CLOCK_SKEW_SECONDS": "300",
        "LOCK_TTL_SECONDS": "21600",
        "ESCALATION_HOLD_SECONDS": "86400",
        "JOB_RESTART_BUDGET": "3",
        "JOB_RESTART_WINDOW_SECONDS": "86400",
        "JOB_RESTART_BACKOFF_SECONDS": "60",
        "JOB_RESTART_MAX_BACKOFF_SECONDS": "900",
        "CRASH_LOOP_REPEATS": "2",
        "JOB_FAILURES_PER_1000_NODE_DAYS": "0.57",
        "MAX_NODES_IN_RECOVERY_PERCENT": "20",
        "MAX_NODES_IN_RECOVERY": "64",
        "BREAKER_MAX_RECOVERIES": "20",
        "BREAKER_MAX_FAILURES": "3",
        "BREAKER_WINDOW_SECONDS": "3600",
        "REPEAT_OFFENDER_MAX_RECOVERIES": "2",
        "REPEAT_OFFENDER_WINDOW_SECONDS": "604800",
        "CONTROLLER_GROUPS": "",
        "LOGIN_GROUPS": "",
    }
    env.update(overrides)
    return env


def make_settings(**overrides: str) -> Settings:
    return Settings.from_environ(settings_env(**overrides))


def node_id(n: int) -> str:
    return f"i-{n:017x}"


def compute_node(n: int, group: str = "workers", status: str = "Running") -> ClusterNode:
    return ClusterNode(
        node_id=node_id(n),
        instance_group=group,
        status=status,
        private_dns_hostname=f"ip-10-1-0-{n}.us-west-2.compute.internal",
        launch_time=T0 - timedelta(days=1),
    )


class FakeCluster:
    """Cluster port. ``replace_results`` maps a node id to a per-node ErrorCode (absent: success)."""

    def __init__(self, nodes: list[ClusterNode], groups: dict[str, str | None] | None = None, orchestrator: str = "slurm") -> None:
        self.nodes = nodes
        self.rebooted: list[str] = []
        groups = groups if groups is not None else {"controller": "Controller", "login": "Login", "workers": "Compute"}
        self.info = ClusterInfo(
            name=CLUSTER,
            arn=CLUSTER_ARN,
            status="InService",
            orchestrator=orchestrator,  # type: ignore[arg-type]
            node_recovery="None",
            groups={name: InstanceGroupInfo(name=name, node_type=kind) for name, kind in groups.items()},  # type: ignore[arg-type]
        )
        self.replace_results: dict[str, str] = {}
        self.replace_calls: list[list[str]] = []

    def describe(self) -> ClusterInfo:
        return self.info

    def list_nodes(self, instance_group: str | None = None) -> list[ClusterNode]:
        return [n for n in self.nodes if instance_group is None or n.instance_group == instance_group]

    def nodes_since(self, since: datetime, node_ids: Sequence[str]) -> list[ClusterNode]:
        # (a node made without a launch time counts as new: its test is about something else)
        return [n for n in self.nodes if n.launch_time is None or n.launch_time > since or n.node_id in node_ids]

    def describe_nodes(self, node_ids: Sequence[str]) -> list[ClusterNode]:
        return [n for n in self.nodes if n.node_id in node_ids]

    def reboot_nodes(self, node_ids: list[str]) -> BatchOutcome:
        self.rebooted += node_ids
        return BatchOutcome(successful=list(node_ids), calls=1)

    def replace_nodes(self, node_ids: list[str]) -> BatchOutcome:
        outcome = BatchOutcome()
        for chunk in chunked(node_ids):
            self.replace_calls.append(chunk)
            outcome.calls += 1
            for nid in chunk:
                code = self.replace_results.get(nid) or ("InstanceIdNotFound" if nid not in {n.node_id for n in self.nodes} else None)
                if code:
                    outcome.failed.append(ReplaceFailure(node_id=nid, error_code=code, message="fake"))
                else:
                    outcome.successful.append(nid)
        return outcome


@dataclass
class FakeOrchestrator:
    dispatched: list[CommandEnvelope] = field(default_factory=list)
    answered: list[tuple[str, CommandReply[Any]]] = field(default_factory=list)

    def dispatch(self, envelope: CommandEnvelope) -> None:
        self.dispatched.append(envelope)

    def answer(self, task_token: str, reply: CommandReply[Any]) -> None:
        self.answered.append((task_token, reply))


@dataclass
class FakeNotifier:
    published: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
        self.published.append((subject, body, attributes))


class FakeCheckpointStore:
    """S3 for checkpoints in memory, with ListObjectsV2's semantics: keys in UTF-8 order, a delimiter rolls
    keys up into common prefixes, MaxKeys counts both, StartAfter and continuation tokens, conditional
    puts. ``requests`` counts calls by S3 operation, like the benchmark does on moto."""

    def __init__(self, page_limit: int = 1000) -> None:
        self.page_limit = page_limit  # S3 may return fewer than MaxKeys; small pages exercise paging cheaply
        self.objects: dict[str, dict[str, bytes]] = {}
        self.keys_read: list[str] = []
        self.etags: dict[tuple[str, str], str] = {}
        self.requests: Counter[str] = Counter()
        self._versions = 0

    def put_object(self, bucket: str, key: str, body: bytes) -> None:
        """Test setup: an unconditional write that is not counted."""
        self.objects.setdefault(bucket, {})[key] = body
        self._versions += 1
        self.etags[(bucket, key)] = f'"v{self._versions}"'

    def delete_object(self, bucket: str, key: str) -> None:
        self.objects.get(bucket, {}).pop(key, None)

    def get(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        found = self.get_with_etag(bucket, key, max_bytes)
        return None if found is None else found[0]

    def get_with_etag(self, bucket: str, key: str, max_bytes: int) -> tuple[bytes, str] | None:
        self.requests["GetObject"] += 1
        self.keys_read.append(f"s3://{bucket}/{key}")
        body = self.objects.get(bucket, {}).get(key)
        return None if body is None else (body[:max_bytes], self.etags[(bucket, key)])

    def size(self, bucket: str, key: str) -> int | None:
        self.requests["HeadObject"] += 1
        self.keys_read.append(f"s3://{bucket}/{key}")
        body = self.objects.get(bucket, {}).get(key)
        return None if body is None else len(body)

    def list(
        self,
        bucket: str,
        prefix: str,
        *,
        delimiter: str | None = None,
        start_after: str | None = None,
        token: str | None = None,
        max_keys: int = 1000,
    ) -> Listing:
        self.requests["ListObjectsV2"] += 1
        after = token if token is not None else start_after
        entries: list[tuple[str, int | None]] = []  # (name, size) or (common prefix, None), in key order
        for key in sorted(k for k in self.objects.get(bucket, {}) if k.startswith(prefix) and (after is None or k > after)):
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                folder = prefix + rest.split(delimiter, 1)[0] + delimiter
                if not entries or entries[-1][0] != folder:
                    entries.append((folder, None))
            else:
                entries.append((key, len(self.objects[bucket][key])))
        limit = min(max_keys, self.page_limit)
        page, truncated = entries[:limit], len(entries) > limit
        # S3's token is opaque; resuming after the last entry (a whole common prefix) is its meaning.
        next_token = (page[-1][0] + "\U0010ffff" if page[-1][1] is None else page[-1][0]) if truncated else None
        return Listing(
            objects=[(name, size) for name, size in page if size is not None],
            folders=[name for name, size in page if size is None],
            truncated=truncated,
            next_token=next_token,
        )

    def put(self, bucket: str, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> None:
        self.requests["PutObject"] += 1
        exists = key in self.objects.get(bucket, {})
        if (if_none_match and exists) or (if_match is not None and (not exists or self.etags[(bucket, key)] != if_match)):
            raise CheckpointWriteConflict(f"s3://{bucket}/{key}: PreconditionFailed")
        self.put_object(bucket, key, body)

    def sha256(self, bucket: str, key: str) -> str | None:
        self.requests["GetObject"] += 1
        body = self.objects.get(bucket, {}).get(key)
        return None if body is None else f"sha256:{hashlib.sha256(body).hexdigest()}"


@dataclass
class FakeWorkflows:
    started: dict[str, str] = field(default_factory=dict)
    fail_with: Exception | None = None

    workflow_of: dict[str, str] = field(default_factory=dict)
    woken: list[tuple[str, str]] = field(default_factory=list)
    gone_tokens: set[str] = field(default_factory=set)  # tasks that no longer wait (timed out, execution ended)
    ended: set[str] = field(default_factory=set)  # executions a test ended (no longer listed as running)

    def start(self, name: str, payload: str, workflow: Literal["node", "job"] = "node") -> StartOutcome:
        if self.fail_with is not None:
            raise self.fail_with
        if name in self.started:  # (the fake's executions never end: the same input finds it running)
            return "running" if self.started[name] == payload else "already_exists"
        self.started[name] = payload
        self.workflow_of[name] = workflow
        return "started"

    def running(self, workflow: Literal["node", "job"]) -> list[str]:
        if self.fail_with is not None:
            raise self.fail_with
        return [name for name in reversed(self.started) if self.workflow_of[name] == workflow and name not in self.ended]

    def wake(self, task_token: str, output: str) -> bool:
        if task_token in self.gone_tokens:
            return False
        self.woken.append((task_token, output))
        return True


@dataclass
class FakeJobNodes:
    """The orchestrator's membership (ports.JobNodeSource): ``snapshot`` as given, or None (missing)."""

    snapshot: JobNodes | None = None
    reads: int = 0

    @classmethod
    def of(cls, taken_at: datetime, source: Literal["slurm", "eks"] = "slurm", **jobs: list[str]) -> FakeJobNodes:
        return cls(JobNodes(source=source, taken_at=taken_at, jobs={job: sorted(nodes) for job, nodes in jobs.items()}))

    def running_job_nodes(self) -> JobNodes | None:
        self.reads += 1
        return self.snapshot


@dataclass
class FakeProgressMemory:
    """What Detect Hung Jobs remembers between ticks (ports.ProgressMemory), as the ledger items would."""

    items: dict[tuple[str, str], str] = field(default_factory=dict)
    fail_with: Exception | None = None

    def recall(self, cluster: str, jobs: Sequence[str]) -> dict[str, JobMemory]:
        if self.fail_with is not None:
            raise self.fail_with
        return {job: JobMemory.model_validate_json(self.items[(cluster, job)]) for job in jobs if (cluster, job) in self.items}

    def remember(self, cluster: str, memories: Sequence[JobMemory]) -> int:
        for memory in memories:
            self.items[(cluster, memory.job)] = memory.model_dump_json()
        return 0


@dataclass
class FakeDeadLetters:
    sent: list[tuple[str, str, str]] = field(default_factory=list)

    def send(self, body: str, reason: str, message_id: str) -> None:
        self.sent.append((body, reason, message_id))


@dataclass
class FakeExecutionHistory:
    """States entered by execution ARN; an ARN missing reads as unreadable (None), like a
    GetExecutionHistory that failed."""

    entered: dict[str, list[tuple[str, datetime]]] = field(default_factory=dict)
    resubmitted: dict[str, list[ResubmissionSeen]] = field(default_factory=dict)
    asked: dict[str, set[str]] = field(default_factory=dict)  # resubmissions asked for, no answer seen
    ended: dict[str, ExecutionStatusDetail] = field(default_factory=dict)  # closed executions, by ARN (the sweep's listing)
    stopped: dict[str, set[str]] = field(default_factory=dict)  # EKS jobs a stop only stopped (ResubmissionsRead.stopped)

    def states_entered(self, execution_arn: str) -> list[tuple[str, datetime]] | None:
        return self.entered.get(execution_arn)

    def resubmissions(self, execution_arn: str) -> ResubmissionsRead:
        """What tests give in ``resubmitted`` (asked: those jobs, plus ``asked``); incomplete for an
        execution whose history is unreadable (not in ``entered``)."""
        seen = self.resubmitted.get(execution_arn, [])
        asked = {s.reply.result.old_job_id for s in seen} | self.asked.get(execution_arn, set())
        stopped = frozenset(self.stopped.get(execution_arn, set()))
        return ResubmissionsRead(seen=seen, asked=asked, complete=execution_arn in self.entered, stopped=stopped)

    def closed_since(self, since: datetime, started_after: datetime) -> list[ClosedExecution]:
        """The ends tests put in ``ended`` (their detail is what describe_end answers), as ListExecutions lists them."""
        return [
            ClosedExecution(
                execution_arn=d.executionArn,
                state_machine_arn=d.stateMachineArn,
                name=d.name,
                status=d.status,
                started_at=datetime.fromtimestamp((d.startDate or 0) / 1000, UTC),
                stopped_at=datetime.fromtimestamp((d.stopDate or 0) / 1000, UTC),
            )
            for d in self.ended.values()
            if d.stopDate is not None and d.stopDate >= since.timestamp() * 1000
        ]

    def describe_end(self, execution_arn: str) -> ExecutionStatusDetail | None:
        return self.ended.get(execution_arn)


def fake_dependencies(cluster: FakeCluster | None = None, **settings_overrides: str) -> Dependencies:
    return Dependencies(
        settings=make_settings(**settings_overrides),
        cluster=cluster or FakeCluster([compute_node(n) for n in range(1, 5)]),
        ledger=FakeLedger(),
        orchestrator=FakeOrchestrator(),
        notifier=FakeNotifier(),
        checkpoints=FakeCheckpointStore(),
        workflows=FakeWorkflows(),
        dead_letters=FakeDeadLetters(),
        history=FakeExecutionHistory(),
    )


def watched(job: str, reports: list[ProgressReport]) -> JobMemory:
    """The memory of a detector that saw these rows written, on a clock that agrees with the writers'
    (what most detector tests are not about: tests/unit/test_hang_trust.py is)."""
    nodes = {
        r.node: Sighting(
            s=r.step,
            st=epoch_ms(r.step_at),
            hb=epoch_ms(r.heartbeat_at),
            pe=epoch_ms(r.pause_ended_at),
            pl=r.pause.limit_seconds if r.pause else 0,
            mv=int(max(r.step_at, r.pause_ended_at or r.step_at).timestamp()),
            hd=int(r.heartbeat_at.timestamp()),
        )
        for r in reports
    }
    return JobMemory(job=job, seen_at=max(r.heartbeat_at for r in reports), nodes=nodes)
