"""The EpilogSlurmctld hook against a real slurmctld: one "job failed" event per failed job, none for
jobs that completed, were cancelled, or that Slurm requeued itself. EventBridge is moto's server,
with a rule delivering the agent's events to an SQS queue the test reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from hyperpod_recovery.models.job_events import JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE, JobFailedDetail
from hyperpod_recovery_agent.slurm import SlurmCli
from tests.slurm.conftest import PYTHONPATH, job_state, sbatch, wait_for

pytestmark = pytest.mark.slurm
FINAL = ("FAILED", "COMPLETED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "PENDING")  # PENDING: requeued by Slurm
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-west-2"}


@pytest.fixture
def event_inbox(slurm_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """moto's server as EventBridge + SQS, the agent configured to report to it."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-west-2")
    sqs, events = session.client("sqs", endpoint_url=endpoint), session.client("events", endpoint_url=endpoint)
    url = sqs.create_queue(QueueName="job-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="job-failed", EventPattern=json.dumps({"source": [JOB_EVENT_SOURCE], "detail-type": [JOB_FAILED_DETAIL_TYPE]}))
    events.put_targets(Rule="job-failed", Targets=[{"Id": "inbox", "Arn": arn}])
    base = Path(slurm_env["SLURM_CONF"]).parent
    config = base / "agent.toml"
    config.write_text(
        f'cluster_name = "llm-train"\nregion = "us-west-2"\nstate_dir = "{tmp_path / "agent"}"\nslurm_conf = "{slurm_env["SLURM_CONF"]}"\n'
    )
    exports = {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    (base / "epilog.env").write_text("".join(f"export {k}={v}\n" for k, v in exports.items()))
    yield {"sqs": sqs, "url": url, "config": config, "exports": exports, "base": base}
    (base / "epilog.env").unlink()
    server.stop()


def received(inbox: dict[str, Any]) -> list[JobFailedDetail]:
    details = []
    while messages := inbox["sqs"].receive_message(QueueUrl=inbox["url"], MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            event = json.loads(message["Body"])
            assert (event["source"], event["detail-type"]) == (JOB_EVENT_SOURCE, JOB_FAILED_DETAIL_TYPE)
            details.append(JobFailedDetail.model_validate(event["detail"]))
            inbox["sqs"].delete_message(QueueUrl=inbox["url"], ReceiptHandle=message["ReceiptHandle"])
    return details


def test_the_epilog_reports_each_failed_job_exactly_once(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path, event_inbox: dict[str, Any]
) -> None:
    # Given jobs that fail, complete, are cancelled, lose their node, or lose it and are requeued by Slurm
    failed = sbatch(slurm_env, "-J", "bad-config", "-D", str(job_dir), "--comment=checkpoint=s3://ckpt/bad", script="#!/bin/sh\nexit 3\n")
    completed = sbatch(slurm_env, "-J", "fine", "-D", str(job_dir), script="#!/bin/sh\nexit 0\n")
    long = "#!/bin/sh\nsleep 600\n"
    cancelled = sbatch(slurm_env, "-J", "cancelled", "-D", str(job_dir), "-w", "ip-10-1-0-2", script=long)
    node_failed = sbatch(slurm_env, "-J", "llama", "-D", str(job_dir), "-w", "ip-10-1-0-3", "--no-requeue", script=long)
    requeued = sbatch(slurm_env, "-J", "requeued", "-D", str(job_dir), "-w", "ip-10-1-0-4", "--requeue", script=long)
    for job_id in (cancelled, node_failed, requeued):
        wait_for(lambda job_id=job_id: job_state(slurm_env, job_id) == "RUNNING", f"job {job_id} running")
    # When they end
    subprocess.run(["scancel", cancelled], env=slurm_env, check=True)
    for node in ("ip-10-1-0-3", "ip-10-1-0-4"):
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=test-hardware"], env=slurm_env, check=True)
    jobs = (failed, completed, cancelled, node_failed, requeued)
    # A job leaves COMPLETING only after its EpilogSlurmctld finished.
    wait_for(lambda: all(job_state(slurm_env, j) in FINAL for j in jobs), "every job ended and its epilog done")
    # Then exactly the failed job and the one whose node failed are reported, once each
    details = {d.job_id: d for d in received(event_inbox)}
    assert sorted(details) == sorted([failed, node_failed]), (event_inbox["base"] / "epilog.log").read_text()
    bad, lost = details[failed], details[node_failed]
    assert (bad.state, bad.exit_code, bad.reason, bad.name) == ("FAILED", 3, "NonZeroExitCode", "bad-config")
    assert bad.checkpoint_uri == "s3://ckpt/bad" and bad.cluster_name == "llm-train" and len(bad.nodes) == 1
    assert (lost.state, lost.nodes, lost.reason) == ("NODE_FAIL", ["ip-10-1-0-3"], "NodeDown")


def test_running_the_hook_again_for_the_same_job_end_sends_nothing(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path, event_inbox: dict[str, Any]
) -> None:
    # Given a failed job already reported by the epilog
    job_id = sbatch(slurm_env, "-J", "bad", "-D", str(job_dir), script="#!/bin/sh\nexit 7\n")
    wait_for(lambda: job_state(slurm_env, job_id) == "FAILED", "job failed")
    wait_for(lambda: received(event_inbox), "the epilog's event")
    # When the hook runs again with the same job's environment (slurmctld restarted mid-epilog)
    environ = {
        **event_inbox["exports"],
        "PYTHONPATH": os.pathsep.join(map(str, PYTHONPATH)),
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NAME": "bad",
        "SLURM_JOB_EXIT_CODE2": "7:0",
        "SLURM_JOB_NODELIST": "ip-10-1-0-1",
        "PATH": slurm_env["PATH"],  # (24.11's commands: tools/slurm_up.sh's PATH)
    }
    done = subprocess.run(
        [sys.executable, "-m", "hyperpod_recovery_agent", "--config", str(event_inbox["config"]), "job-ended"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    # Then nothing more is sent
    assert done.returncode == 0, done.stderr
    assert '"event duplicate"' in done.stderr or "event duplicate" in done.stderr
    assert received(event_inbox) == []
