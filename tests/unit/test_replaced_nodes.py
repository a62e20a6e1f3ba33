"""A node named by what it was before HyperPod replaced it is found through the ledger's records."""

from __future__ import annotations

from hyperpod_recovery.models.records import IncidentRecord, NodeFate
from hyperpod_recovery_cli.replaced_nodes import Replacement, replacement_of
from tests.fakes import T0


def _record(incident: str, *fates: NodeFate) -> IncidentRecord:
    return IncidentRecord(
        incident_id=incident, cluster="c", outcome="escalated", dry_run=False, trigger=[], nodes=[], summary="s", recorded_at=T0,
        node_fates=list(fates),
    )  # fmt: skip


def _replaced(old: str, new: str) -> NodeFate:
    return NodeFate(node=f"hyperpod-{old}", instance=old, fate="replacing", replacement=new, replacement_node=f"hyperpod-{new}")


def test_given_a_replaced_node_then_its_old_name_and_its_old_instance_find_the_replacement() -> None:
    records = [_record("hpr-1", _replaced("i-0aaa", "i-0bbb"))]
    assert replacement_of("hyperpod-i-0aaa", records) == Replacement("i-0bbb", "hyperpod-i-0bbb", "hpr-1")
    assert replacement_of("i-0aaa", records) == Replacement("i-0bbb", "hyperpod-i-0bbb", "hpr-1")


def test_given_a_replacement_replaced_again_then_the_newest_node_in_its_place_is_found() -> None:
    records = [_record("hpr-2", _replaced("i-0bbb", "i-0ccc")), _record("hpr-1", _replaced("i-0aaa", "i-0bbb"))]
    assert replacement_of("hyperpod-i-0aaa", records) == Replacement("i-0ccc", "hyperpod-i-0ccc", "hpr-2")


def test_given_no_record_of_a_replacement_or_a_circle_then_nothing_or_the_last_step_before_it() -> None:
    assert replacement_of("hyperpod-i-0aaa", [_record("hpr-1", NodeFate(node="x", instance="i-0aaa", fate="unknown"))]) is None
    circle = [_record("hpr-2", _replaced("i-0bbb", "i-0aaa")), _record("hpr-1", _replaced("i-0aaa", "i-0bbb"))]
    assert replacement_of("i-0aaa", circle) == Replacement("i-0bbb", "hyperpod-i-0bbb", "hpr-1")
