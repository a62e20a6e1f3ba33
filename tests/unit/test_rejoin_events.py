"""A Cluster Event about a watched node wakes the recovery waiting for it; nothing else does, and
nothing is decided on the event (Check Rejoin looks for itself)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.rejoin_events import announces_an_end, rejoin_wait, wakes
from hyperpod_recovery.domain.policy.limits import MAX_EVENT_WAKES
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.events import ClusterEventDetails, HyperPodClusterEvent
from hyperpod_recovery.models.node_recovery import RejoinWatch, WaitForRejoinInput, WatchedNode
from hyperpod_recovery.models.records import RejoinWait
from hyperpod_recovery.steps.notice_cluster_event import STALE_AFTER, notice_cluster_event
from hyperpod_recovery.steps.wait_for_rejoin import wait_for_rejoin
from tests.conftest import EVENTS
from tests.fakes import CLUSTER, CLUSTER_ARN, T0, FakeLedger, FakeWorkflows
from tests.unit.test_steps import _request

LOGICAL = "df268d19-f035-4f28-9b80-b956b92ae21e"
COMPLETED = (
    "Instance i-0f1e2d3c4b5a69788 creation completed successfully as part of instance replacement in Cluster llm-train and IG workers"
)


def _event(**changes: Any) -> ClusterEventDetails:
    base: dict[str, Any] = {
        "EventId": "e-1",
        "ClusterName": CLUSTER,
        "ClusterArn": CLUSTER_ARN,
        "InstanceGroupName": "workers",
        "InstanceId": "i-0f1e2d3c4b5a69788",
        "ResourceType": "Instance",
        "EventLevel": "Info",
        "Description": COMPLETED,
        "EventDetails": {"EventMetadata": {"Instance": {"NodeLogicalId": LOGICAL}}},
    }
    return ClusterEventDetails.model_validate({**base, **changes})


def _wait(**changes: Any) -> RejoinWait:
    base: dict[str, Any] = {
        "execution": "inc-1",
        "task_token": "tok-1",
        "until": T0 + timedelta(minutes=10),
        "logical_ids": [LOGICAL],
        "instance_ids": ["i-0a1b2c3d4e5f60718"],
        "instance_groups": ["workers"],
    }
    return RejoinWait.model_validate({**base, **changes})


@pytest.mark.parametrize(
    ("event", "woken"),
    [
        (_event(), True),  # the watched node's replacement ended
        (_event(Description="Instance creation in Cluster llm-train and InstanceGroup workers failed", EventLevel="Error"), True),
        # another logical id in the same group: woken (a replacement's logical id is not documented to persist)
        (_event(EventDetails={"EventMetadata": {"Instance": {"NodeLogicalId": "another-node"}}}), True),
        (_event(EventDetails={"EventMetadata": {"Instance": {"NodeLogicalId": "another-node"}}}, InstanceGroupName="other"), False),
        (
            _event(Description="Instance lifecycle script execution for EC2InstanceId i-0f1e2d3c4b5a69788 has Started", EventLevel=None),
            False,
        ),
        (_event(ResourceType="InstanceGroup"), False),
        (_event(EventDetails=None, InstanceId="i-0a1b2c3d4e5f60718"), True),  # no logical id: the old instance id
        (_event(EventDetails=None, InstanceId="i-0123456789abcdef0"), True),  # no logical id, no instance match: its group
        (_event(EventDetails=None, InstanceId="i-0123456789abcdef0", InstanceGroupName="other"), False),
    ],
)
def test_an_event_wakes_only_a_wait_for_the_node_it_is_about(event: ClusterEventDetails, woken: bool) -> None:
    assert wakes(event, _wait(), T0) is woken


def test_a_wait_past_its_timeout_is_not_woken() -> None:
    assert not wakes(_event(), _wait(until=T0), T0)


@given(description=st.text(max_size=300), level=st.sampled_from([None, "Info", "Warn", "Error", "Debug"]))
def test_any_description_is_judged_without_error_and_a_loud_level_always_counts(description: str, level: str | None) -> None:
    event = _event(Description=description, EventLevel=level)
    assert announces_an_end(event) == (
        level in ("Warn", "Error")
        or any(w in description.lower() for w in ("completed successfully", "failed", "successfully provisioned"))
    )


def test_every_cluster_event_sample_parses_and_the_replacement_sample_wakes_its_wait() -> None:
    samples = {p.name: HyperPodClusterEvent.model_validate(json.loads(p.read_text())) for p in (EVENTS / "hyperpod-cluster").glob("*.json")}
    completed = samples["instance_replacement_completed.json"].detail.EventDetails
    assert wakes(completed, _wait(), T0) and not wakes(samples["lifecycle_script_started.json"].detail.EventDetails, _wait(), T0)


def _watch(**changes: Any) -> RejoinWatch:
    node = WatchedNode(node_id="i-0a1b2c3d4e5f60718", slurm_node="ip-10-3-0-11", instance_group="workers", logical_id=LOGICAL)
    base: dict[str, Any] = {"at": T0, "started_at": T0, "deadline": T0 + timedelta(minutes=45), "nodes": [node], "next_wait_seconds": 600,
                            "expected_at": T0 + timedelta(seconds=600), "announced": True}  # fmt: skip
    return RejoinWatch.model_validate({**base, **changes})


def _wait_step(watch: RejoinWatch) -> WaitForRejoinInput:
    return WaitForRejoinInput(execution_name="inc-1", task_token="tok-1", request=_request(1), rejoin=watch)


def test_a_wait_is_registered_until_its_timeout_with_the_nodes_it_watches() -> None:
    ledger, workflows = FakeLedger(), FakeWorkflows()
    assert wait_for_rejoin(_wait_step(_watch()), ledger=ledger, workflows=workflows, cluster=CLUSTER, now=T0)["registered"]
    (wait,) = ledger.rejoin_waits(CLUSTER)
    assert wait == rejoin_wait("inc-1", "tok-1", _watch(), T0 + timedelta(seconds=600)) and wait.logical_ids == [LOGICAL]
    assert workflows.woken == []


def test_a_wait_no_event_announces_is_not_registered() -> None:
    # A cluster without Cluster Events (its watch still expects the replacement at its typical
    # duration), or a reboot: the watch expects no announcement
    for watch in (_watch(announced=False), _watch(expected_at=None, announced=False)):
        ledger, workflows = FakeLedger(), FakeWorkflows()
        result = wait_for_rejoin(_wait_step(watch), ledger=ledger, workflows=workflows, cluster=CLUSTER, now=T0)
        assert not result["registered"] and ledger.rejoin_waits(CLUSTER) == [] and workflows.woken == []


@pytest.mark.parametrize("watch", [_watch(dry_run=True), _watch(done=True)], ids=["dry run", "done"])
def test_a_wait_with_nothing_to_wait_for_goes_on_at_once(watch: RejoinWatch) -> None:
    ledger, workflows = FakeLedger(), FakeWorkflows()
    wait_for_rejoin(_wait_step(watch), ledger=ledger, workflows=workflows, cluster=CLUSTER, now=T0)
    assert [token for token, _ in workflows.woken] == ["tok-1"] and ledger.rejoin_waits(CLUSTER) == []


def test_past_its_wake_budget_or_without_the_ledger_a_wait_is_its_timeout_alone() -> None:
    ledger, workflows = FakeLedger(), FakeWorkflows()
    result = wait_for_rejoin(_wait_step(_watch(checks=MAX_EVENT_WAKES)), ledger=ledger, workflows=workflows, cluster=CLUSTER, now=T0)
    assert not result["registered"] and ledger.rejoin_waits(CLUSTER) == [] and workflows.woken == []

    class Down(FakeLedger):
        def await_rejoin(self, *args: Any) -> None:
            raise LedgerUnavailable("throttled")

    assert not wait_for_rejoin(_wait_step(_watch()), ledger=Down(), workflows=workflows, cluster=CLUSTER, now=T0)["registered"]


def test_an_event_wakes_its_wait_once_and_leaves_the_others() -> None:
    # Given two waits, one for the node the event is about, and a stale one nobody answers any more
    ledger, workflows = FakeLedger(), FakeWorkflows()
    ledger.await_rejoin(CLUSTER, _wait(), T0)
    ledger.await_rejoin(
        CLUSTER, _wait(execution="inc-2", task_token="tok-2", logical_ids=["other"], instance_ids=[], instance_groups=["other-group"]), T0
    )
    ledger.await_rejoin(CLUSTER, _wait(execution="inc-3", task_token="tok-3", until=T0 - STALE_AFTER - timedelta(seconds=1)), T0)
    # When the event arrives, twice (EventBridge delivers at least once)
    first = notice_cluster_event(_event(), ledger=ledger, workflows=workflows, cluster=CLUSTER, cluster_arn=CLUSTER_ARN, now=T0)
    again = notice_cluster_event(_event(), ledger=ledger, workflows=workflows, cluster=CLUSTER, cluster_arn=CLUSTER_ARN, now=T0)
    # Then its wait was answered once and removed; the other waits on; the stale one is cleaned up
    assert first == ["inc-1"] and again == [] and [t for t, _ in workflows.woken] == ["tok-1"]
    assert json.loads(workflows.woken[0][1])["event_id"] == "e-1"
    assert [w.execution for w in ledger.rejoin_waits(CLUSTER)] == ["inc-2"]


def test_a_wait_whose_task_is_gone_is_removed_and_another_clusters_event_wakes_nobody() -> None:
    ledger, workflows = FakeLedger(), FakeWorkflows(gone_tokens={"tok-1"})
    ledger.await_rejoin(CLUSTER, _wait(), T0)
    assert notice_cluster_event(_event(), ledger=ledger, workflows=workflows, cluster=CLUSTER, cluster_arn=CLUSTER_ARN, now=T0) == []
    assert ledger.rejoin_waits(CLUSTER) == []
    ledger.await_rejoin(CLUSTER, _wait(), T0)
    foreign = _event(ClusterName="other", ClusterArn="arn:aws:sagemaker:us-west-2:111122223333:cluster/zz9yy8xx7ww6")
    assert notice_cluster_event(foreign, ledger=ledger, workflows=FakeWorkflows(), cluster=CLUSTER, cluster_arn=CLUSTER_ARN, now=T0) == []
