"""``hyperpod-recovery goodput`` with planned swaps and the ceilings: the flags, the table's blocks, the page's
sections, a fleet report carrying precursor figures, and refusals."""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

import pytest

from hyperpod_recovery_cli.planner.model import PlannerInputs
from tests.cli.test_goodput_cli import INPUTS, as_plan, goodput, write

# The detection pinned to the figure the estimates were made with (the measured default moves with the drills).
DEFAULT_JOB = ["--nodes", "2048", "--failure-rate", "llama3", "--checkpoint-cost", "30s", "--detect", "126.6s"]


def test_given_a_recall_then_the_table_counts_planned_swaps_and_says_every_figure_and_the_rules_decision() -> None:
    # When the default job is planned with 2 spares and planned swaps at 50 % recall
    code, printed, _ = goodput(*DEFAULT_JOB, "--spares", "2", "--precursor-recall", "50%")
    assert code == 0
    # Then the headline splits off what the swaps take, and the block names the figures and which are assumed
    assert "| planned swaps " in printed
    assert "planned swaps recall 50 % [given], lead 60.0 min, 50 % of verdicts false, 10 s lost past the commit, restart 5.0 min" in printed
    assert "(assumed: lead time, false-positive rate, work lost past the commit)" in printed
    # And one verdict's decision in the rule's own sentence
    assert "per verdict: swap onto a spare at the next checkpoint commit: expected " in printed


def test_given_no_recall_then_no_swap_is_counted_but_the_recall_table_and_the_ceilings_are_shown() -> None:
    code, printed, _ = goodput(*DEFAULT_JOB, "--json")
    found = as_plan(printed)
    # Then the headline is without planned swaps, and the recalls 0 to 75 % are shown beside it
    assert code == 0 and found.planned_swaps is None and found.ettr.swap_loss == 0
    assert [r.recall for r in found.recalls] == [0.0, 0.25, 0.5, 0.75] and found.recalls[0].ettr == found.ettr.ettr
    # And the ceilings end with all the losses together, with a spare for every failure and the best interval (89.3 %)
    assert found.ceilings[-1].assumption.startswith("all together") and round(100 * found.ceilings[-1].ettr, 1) == 89.3


def test_the_table_prints_the_ceilings_so_no_assumption_reads_as_a_result() -> None:
    _, printed, _ = goodput(*DEFAULT_JOB)
    assert "the ceiling each assumption sets (that loss alone, every other away: an assumption, not a result):" in printed
    assert "97.34 % ( -2.66 pts)  restart, 5.0 min per failure" in printed
    assert "RECALL  SWAP NOW" in printed


def test_where_planned_swaps_pay_at_the_assumed_figures_they_are_a_change_to_consider() -> None:
    # Given an async-checkpoint job (5 s save, 3-min restart) at the best interval, with its spares, and no recall given
    code, printed, _ = goodput(*DEFAULT_JOB, "--checkpoint-cost", "5s", "--restart", "3m", "--spares", "2", "--checkpoint-interval", "5.5m")
    # Then "planned swaps" is a line of what to change, at the assumed figures, saying they are assumed
    assert code == 0
    (line,) = [line for line in printed.splitlines() if line.strip().startswith("planned swaps  ")]
    assert "no planned swaps -> planned swaps at 25 % recall, 60.0 min lead, 50 % false alarms (all assumed" in line


def test_given_html_then_the_page_shows_the_planned_swaps_the_recalls_and_each_ceiling(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    code, _, _ = goodput(*DEFAULT_JOB, "--precursor-recall", "0.25", "--html", str(page))
    html = unescape(page.read_text())
    assert code == 0
    assert "<h2>Planned swaps</h2>" in html and "<h2>Planned swaps at several recalls</h2>" in html
    assert html.count('<tr class="ceiling"') >= 7 and "restart, 5.0 min per failure" in html
    assert "<td>precursor recall</td><td>25.00 %</td><td>given</td>" in html


def test_a_fleet_report_with_precursor_figures_reads_back_and_plans_them(tmp_path: Path) -> None:
    # Given a fleet report whose planner inputs carry measured precursor figures
    inputs = INPUTS | {
        "precursor_recall": {"value": 0.5, "provenance": "measured", "source": "fleet drill: verdicts"},
        "precursor_lead_seconds": {"value": 7200, "provenance": "given", "source": "fleet drill: --lead-time"},
        "precursor_false_positive": 0.2,
        "swap_lost_seconds": 8,
    }
    report = {"fleet": "256 nodes", "goodput_inputs": PlannerInputs.model_validate(inputs).model_dump(mode="json")}
    code, printed, _ = goodput("--from", write(tmp_path, report, "fleet.json"), "--json")
    found = as_plan(printed)
    # Then the plan counts them, saying where each came from
    assert code == 0 and found.planned_swaps is not None
    assert (found.planned_swaps.recall, found.planned_swaps.recall_provenance) == (0.5, "measured")
    assert found.planned_swaps.lead_seconds == 7200 and found.planned_swaps.false_positive == 0.2 and found.planned_swaps.assumed == []
    assert json.loads(printed)["inputs"]["precursor_lead_seconds"]["source"] == "fleet drill: --lead-time"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--precursor-recall", "1.5"], "a number from 0 to 1"),
        (["--precursor-recall", "150%"], "a share from 0 to 1, or a percentage"),
        (["--precursor-recall", "nan"], "a number from 0 to 1"),
        (["--precursor-recall", "0.5", "--precursor-false-positive", "1"], "precursor_false_positive must be at most 0.99"),
        (["--precursor-lead", "soon"], "a duration of at most 30d"),
        (["--swap-lost", "-1"], "a duration of at most 30d"),
    ],
)
def test_precursor_figures_it_cannot_plan_with_are_refused_on_one_line(argv: list[str], said: str) -> None:
    code, printed, err = goodput("--nodes", "256", *argv)
    assert code == 2 and printed == ""
    assert said in err and err.count("\n") == 1 and "Traceback" not in err
