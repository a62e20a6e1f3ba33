"""Every function's outbound calls against its own Timeout, and the delivery it is invoked with.

A Lambda function killed at its Timeout leaves its step half done and reaches Step Functions as
``Sandbox.Timedout`` (or ``Lambda.Unknown``), not as the named transient error the state's Retry
knows. So no single outbound call may, alone, run a function out of time: each call's worst case
(every attempt at its connect and read timeouts, every backoff at its longest) fits the function's
Timeout with a margin, and a call that gets no answer fails as our named error first. Several slow
calls can still exhaust a function: the states whose steps are idempotent retry a timeout
(tests/contract/test_template.py holds which).

Figures, from their sources:
- boto3: adapters/aws.py CLIENT_CONFIG; botocore's standard retry mode waits
  rand(0, 1) * min(base_scale * 2 ** i, 20) s before retry i (1 s for throttling errors), raised by
  an ``x-amz-retry-after`` header by at most 5 s (botocore's standard retry mode, ExponentialBackoff).
- Kubernetes: adapters/kubernetes.py's timeouts and its sends (a send without an answer is sent
  once more; a 401 gets a fresh token and one last send).
- Lambda's SQS event source: "set the source queue's visibility timeout to at least six times the
  configuration timeout on your function" (Lambda developer guide, Amazon SQS event source mapping).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from botocore.retries.standard import ExponentialBackoff

from hyperpod_recovery.adapters import kubernetes, notifier
from hyperpod_recovery.adapters.aws import CLIENT_CONFIG
from hyperpod_recovery.adapters.eks import KubeEndpoint
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from hyperpod_recovery.errors import KubeUnavailable
from hyperpod_recovery.metric_names import NOTIFICATION_FAILURES
from hyperpod_recovery.steps.reconcile_execution import NOTICE_LEASE
from hyperpod_recovery.steps.sweep_ended_executions import OVERLAP as SWEEP_OVERLAP
from hyperpod_recovery.steps.sweep_ended_executions import RESERVE as SWEEP_RESERVE
from sandbox.kube import FakeKube
from sandbox.template import load_template
from tests.conftest import ROOT

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
FUNCTIONS = sorted(name for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function")
# What of a function's Timeout one call may take: the rest is left for the function's own work and
# its other calls (a margin, not a measurement).
ONE_CALL_SHARE = 0.8
# ASSUMPTION: minting a Kubernetes token signs a URL locally (adapters/eks_token.py: no network), and
# building its STS client reads botocore's model from disk: well under a second.
TOKEN_MINT_SECONDS = 1.0
SQS_VISIBILITY_FACTOR = 6


def _timeout(logical: str) -> int:
    return int(RESOURCES[logical]["Properties"].get("Timeout", TEMPLATE["Globals"]["Function"]["Timeout"]))


def _boto3_worst_seconds() -> float:
    retries = CLIENT_CONFIG.retries or {}
    assert retries.get("mode") == "standard", "the backoff below is the standard mode's"
    attempts = int(retries["total_max_attempts"]) if "total_max_attempts" in retries else int(retries.get("max_attempts", 2)) + 1
    per_attempt = float(CLIENT_CONFIG.connect_timeout) + float(CLIENT_CONFIG.read_timeout)
    backoff = ExponentialBackoff
    scale = backoff._DEFAULT_BACKOFF_CONFIG["throttling_base_scale"]
    backoffs = sum(min(scale * backoff._BASE**i, backoff._MAX_BACKOFF) + backoff._RETRY_AFTER_MAX_ADDITIONAL for i in range(attempts - 1))
    return attempts * per_attempt + backoffs


def _kubernetes_worst_seconds() -> float:
    per_send = kubernetes.CONNECT_TIMEOUT_SECONDS + kubernetes.READ_TIMEOUT_SECONDS
    unanswered_sends = 1 + int(kubernetes.NO_ANSWER_RETRY.total)
    return unanswered_sends * per_send + TOKEN_MINT_SECONDS + kubernetes.SENDS_AFTER_401 * (per_send + TOKEN_MINT_SECONDS)


def _calls_kubernetes(logical: str) -> bool:
    """A function the EKS cluster lets in (its role has an access entry) calls the Kubernetes API."""
    return any(
        r["Type"] == "AWS::EKS::AccessEntry" and r["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [f"{logical}Role", "Arn"]}
        for r in RESOURCES.values()
    )


def test_the_worst_cases_are_computed_from_the_code() -> None:
    # (the figures this file holds the functions to, printed for the report)
    print(f"one boto3 call at worst: {_boto3_worst_seconds():.1f} s; one Kubernetes request: {_kubernetes_worst_seconds():.1f} s")
    assert _boto3_worst_seconds() > 0 and _kubernetes_worst_seconds() > 0


@pytest.mark.parametrize("logical", FUNCTIONS)
def test_given_any_function_then_none_of_its_calls_alone_can_run_it_out_of_time(logical: str) -> None:
    # Given the function's Timeout, and the calls it makes (every function calls AWS; some Kubernetes)
    limit = ONE_CALL_SHARE * _timeout(logical)
    # Then one AWS call at its worst (every attempt timing out, every backoff at its longest) fits with margin
    assert _boto3_worst_seconds() <= limit, f"{logical}: a boto3 call may take {_boto3_worst_seconds():.1f} s of {_timeout(logical)} s"
    # And so does one Kubernetes request, sent again without an answer and again after a 401
    if _calls_kubernetes(logical):
        worst = _kubernetes_worst_seconds()
        assert worst <= limit, f"{logical}: a Kubernetes request may take {worst:.1f} s of {_timeout(logical)} s"


def test_the_kubernetes_functions_are_the_ones_with_access_entries() -> None:
    # (the check above looks at the functions the cluster lets in: they must be there)
    assert {f for f in FUNCTIONS if _calls_kubernetes(f)} >= {"CordonNodesFunction", "ResubmitJobFunction", "FindFailedJobsFunction"}


QUEUE_FED = [f for f in FUNCTIONS if any(e["Type"] == "SQS" for e in RESOURCES[f]["Properties"].get("Events", {}).values())]


@pytest.mark.parametrize("logical", QUEUE_FED)
def test_given_a_function_fed_by_a_queue_then_the_queue_hides_a_batch_long_enough(logical: str) -> None:
    # Given the queue the function's event source mapping reads
    (event,) = [e for e in RESOURCES[logical]["Properties"]["Events"].values() if e["Type"] == "SQS"]
    queue = event["Properties"]["Queue"]["Fn::GetAtt"][0]
    visibility = int(RESOURCES[queue]["Properties"]["VisibilityTimeout"])
    # Then its visibility timeout is at least six times the function's (Lambda refuses the mapping
    # below one, and needs the rest to retry a throttled batch before it is delivered again)
    assert visibility >= SQS_VISIBILITY_FACTOR * _timeout(logical), (logical, queue, visibility)


def test_given_a_401_then_silence_then_the_request_is_sent_once_more_only(tmp_path: Path) -> None:
    # Given an API server that refuses the first token (401), then drops every connection unanswered
    from sandbox.eks import KubeApiServer

    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    server = KubeApiServer(fake, tmp_path)
    minted: list[str] = []

    def token(cluster: str) -> str:
        minted.append(cluster)
        if len(minted) == 1:
            return "expired"  # (refused: not a k8s-aws-v1 token)
        server.drop_next = 5
        return "k8s-aws-v1.fresh"

    try:
        endpoint = KubeEndpoint(cluster_name="llm-eks", url=server.url, ca_pem=server.ca_pem)
        api = KubernetesApi(endpoint=lambda: endpoint, token=token)
        # When a node is read
        with pytest.raises(KubeUnavailable):
            api.get_node("hyperpod-i-0123456789abcdef0")
        # Then, after the 401, the fresh token is sent once, without the retry of an unanswered send:
        # the request stays within its budget (three sends in all, at most)
        assert minted == ["llm-eks", "llm-eks"] and server.drop_next == 5 - kubernetes.SENDS_AFTER_401
    finally:
        server.close()


def test_given_a_state_waiting_for_its_token_then_its_function_stops_before_the_heartbeat_is_missed() -> None:
    # A function killed at its Timeout is retried (Sandbox.Timedout); one that outlived the state's
    # HeartbeatSeconds would end the incident with States.HeartbeatTimeout instead
    import json

    for path in (ROOT / "statemachines").glob("*.asl.json"):
        states = json.loads(path.read_text())["States"]
        for state in [*states.values(), *(s for m in states.values() for s in m.get("ItemProcessor", {}).get("States", {}).values())]:
            if state.get("Type") == "Task" and state["Resource"].endswith(".waitForTaskToken") and "HeartbeatSeconds" in state:
                logical = state["Parameters"]["FunctionName"].removeprefix("${").removesuffix("Arn}")
                assert _timeout(logical) < state["HeartbeatSeconds"], (path.name, logical)


# --- scheduled functions: Lambda invokes them asynchronously ------------------------------------
# "By default, Lambda retries an asynchronous invocation twice if the function returns an error. It
# retains events in a queue for up to six hours" (PutFunctionEventInvokeConfig; MaximumRetryAttempts
# 0-2, MaximumEventAgeInSeconds 60-21600). A scheduled tick's retry is the next tick: a failed one is
# dropped, one Lambda could not run at once no later than the schedule's period.
SCHEDULED = [f for f in FUNCTIONS if any(e["Type"] == "Schedule" for e in RESOURCES[f]["Properties"].get("Events", {}).values())]


def _period_seconds(logical: str) -> int:
    (event,) = RESOURCES[logical]["Properties"]["Events"].values()
    amount, unit = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours)\)", event["Properties"]["Schedule"]).groups()  # type: ignore[union-attr]
    return int(amount) * (60 if unit.startswith("minute") else 3600)


@pytest.mark.parametrize("logical", SCHEDULED)
def test_given_a_scheduled_function_then_a_failed_or_throttled_tick_is_dropped_not_retried_for_hours(logical: str) -> None:
    properties = RESOURCES[logical]["Properties"]
    config = properties.get("EventInvokeConfig", {})
    # Then Lambda does not run a failed tick again, nor a throttled one after the next tick is due
    assert config.get("MaximumRetryAttempts") == 0, logical
    assert 60 <= int(config.get("MaximumEventAgeInSeconds", 21_600)) <= _period_seconds(logical), logical
    # And one tick stops before the next is due: two never overlap unless Lambda held one back
    assert _timeout(logical) < _period_seconds(logical), logical


def test_no_function_reserves_concurrency() -> None:
    # A reservation comes out of the account's unreserved concurrency, of which Lambda keeps 100: the
    # deploy fails in an account where that is low. The poller and the sweep are safe run twice at once
    # (an execution named by its failure starts once; an end's notification is claimed before it is sent).
    assert [f for f in FUNCTIONS if "ReservedConcurrentExecutions" in RESOURCES[f]["Properties"]] == []
    assert {"FindFailedJobsFunction", "SweepEndedExecutionsFunction", "ReportSafetyStateFunction"} <= set(SCHEDULED)


# --- every end notified once: the claim's lease against the functions that take it ------------
def test_the_claim_to_notify_outlives_every_function_that_takes_it_and_lapses_before_its_redelivery() -> None:
    # A holder that died has stopped by the time its claim lapses (no two notifications)...
    senders = ("ReconcileExecutionFunction", "SweepEndedExecutionsFunction")
    assert all(timedelta(seconds=_timeout(f)) <= NOTICE_LEASE for f in senders)
    # ...and the redelivery of a holder that died finds the claim free (the end is notified without waiting for the sweep)
    visibility = int(RESOURCES["ReconcileQueue"]["Properties"]["VisibilityTimeout"])
    assert timedelta(seconds=visibility) > NOTICE_LEASE


def test_the_sweep_keeps_time_for_one_more_end_and_looks_back_past_its_mark() -> None:
    assert timedelta(seconds=_timeout("SweepEndedExecutionsFunction")) > SWEEP_RESERVE and timedelta(0) < SWEEP_OVERLAP
    # (and it runs every five minutes: an end whose event was lost is settled within about that)
    assert _period_seconds("SweepEndedExecutionsFunction") == 300


def _publishes(logical: str) -> bool:
    """Its role may publish to the notification topic: its handler sends notifications."""
    policies = json.dumps(RESOURCES[logical]["Properties"].get("Policies", []), default=str)
    return "sns:Publish" in policies and "NotificationTopic" in policies


@pytest.mark.parametrize("logical", [f for f in FUNCTIONS if _publishes(f)])
def test_a_notification_with_every_channel_slow_fits_the_function_that_sends_it(logical: str) -> None:
    # Given the notifier's channels sent one after another, each at its worst (no answer until its timeouts)
    every_channel_once = len(NOTIFICATION_FAILURES) * notifier.ATTEMPT_WORST_SECONDS
    # Then all of them get their first try within the publish's budget (a retry starts only inside it)
    assert every_channel_once <= notifier.SEND_BUDGET_SECONDS
    # And that budget fits the function's time like any one call, so it returns and flushes its metrics
    assert ONE_CALL_SHARE * _timeout(logical) >= notifier.SEND_BUDGET_SECONDS, (logical, _timeout(logical))
