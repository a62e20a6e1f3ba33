"""The preflight's verdicts (cli/hyperpod_recovery_cli/preflight_checks.py), the agent's check command and the Check Deployment
step, without AWS. The end-to-end runs against the sandbox's stack are tests/integration/test_preflight.py."""

from __future__ import annotations

import fnmatch
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode, InstanceGroupInfo
from hyperpod_recovery.models.commands import COMMAND_TYPES, AgentCheckResult, CheckAgent, CommandEnvelope, RunningJob
from hyperpod_recovery.models.preflight import CheckDeploymentInput, CheckpointProbe, SdkReport
from hyperpod_recovery.steps.check_deployment import probe_checkpoints
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.slurm import SlurmUnreachable
from hyperpod_recovery_cli.preflight_checks import (
    REPLACEMENT_API_RELEASED,
    STACK_COMMANDS,
    AgentAnswer,
    Finding,
    bucket_matches,
    check_agent,
    check_checkpoints,
    check_cluster,
    check_dry_run,
    check_replacement_patch,
    check_sdk,
    check_topic,
    health_event,
    key_lets_service_publish,
    worst,
)
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.conftest import ROOT
from tests.fakes import T0

ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"


def _cluster(**changes: Any) -> ClusterInfo:
    base = ClusterInfo(
        name="llm-train",
        arn=ARN,
        status="InService",
        orchestrator="slurm",
        node_recovery="None",
        groups={"controller": InstanceGroupInfo(name="controller", node_type="Controller")},
    )
    return base.model_copy(update=changes)


# --- cluster -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("configured", "changes", "status", "says"),
    [
        (ARN, {}, "pass", "the ARN the stack was given"),
        ("arn:aws:sagemaker:us-west-2:111122223333:cluster/llm-train", {}, "fail", "name form"),
        ("arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzzzzzzzzzz", {}, "fail", "another cluster"),
        ("arn:aws:sagemaker:eu-west-1:111122223333:cluster/llm-train", {}, "fail", "another cluster"),  # name, other region
        (ARN, {"orchestrator": "eks"}, "fail", "deployed with Orchestrator=Slurm"),
        (ARN, {"status": "Updating"}, "warn", "not InService"),
    ],
)
def test_the_stack_must_guard_this_slurm_cluster_by_its_id_form_arn(
    configured: str, changes: dict[str, Any], status: str, says: str
) -> None:
    finding = check_cluster(configured, _cluster(**changes))
    assert finding.status == status and says in finding.detail
    if status == "fail" and not changes:  # the wrong ARN: the fix names the right one
        assert f"ClusterArn={ARN}" in finding.fix


# --- the replacement patch -----------------------------------------------------------------------
def _node(launched: datetime, updated: datetime | None = None, node_id: str = "i-0") -> ClusterNode:
    return ClusterNode(node_id=node_id, instance_group="workers", status="Running", launch_time=launched, software_updated_at=updated)


moments = st.datetimes(min_value=datetime(2023, 1, 1), max_value=datetime(2027, 1, 1), timezones=st.just(UTC))


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(st.tuples(moments, st.none() | moments), min_size=1, max_size=20))
def test_a_cluster_is_unpatched_exactly_when_a_node_runs_software_older_than_the_api(
    nodes: list[tuple[datetime, datetime | None]],
) -> None:
    # Given nodes launched (and maybe updated since) at any moments
    finding = check_replacement_patch("llm-train", [_node(launched, updated, f"i-{i}") for i, (launched, updated) in enumerate(nodes)])
    # Then it fails exactly when some node's current software predates the API's release
    stale = any((updated or launched) < REPLACEMENT_API_RELEASED for launched, updated in nodes)
    assert finding.status == ("fail" if stale else "pass")


def test_naive_times_are_read_as_utc_and_no_times_is_a_skip() -> None:
    day_before = (REPLACEMENT_API_RELEASED - timedelta(days=1)).replace(tzinfo=None)
    assert check_replacement_patch("c", [_node(day_before)]).status == "fail"
    assert check_replacement_patch("c", [ClusterNode(node_id="i-0", instance_group="w", status="Running")]).status == "skip"


# --- the topic's key -----------------------------------------------------------------------------
def _policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


