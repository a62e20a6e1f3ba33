"""A hit's downtime split (sandbox/fleet/report.py ``_hit_parts``) on a constructed case: a reboot
that did not help, then the node's replacement, for a failure that started its own execution and for
one folded into an incident already running."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sandbox.fleet.report import _hit_parts
from sandbox.fleet.runner import Hit
from sandbox.fleet.trace import Failure
from sandbox.hyperpod_nodes import RebootRecord, ReplacementRecord

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
HOST = "ip-10-0-0-3"
END = 86_400.0
# A maintenance fault at 1,000 s on node 3 (HyperPod tells of it 60 s later); the job's last checkpoint at 400 s.
FAILURE = Failure(at=1000.0, nodes=(3,), fault="host_maintenance", remedy="reboot", hmm_fault="NodeErrorReboot", detect_seconds=60.0)
# The reboot starts at 1,100 s and does not bring the node back; the ladder replaces it at 1,900 s,
# the replacement runs at 2,600 s; the job's next copy starts at 5,000 s.
REBOOT = RebootRecord("i-3", f"{HOST}.us-east-1.compute.internal", 1100.0, None)
REPLACEMENT = ReplacementRecord("i-3", "i-3b", f"{HOST}.us-east-1.compute.internal", 1900.0, 2600.0, "api")


def _runner(handled_at: dict[Failure, float]) -> Any:
    def started(seconds: float) -> SimpleNamespace:
        return SimpleNamespace(started_at=EPOCH + timedelta(seconds=seconds))

    training = SimpleNamespace(
        copies={"1001": SimpleNamespace(root="1001", copy="1001"), "1002": SimpleNamespace(root="1001", copy="1002")},
        orchestrator=SimpleNamespace(jobs={"1001": started(0.0), "1002": started(5000.0)}),
    )
    return SimpleNamespace(
        fleet_training=training,
        epoch=EPOCH,
        handled_at=handled_at,
        hostnames_of=lambda failure: {HOST} if failure == FAILURE else set(),
        double=SimpleNamespace(reboots=[REBOOT], replacements=[REPLACEMENT]),
        plan=SimpleNamespace(restart_seconds=300.0),
    )


def _parts(handled_at: dict[Failure, float]) -> dict[str, Any]:
    return _hit_parts(cast(Any, _runner(handled_at)), Hit(FAILURE, "1001", "1001", 1000.0, 400.0), END)


def test_given_a_reboot_that_did_not_help_then_its_wait_until_the_replacement_is_shown_apart_and_kept_in_provisioning() -> None:
    # Given the failure started its own execution at 1,075 s
    parts = _parts({FAILURE: 1075.0})
    # Then the job was down 4,000 s: 75 s detection, the reboot then the replacement 1,100 -> 2,600 s
    assert parts["downtime"] == 4000.0 and parts["restarted_at"] == 5000.0
    assert parts["detection"] == 75.0
    assert parts["provisioning_wait"] == 1500.0
    # and of it the failed reboot's 800 s (1,100 -> 1,900 s), what reboot-first cost here
    assert parts["failed_reboot_wait"] == 800.0
    # and the rest, after the replacement ran, is the pipeline's: the parts add up to the downtime
    assert parts["pipeline"] == 2425.0
    assert parts["detection"] + parts["provisioning_wait"] + parts["pipeline"] == pytest.approx(parts["downtime"])
    assert parts["folded"] is False


def test_given_a_failure_folded_into_a_running_incident_then_its_detection_is_only_its_own_delay_to_delivery() -> None:
    # Given no execution of its own started for the failure (another incident's took it in)
    parts = _parts({})
    # Then its detection is the 60 s HyperPod took to tell, not its whole wait
    assert parts["folded"] is True
    assert parts["detection"] == 60.0
    # and the rest is split as for any other hit
    assert parts["provisioning_wait"] == 1500.0 and parts["failed_reboot_wait"] == 800.0
    assert parts["pipeline"] == 2440.0
    assert parts["detection"] + parts["provisioning_wait"] + parts["pipeline"] == pytest.approx(parts["downtime"])


def test_given_a_reboot_that_never_led_to_a_replacement_then_it_waits_to_the_run_end() -> None:
    # Given the reboot failed and nothing replaced the node before the job's next copy started
    runner = _runner({FAILURE: 1075.0})
    runner.double.replacements = []
    parts = _hit_parts(cast(Any, runner), Hit(FAILURE, "1001", "1001", 1000.0, 400.0), END)
    # Then the failed reboot counts from its start until the job ran again
    assert parts["failed_reboot_wait"] == parts["provisioning_wait"] == 3900.0
