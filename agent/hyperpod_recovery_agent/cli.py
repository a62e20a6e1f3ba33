"""``hyperpod-recovery-agent``: the controller agent's command line.

  run        long-poll the command queue and answer the workflow (the systemd service); beside it,
             write the running jobs' nodes to the ledger every 30 s (job_nodes.py)
  job-ended  report the job slurmctld is ending, when it failed (EpilogSlurmctld)
  check      validate the configuration and reach Slurm, the queue and EventBridge (after install)

Exit codes: 0 ok, 1 a check failed, 2 the configuration is unusable. ``job-ended`` exits 0 even when
EventBridge is unreachable (the event is spooled and sent by ``run``): an epilog's failure helps
nobody.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery_agent import __version__
from hyperpod_recovery_agent.agent import Agent, ReplyJournal
from hyperpod_recovery_agent.capture import CaptureStore
from hyperpod_recovery_agent.config import AgentConfig, AgentConfigError, load_config
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.job_ended import JobEventSender, failed_job_detail
from hyperpod_recovery_agent.job_nodes import JobNodesReporter
from hyperpod_recovery_agent.slurm import SlurmCli

log = logging.getLogger("hyperpod_recovery_agent")


class _JsonLines(logging.Formatter):
    """One JSON object per line: journald keeps it, CloudWatch agent ships it as is."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    root = logging.getLogger("hyperpod_recovery_agent")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def _client(service: str, config: AgentConfig, *, quick: bool = False) -> Any:
    # The epilog must not hold slurmctld up: short timeouts, one retry, then the spool.
    retries = {"max_attempts": 2, "mode": "standard"} if quick else {"max_attempts": 5, "mode": "standard"}
    timeouts = {"connect_timeout": 2, "read_timeout": 5} if quick else {"connect_timeout": 5, "read_timeout": 30}
    return boto3.client(service, region_name=config.aws_region, config=Config(retries=retries, **timeouts))


def _slurm(config: AgentConfig) -> SlurmCli:
    return SlurmCli(
        bin_dir=config.slurm_bin_dir,
        timeout_seconds=config.slurm_timeout_seconds,
        checkpoint_env=config.checkpoint_env,
        env=config.slurm_env(),
        py_spy=config.py_spy,
    )


def _events(config: AgentConfig, *, quick: bool = False) -> JobEventSender:
    return JobEventSender(_client("events", config, quick=quick), config.event_bus, config.state_dir)


def _job_nodes(config: AgentConfig, slurm: SlurmCli) -> JobNodesReporter | None:
    if not config.ledger_table:
        return None
    return JobNodesReporter(slurm=slurm, dynamodb=_client("dynamodb", config), table_name=config.ledger_table, cluster=config.cluster_name)


def run(config: AgentConfig, *, once: bool = False) -> int:
    if not config.command_queue_url:
        raise AgentConfigError("command_queue_url: required to run the agent (the stack's CommandQueueUrl output)")
    journal = ReplyJournal(config.state_dir / "replies", keep_days=config.journal_days)
    # Job captures hold owners' submission environments: root-only, on the controller's own disk.
    captures = CaptureStore(config.state_dir / "captures", keep_days=config.journal_days)
    slurm = _slurm(config)
    agent = Agent(
        executor=CommandExecutor(slurm, captures=captures),
        sqs=_client("sqs", config),
        stepfunctions=_client("stepfunctions", config),
        queue_url=config.command_queue_url,
        journal=journal,
        retry=config.unreachable_retry,
        heartbeat_seconds=config.heartbeat_seconds,
        visibility_seconds=config.visibility_seconds,
        job_nodes=_job_nodes(config, slurm),
    )
    if agent.job_nodes is None:
        log.warning("ledger_table is not set: no job nodes snapshot, so hang detection cannot tell a job's own nodes")
    events = _events(config)
    stop = threading.Event()
    if once:
        stop.set()
    else:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())

    def housekeeping() -> None:
        events.flush()  # job-failed events the epilog could not send
        journal.prune()
        captures.prune()
        events.prune(journal.keep_seconds)

    log.info("hyperpod-recovery-agent %s polling %s", __version__, config.command_queue_url)
    try:  # read once: which command lists the nodes depends on it; the check command reports it
        log.info("Slurm %s", slurm.version() or "of a release scontrol --version does not name")
    except Exception as exc:  # slurmctld's host may come up after the agent: its commands say why later
        log.warning("Slurm's version could not be read yet: %s", exc)
    housekeeping()
    if once:
        if agent.job_nodes is not None:
            agent.job_nodes.tick()
        agent.poll_once(config.poll_wait_seconds)
        housekeeping()
    else:
        agent.run(stop, config.poll_wait_seconds, between_polls=housekeeping)
    log.info("stopped")
    return 0