CW = {"Service": "cloudwatch.amazonaws.com"}


ACCOUNT = "111122223333"
OWN_ALARMS = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:*"


def _cw(action: Any = "kms:*", **condition: Any) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Principal": CW, "Action": action, "Resource": "*"}
    return statement | ({"Condition": condition} if condition else {})


@pytest.mark.parametrize(
    ("statements", "grant"),
    [
        ([_cw(["kms:Decrypt", "kms:GenerateDataKey"])], "yes"),
        ([_cw(["kms:Decrypt", "kms:GenerateDataKey*"])], "yes"),
        ([{"Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "cloudwatch.amazonaws.com"]}, "Action": "kms:*"}], "yes"),
        ([_cw("kms:Decrypt")], "no"),  # no data key
        ([{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "kms:*"}], "no"),  # another service
        ([{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*"}], "no"),  # the account only
        ([_cw(), {"Effect": "Deny", "Principal": "*", "Action": "kms:Decrypt"}], "no"),
        # The confused-deputy guards AWS recommends hold for this account's alarms: evaluated, granted
        ([_cw(StringEquals={"aws:SourceAccount": ACCOUNT})], "yes"),
        ([_cw(ArnLike={"aws:SourceArn": OWN_ALARMS})], "yes"),
        (
            [_cw(StringEquals={"aws:SourceAccount": ACCOUNT}, ArnLike={"aws:SourceArn": [OWN_ALARMS, "arn:aws:cloudwatch:*:9:alarm:*"]})],
            "yes",
        ),
        # ... and refused when they name another account or service
        ([_cw(StringEquals={"aws:SourceAccount": "999999999999"})], "no"),
        ([_cw(ArnLike={"aws:SourceArn": f"arn:aws:events:us-east-1:{ACCOUNT}:rule/*"})], "no"),
        # Other conditions are not evaluated: neither a pass nor a failure
        ([_cw(StringEquals={"kms:EncryptionContext:aws:sns:topicArn": "arn:t"})], "conditional"),
        (
            [_cw(), {"Effect": "Deny", "Principal": "*", "Action": "kms:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}],
            "conditional",
        ),
        ({"Effect": "Allow", "Principal": CW, "Action": "kms:*"}, "yes"),  # a lone statement, not a list
    ],
)
def test_a_key_policy_lets_cloudwatch_publish_only_with_both_grants_and_no_deny(statements: Any, grant: str) -> None:
    policy = json.dumps({"Statement": statements}) if isinstance(statements, dict) else _policy(*statements)
    assert key_lets_service_publish(policy, ACCOUNT) == grant


def test_a_key_policy_with_conditions_preflight_cannot_evaluate_is_a_warning() -> None:
    policy = _policy(_cw(StringEquals={"kms:CallerAccount": ACCOUNT}))
    finding = check_topic(f"arn:aws:sns:us-east-1:{ACCOUNT}:t", "k-1", "CUSTOMER", "Enabled", policy)
    assert finding.status == "warn" and "conditions" in finding.detail and "set-alarm-state" in finding.fix


def test_the_aws_managed_sns_key_fails_whatever_its_policy() -> None:
    grants = _policy({"Effect": "Allow", "Principal": CW, "Action": "kms:*"})
    assert check_topic("arn:t", "alias/aws/sns", None, None, None).status == "fail"
    assert check_topic("arn:t", "k-1", "AWS", "Enabled", grants).status == "fail"
    assert check_topic("arn:t", "k-1", "CUSTOMER", "Disabled", grants).status == "fail"
    assert check_topic("arn:t", "k-1", "CUSTOMER", "Enabled", grants).status == "pass"
    assert check_topic("arn:t", None, None, None, None).status == "pass"


# --- checkpoints ---------------------------------------------------------------------------------
bucket_chars = st.text(alphabet="abc-.", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(pattern=st.text(alphabet="abc-.*?", min_size=1, max_size=10), bucket=bucket_chars)
def test_bucket_patterns_match_as_iam_wildcards_do(pattern: str, bucket: str) -> None:
    # IAM's * and ? are the shell's, without character classes (bucket names have no brackets)
    assert bucket_matches(pattern, bucket) is fnmatch.fnmatchcase(bucket, pattern)


def _job(job_id: str, uri: str | None = "s3://ckpt/llama") -> RunningJob:
    return RunningJob(job_id=job_id, name=f"job-{job_id}", checkpoint_uri=uri)


def test_the_worst_job_decides_and_every_job_is_named_up_to_a_limit() -> None:
    jobs = [_job("1"), _job("2", None), _job("3", "s3://elsewhere/x")]
    probes = [CheckpointProbe(job_id="1", name="job-1", checkpoint_uri="s3://ckpt/llama", readable=True, step=7)]
    finding = check_checkpoints("ckpt", jobs, 0, probes)
    assert finding.status == "fail"
    assert finding.detail.startswith("3 (job-3): bucket elsewhere is outside")  # the worst first
    assert "2 (job-2): no checkpoint location" in finding.detail and "1 (job-1): step 7 verified" in finding.detail
    many = [_job(str(i)) for i in range(20)]
    probes = [CheckpointProbe(job_id=str(i), name=f"job-{i}", readable=True, step=1) for i in range(20)]
    assert "12 more job(s) not shown" in check_checkpoints("ckpt", many, 0, probes).detail
    assert "17 more job(s) not shown" in check_checkpoints("ckpt", many, 5, probes).detail


def test_without_the_agents_list_or_jobs_checkpoints_are_skipped() -> None:
    assert check_checkpoints("*", None, 0, None).status == "skip"
    assert check_checkpoints("*", [], 0, []).status == "skip"
    assert check_checkpoints("*", [_job("1")], 0, None, probe_error="denied").status == "error"


def test_s3_not_answering_is_an_error_to_retry_and_a_refusal_is_a_failure() -> None:
    def probe(**fields: Any) -> CheckpointProbe:
        return CheckpointProbe(job_id="1", name="job-1", checkpoint_uri="s3://ckpt/llama", readable=False, **fields)

    throttled = check_checkpoints("ckpt", [_job("1")], 0, [probe(store_unavailable=True, detail="SlowDown")])
    assert throttled.status == "error" and "S3 did not answer" in throttled.detail and "again" in throttled.fix
    refused = check_checkpoints("ckpt", [_job("1")], 0, [probe(detail="AccessDenied")])
    assert refused.status == "fail" and "CheckpointBucketPattern" in refused.fix


# --- the agent -----------------------------------------------------------------------------------
def _answer(**result: Any) -> AgentAnswer:
    fields = {"agent_version": "0.1.0", "slurm_reachable": True, "slurm_detail": "slurmctld answers"}
    fields = fields | {"commands": sorted(COMMAND_TYPES)} | result
    return AgentAnswer("preflight-1", result=AgentCheckResult(**fields), answered_in_seconds=3)


@pytest.mark.parametrize(
    ("answer", "version", "status", "says"),
    [
        (_answer(), "0.1.0", "pass", "answered in 3 s"),
        (_answer(), "0.2.0", "warn", "the stack is 0.2.0"),
        (_answer(slurm_reachable=False, slurm_detail="Connection refused"), "0.1.0", "fail", "slurmctld did not"),
        (AgentAnswer("p", error="States.Timeout"), "0.1.0", "fail", "no answer within 60 s"),
        (
            AgentAnswer(
                "p", error="InvalidCommand", cause="command: Input tag 'check' found using 'type' does not match any of the expected tags"
            ),
            "0.1.0",
            "fail",
            "older than the stack",
        ),
        # InvalidCommand for anything else is not blamed on the agent's age
        (
            AgentAnswer("p", error="InvalidCommand", cause="nodelist 'x y' from slurmctld is not a node list"),
            "0.1.0",
            "fail",
            "ended in InvalidCommand",
        ),
        # An agent that answers the check but not a command the stack sends (older than Cordon Nodes' command)
        (_answer(commands=sorted(COMMAND_TYPES - {"cordon_nodes"})), "0.1.0", "fail", "does not execute cordon_nodes"),
        (_answer(commands=[]), "0.1.0", "fail", "older than the stack"),
        (AgentAnswer("p", error="Running"), None, "fail", "had not ended"),
        (AgentAnswer("p", error="SdkTooOld", cause="botocore 1.40"), None, "fail", "SdkTooOld: botocore 1.40"),
    ],
)
def test_the_agents_answer_or_silence_is_judged(answer: AgentAnswer, version: str | None, status: str, says: str) -> None:
    finding = check_agent(answer, version)
    assert finding.status == status and says in finding.detail


def test_the_agent_executes_a_check_with_slurms_view_of_running_jobs() -> None:
    # Given a Slurm with a running job, a finished one and 4 nodes
    slurm = SimulatedSlurm()
    for name in ("n1", "n2", "n3", "n4"):
        slurm.add_node(name)
    slurm.add_job(SlurmJob(job_id="7", name="llama", nodes=["n1", "n2"], state="RUNNING", checkpoint_uri="s3://ckpt/llama"))
    slurm.add_job(SlurmJob(job_id="8", name="done", nodes=["n3"], state="COMPLETED", checkpoint_uri=None))
    envelope = CommandEnvelope(
        command_id="p:check", incident_id="p", execution_name="p", task_token="t", requested_at=T0, command=CheckAgent()
    )
    # When the agent executes the check
    reply = CommandExecutor(slurm, now=lambda: T0).execute(envelope)
    # Then it answers its version, slurmctld's view and the running job with its checkpoint prefix
    result = reply.result
    assert reply.type == "check" and isinstance(result, AgentCheckResult)
    assert result.slurm_reachable and "4 node(s), 1 running job(s)" in result.slurm_detail
    assert [(j.job_id, j.checkpoint_uri) for j in result.running_jobs] == [("7", "s3://ckpt/llama")]
    # And every command type it executes, among them every one the stack's steps send
    assert set(result.commands) == COMMAND_TYPES and STACK_COMMANDS <= COMMAND_TYPES


def test_the_commands_the_preflight_requires_are_the_ones_the_steps_send() -> None:
    # Given the command classes the workflow steps construct (layers/.../steps/*.py)
    import re

    from hyperpod_recovery.models import commands

    sources = " ".join(p.read_text() for p in (ROOT / "layers" / "recovery_core" / "hyperpod_recovery" / "steps").glob("*.py"))
    classes = [getattr(commands, name, None) for name in set(re.findall(r"\b([A-Z][A-Za-z]+)\(", sources))]
    models = [c for c in classes if isinstance(c, type) and issubclass(c, BaseModel) and "type" in c.model_fields]
    sent = {c.model_fields["type"].default for c in models} & COMMAND_TYPES  # (a reply's type field is not a command)
    # Then the preflight requires each of them but its own check
    assert sent - {"check"} == STACK_COMMANDS


def test_an_unreachable_slurmctld_is_the_checks_answer_not_an_error() -> None:
    class Unreachable(SimulatedSlurm):
        def node_count(self) -> int:
            raise SlurmUnreachable("sinfo: Unable to contact slurm controller")

    result = CommandExecutor(Unreachable(), now=lambda: T0).check()
    assert not result.slurm_reachable and "Unable to contact" in result.slurm_detail


def test_a_check_names_at_most_fifty_jobs_and_counts_the_rest() -> None:
    slurm = SimulatedSlurm()
    slurm.add_node("n1")
    for i in range(60):
        slurm.add_job(SlurmJob(job_id=str(100 + i), name=f"j{i}", nodes=["n1"], state="RUNNING", checkpoint_uri=None))
    result = CommandExecutor(slurm, now=lambda: T0).check()
    assert len(result.running_jobs) == 50 and result.running_jobs_omitted == 10


# --- the functions' SDK, and Check Deployment's reads ---------------------------------------------
@pytest.mark.parametrize(
    ("botocore", "missing", "status", "says"),
    [
        ("1.42.49", [], "pass", "every call and field"),
        ("1.42.60", [], "pass", "every call and field"),
        ("1.42.49", ["sagemaker:BatchReplaceClusterNodes"], "fail", "sagemaker:BatchReplaceClusterNodes"),
        # Older than the minimum fails even if no modelled call is missing: the cold-start check refuses it.
        ("1.40.0", [], "fail", "older than 1.42.49"),
        ("1.42.48", [], "fail", "older than 1.42.49"),
    ],
)
def test_an_sdk_that_is_too_old_or_lacks_anything_fails_and_says_why(botocore: str, missing: list[str], status: str, says: str) -> None:
    report = SdkReport(
        python="3.13.0", boto3="1.x", botocore=botocore, minimum_botocore="1.42.49", missing=missing, package_version="0.1.0"
    )
    finding = check_sdk(report)
    assert finding.status == status and says in finding.detail
    assert status == "pass" or "make deploy" in finding.fix


class _Reader:
    """A CheckpointReader over a dict of objects; ``denied`` buckets refuse every read."""

    def __init__(self, objects: dict[str, bytes], denied: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.objects, self.denied = objects, denied

    def _check(self, bucket: str) -> None:
        from hyperpod_recovery.errors import CheckpointUnreadable

        if bucket in self.denied:
            raise CheckpointUnreadable(f"s3://{bucket}: AccessDenied")

    def get(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        self._check(bucket)
        return self.objects.get(f"{bucket}/{key}")

    def size(self, bucket: str, key: str) -> int | None:
        self._check(bucket)
        body = self.objects.get(f"{bucket}/{key}")
        return None if body is None else len(body)

    def list(self, bucket: str, prefix: str, **kwargs: Any) -> Any:
        from hyperpod_recovery.ports import Listing

        self._check(bucket)
        return Listing(objects=[], folders=[], truncated=False, next_token=None)


def test_check_deployment_reads_each_jobs_checkpoints_and_says_why_not() -> None:
    step = CheckDeploymentInput(jobs=[_job("1", "s3://open/a"), _job("2", "s3://locked/b"), _job("3", None)])
    probes = {p.job_id: p for p in probe_checkpoints(step, reader=_Reader({}, denied={"locked"}))}
    assert probes["1"].readable and probes["1"].step is None and "no checkpoint verifies yet" in probes["1"].detail
    assert not probes["2"].readable and "AccessDenied" in probes["2"].detail
    assert not probes["3"].readable and "no checkpoint location" in probes["3"].detail


# --- the whole -----------------------------------------------------------------------------------
def test_an_armed_stack_with_failing_checks_is_told_to_disarm_and_a_dry_one_to_wait() -> None:
    failing = [Finding("agent", "fail", "silent")]
    assert check_dry_run(False, failing).status == "warn"
    assert check_dry_run(True, failing).fix == "fix the failed checks first"
    assert "DryRun=false" in check_dry_run(True, []).fix
    assert worst(["pass", "warn", "skip"]) == "warn" and worst(["pass", "error", "fail"]) == "fail" and worst([]) == "pass"


def test_the_test_event_carries_every_field_test_event_pattern_requires() -> None:
    event = health_event(ARN)
    assert {"id", "account", "source", "time", "region", "resources", "detail-type"} <= set(event)
    assert (event["account"], event["region"], event["detail"]["ClusterArn"]) == ("111122223333", "us-west-2", ARN)


def test_an_eks_orchestrator_that_carries_out_every_command_the_stack_sends_passes() -> None:
    # Given the EKS orchestrator's own check answer, against a cluster's API server
    from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
    from sandbox.kube import FakeKube

    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    result = EksOrchestrator(fake, None, lambda: T0).check()  # type: ignore[arg-type]
    # Then it carries out every command the stack sends, a hang's evidence among them: a pass
    assert set(result.commands) >= STACK_COMMANDS
    finding = check_agent(AgentAnswer("p", result=result, answered_in_seconds=1), None)
    assert (finding.status, "1 node(s)" in finding.detail) == ("pass", True)


def test_an_eks_orchestrator_without_the_hang_evidence_command_is_a_warning_that_names_it() -> None:
    # Given an EKS orchestrator of an older stack: every command but capture_hang_evidence
    result = AgentCheckResult(
        agent_version="eks-1",
        slurm_reachable=True,
        slurm_detail="the Kubernetes API answers: 2 node(s)",
        commands=sorted(STACK_COMMANDS - {"capture_hang_evidence"} | {"check"}),
    )
    # Then the preflight warns, and names the command it lacks (a hung job's recovery would escalate there)
    finding = check_agent(AgentAnswer("p", result=result, answered_in_seconds=1), None)
    assert finding.status == "warn" and "capture_hang_evidence" in finding.detail
    # And says what that costs, not that failed jobs go unrecovered (they are recovered)
    assert "a hung job's recovery escalates" in finding.detail and "not recovered on EKS" not in finding.detail
