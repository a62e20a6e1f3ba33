"""A scenario deployed: the template parameters its stack is deployed with, and the AWS misbehaviour
it arms in the sandbox (injected ledger errors, lost answers, functions that fail before running)."""

from __future__ import annotations

from sandbox.aws import SandboxAWS
from sandbox.runner.functions import hyperpod_hang_log_group
from sandbox.scenario import Scenario, ScenarioError
from sandbox.scenario_cluster import BehaviourSpec


def stack_parameters(scenario: Scenario, cluster_arn: str) -> dict[str, str]:
    """template.yaml's parameters as the scenario's settings set them (the rest keep their defaults)."""
    settings = scenario.settings
    parameters = {
        "ClusterName": scenario.cluster.name,
        "ClusterArn": cluster_arn,
        "CheckpointBucketPattern": "*",
        "DryRun": "true" if settings.dry_run else "false",
        "ResumePolicy": settings.resume_policy,
        **({"ReplacementHealthCheck": settings.replacement_health_check} if settings.replacement_health_check is not None else {}),
        **({"AtRiskSignals": settings.at_risk_signals} if settings.at_risk_signals is not None else {}),
        "RejoinPollSeconds": str(settings.poll_seconds),
        "RejoinMaxPollSeconds": str(settings.max_poll_seconds),
        "RejoinDeadlineSeconds": str(settings.rejoin_deadline_seconds),
        "RebootDeadlineSeconds": str(settings.reboot_deadline_seconds),
        "EpisodeWindowSeconds": str(settings.episode_window_seconds),
        "IntakeBatchWindowSeconds": str(settings.intake_batch_window_seconds),
        "ControllerGroups": ",".join(settings.controller_groups),
        "LoginGroups": ",".join(settings.login_groups),
        "JobRestartBudget": str(settings.job_restarts.budget),
        "JobRestartWindowSeconds": str(settings.job_restarts.window_seconds),
        "JobRestartBackoffSeconds": str(settings.job_restarts.backoff_seconds),
        "JobRestartMaxBackoffSeconds": str(settings.job_restarts.max_backoff_seconds),
        "CrashLoopRepeats": str(settings.job_restarts.crash_loop_repeats),
        "JobFailuresPer1000NodeDays": str(settings.job_restarts.job_failures_per_1000_node_days),
    }
    # Safety limits the scenario sets; the others keep template.yaml's defaults.
    safety = {
        "MaxNodesInRecoveryPercent": settings.caps.max_percent,
        "MaxNodesInRecovery": settings.caps.max_nodes,
        "BreakerMaxRecoveries": settings.breaker.max_recoveries,
        "BreakerMaxFailures": settings.breaker.max_failures,
        "BreakerWindowSeconds": settings.breaker.window_seconds,
        "RepeatOffenderMaxRecoveries": settings.repeat_offender.max_recoveries,
        "RepeatOffenderWindowSeconds": settings.repeat_offender.window_seconds,
    }
    safety |= {"MaxEventAgeSeconds": settings.max_event_age_seconds, "MaxClockSkewSeconds": settings.max_clock_skew_seconds}
    parameters.update({name: f"{value:g}" for name, value in safety.items() if value is not None})
    parameters.update(settings.hangs.parameters())
    parameters.update(settings.elastic.parameters())
    if settings.at_risk_signals is not None:
        parameters["AtRiskSignals"] = settings.at_risk_signals
    if settings.expected_replacement_seconds is not None:
        parameters["ExpectedReplacementSeconds"] = str(settings.expected_replacement_seconds)
    if any(f.kind == "hyperpod_hang" for f in scenario.faults) and scenario.cluster.orchestrator == "slurm":
        # (HyperPod's hang agent writes to the cluster's log group: the stack subscribes to it)
        parameters["HyperPodHangLogGroup"] = hyperpod_hang_log_group(scenario.cluster.name)
    if scenario.cluster.orchestrator == "eks":
        stack_eks = settings.eks_cluster_name or f"{scenario.cluster.name}-eks"
        parameters |= {"Orchestrator": "Eks", "EksClusterName": stack_eks}
    return parameters


def arm_behaviour(aws: SandboxAWS, behaviour: BehaviourSpec) -> None:
    """The scenario's AWS misbehaviour, armed in the sandbox before anything runs."""
    for error in behaviour.api_errors:
        if error.operation.startswith("dynamodb:"):
            aws.ledger_errors[error.operation] = [error.code, error.times]
    for lost in behaviour.lost_responses:
        if lost.function not in aws.handlers:
            raise ScenarioError(f"behaviour.lost_responses: no function {lost.function!r} in template.yaml")
        if not lost.ran:
            aws.failed_before_running[lost.function] += lost.times
            continue
        aws.lost_responses[lost.function] += lost.times
        aws.lost_response_errors[lost.function] = lost.error
    for answer in behaviour.lost_api_answers:
        aws.lost_api_answers[answer.operation] += answer.times
