"""The benches' --help says what every option is, and their labels say what they measure."""

from __future__ import annotations

import argparse
import importlib.util
import re
from types import ModuleType

import pytest

from sandbox.scenario import load_scenario
from tests.conftest import EVENTS, ROOT

BENCHES = ("fleet", "fleet_scaling")


def bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", BENCHES)
def test_every_option_of_a_fleet_bench_says_what_it_is(name: str) -> None:
    # Given the bench's parser, as `python bench/<name>.py --help` prints it
    parser: argparse.ArgumentParser = bench(name).parser()
    # Then every option and argument but --help has help text of its own
    options = [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    unexplained = [action.dest for action in options if not (action.help or "").strip()]
    assert options and unexplained == []


@pytest.mark.parametrize("name", BENCHES)
def test_a_fleet_bench_describes_itself_in_whole_sentences(name: str) -> None:
    # Given the bench's description
    description = bench(name).parser().description or ""
    # Then it is its docstring's whole first paragraph, ending as a sentence does
    assert description.endswith(".") and len(description) > 80, description


def test_the_rack_storm_label_names_the_nodes_that_fail_and_the_cluster_they_fail_in() -> None:
    # Given the rack-storm scenario and its label in bench/time_to_resume.py
    scenario = load_scenario(EVENTS / "drills" / "rack-storm.json")
    failed = {fault.node for fault in scenario.faults}
    cluster = sum(group.count for group in scenario.cluster.instance_groups if group.type == "Compute")
    label = next(row[3] for row in bench("time_to_resume").SCENARIOS if row[1] == "rack-storm")
    # Then it says how many of how many nodes failed at once
    assert re.search(rf"\b{len(failed)} of {cluster} nodes\b", label), (label, len(failed), cluster)