def job_ended(config: AgentConfig, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    try:
        detail = failed_job_detail(environ, _slurm(config), cluster_name=config.cluster_name, report_timeout=config.report_timeout)
    except Exception:
        log.exception("job %s: could not read the ending job from Slurm", environ.get("SLURM_JOB_ID"))
        return 0
    if detail is None:
        log.debug("job %s did not fail: nothing to report", environ.get("SLURM_JOB_ID"))
        return 0
    result = _events(config, quick=True).send(detail)
    log.info("job %s ended %s (%s): event %s", detail.job_id, detail.state, detail.reason, result)
    return 0


def check(config: AgentConfig) -> int:
    """What an operator runs after installing: every dependency reachable with this role."""
    problems = 0

    def report(name: str, ok: bool, detail: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    try:
        slurm = _slurm(config)
        nodes = slurm.nodes()
        report("slurm", True, f"slurmctld (Slurm {slurm.version() or 'of an unnamed release'}) answers, {len(nodes)} nodes")
    except Exception as exc:
        report("slurm", False, str(exc))
    if config.command_queue_url:
        try:
            _client("sqs", config).get_queue_attributes(QueueUrl=config.command_queue_url, AttributeNames=["ApproximateNumberOfMessages"])
            report("command queue", True, config.command_queue_url)
        except (ClientError, BotoCoreError) as exc:
            report("command queue", False, str(exc))
    else:
        report("command queue", False, "command_queue_url is not set")
    try:
        _client("events", config).describe_event_bus(Name=config.event_bus)
        report("event bus", True, config.event_bus)
    except (ClientError, BotoCoreError) as exc:
        report("event bus", False, str(exc))
    reporter = _job_nodes(config, _slurm(config))
    if reporter is None:  # a warning, not a failure: an agent configured before it existed still recovers nodes
        print("warn job nodes snapshot: ledger_table is not set (the stack's LedgerTableName output): hang detection needs it")
    else:
        try:
            snapshot = reporter.write_once()
            report("job nodes snapshot", True, f"{len(snapshot.jobs)} running jobs written to {config.ledger_table}")
        except Exception as exc:
            report("job nodes snapshot", False, f"{type(exc).__name__}: {exc}")
    for directory in (config.state_dir / "replies", config.state_dir / "job-events"):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            report("state dir", os.access(directory, os.W_OK), str(directory))
        except OSError as exc:
            report("state dir", False, str(exc))
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hyperpod-recovery-agent", description="The hyperpod-recovery controller agent.")
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="TOML file (default: $HYPERPOD_RECOVERY_AGENT_CONFIG or /etc/hyperpod-recovery/agent.toml)",
    )
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="long-poll the command queue and answer the workflow")
    run_parser.add_argument("--once", action="store_true", help="handle at most one message, then exit")
    commands.add_parser("job-ended", help="EpilogSlurmctld hook: report the ending job if it failed")
    commands.add_parser("check", help="validate the configuration and reach Slurm, the queue and EventBridge")
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    try:
        config = load_config(args.config)
        if args.command == "run":
            return run(config, once=args.once)
        if args.command == "job-ended":
            return job_ended(config)
        return check(config)
    except AgentConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
