"""``hyperpod-recovery goodput`` from the command line and from files: the table, --json, --html,
which figure wins, and a one-line refusal (exit code 2) for every input it cannot plan with."""

from __future__ import annotations

import contextlib
import io
import json
import re
from html import unescape
from pathlib import Path

import pytest

from hyperpod_recovery_cli.main import main
from hyperpod_recovery_cli.planner.model import GoodputPlan, PlannerInputs

LLAMA3 = ["--nodes", "2048", "--failure-rate", "llama3", "--checkpoint-interval", "30m", "--checkpoint-cost", "60s"]
PHASES_15_MIN = ["--detect", "5m", "--cordon", "1m", "--replace", "1m", "--rejoin", "5m", "--health-gate", "2m", "--restart", "1m"]
INPUTS = {
    "nodes": 256,
    "failure_rate": {"per_1000_node_days": 3.79, "provenance": "measured", "source": "fleet drill, 54 days"},
    "phases_seconds": {
        "detect": {"value": 120, "provenance": "measured", "source": "fleet drill p50"},
        "cordon": 30,
        "replace": 30,
        "rejoin": 600,
        "health_gate": 120,
        "restart": 0,
    },
    "checkpoint_interval_seconds": 1800,
    "checkpoint_cost_seconds": 60,
    "job_sizes": [256, 32],
}


def goodput(*argv: str) -> tuple[int, str, str]:
    """Exit code, stdout, stderr; argparse's own refusals (SystemExit, on sys.stderr) included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(["goodput", *argv], stdout=out, stderr=err)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def as_plan(printed: str) -> GoodputPlan:
    return GoodputPlan.model_validate_json(printed)


def write(tmp_path: Path, document: object, name: str = "inputs.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


# --- given on the command line -------------------------------------------------------------------
def test_given_llama3_scale_on_the_command_line_then_the_table_shows_the_published_ettr_interval_and_every_phase() -> None:
    # When the planner runs for 2,048 nodes at Llama 3's rate, τ = 30 min, δ = 60 s, 15 min of recovery
    code, printed, err = goodput(*LLAMA3, *PHASES_15_MIN)
    # Then it prints ETTR 82.01 % (the research note's table C), Daly's 18.6 min, and each phase given
    assert code == 0 and err == ""
    assert "ETTR 82.01 % (Daly)" in printed and "Daly 18.6 min" in printed
    for phase in ("detect", "cordon", "replace", "rejoin", "health_gate", "restart"):
        assert re.search(rf"^{phase}\s+.*given: command line$", printed, re.MULTILINE), phase
    # And every model is named with its assumptions
    assert printed.count("assumes:") == 6  # ETTR, phases, interval, spares, shrink, ceilings


def test_given_json_then_the_plan_is_the_model_with_each_figures_provenance() -> None:
    code, printed, _ = goodput(*LLAMA3, *PHASES_15_MIN, "--json")
    plan = as_plan(printed)
    assert code == 0 and round(100 * plan.ettr.ettr, 2) == 82.01
    assert plan.inputs.nodes.provenance == "given" and plan.inputs.failure_rate.source.startswith("Llama 3")
    assert all(p.provenance == "given" for p in plan.phases)


def test_given_no_phases_then_the_stated_defaults_are_used_and_said() -> None:
    # When only the cluster's size is given
    code, printed, _ = goodput("--nodes", "256", "--json")
    plan = as_plan(printed)
    # Then every phase, the rate and the checkpointing are defaults with their source, and a warning says so
    assert code == 0
    assert all(p.provenance == "default" and p.source for p in plan.phases)
    assert plan.inputs.failure_rate.provenance == "default"
    assert any("assumed: detect, cordon" in w and "checkpoint interval" in w for w in plan.warnings)


def test_given_spares_and_a_repair_window_then_the_share_of_failures_finding_none_is_said() -> None:
    code, printed, _ = goodput("--nodes", "256", "--failure-rate", "3.79", "--repair", "2d", "--spares", "6")
    assert code == 0
    assert "keep 7 (99 % of failures find one): 1.94 nodes in repair on average, 6 at P99; with 6 now" in printed


# --- from a file ---------------------------------------------------------------------------------
def test_given_a_bare_inputs_file_then_its_figures_are_used_with_their_provenance_or_the_file_as_source(tmp_path: Path) -> None:
    code, printed, _ = goodput("--from", write(tmp_path, INPUTS), "--json")
    plan = as_plan(printed)
    assert code == 0
    detect, cordon = plan.phases[0], plan.phases[1]
    assert (detect.provenance, detect.source) == ("measured", "fleet drill p50")
    assert (cordon.provenance, cordon.source) == ("given", "file inputs.json")
    assert [j.job_nodes for j in plan.job_sizes] == [256, 32]


def test_given_a_report_holding_goodput_inputs_then_the_planner_reads_that_key(tmp_path: Path) -> None:
    # Given a fleet-drill report with its own fields and the planner's inputs under goodput_inputs
    report = {"summary": {"ettr": 0.95}, "incidents": [1, 2, 3], "goodput_inputs": INPUTS}
    # When the planner reads it
    code, printed, _ = goodput("--from", write(tmp_path, report, "fleet.json"), "--json")
    # Then it plans from the embedded inputs
    assert code == 0 and as_plan(printed).inputs.failure_rate.source == "fleet drill, 54 days"


def test_given_a_file_and_the_command_line_then_the_command_line_wins_for_its_figures_only(tmp_path: Path) -> None:
    code, printed, _ = goodput("--from", write(tmp_path, INPUTS), "--rejoin", "60", "--json")
    plan = as_plan(printed)
    by_phase = {p.phase: p for p in plan.phases}
    assert code == 0
    assert (by_phase["rejoin"].seconds, by_phase["rejoin"].source) == (60, "command line")
    assert by_phase["detect"].source == "fleet drill p50"


def test_a_files_source_text_cannot_drive_the_terminal_or_the_page(tmp_path: Path) -> None:
    # Given a file whose source holds an escape sequence and markup
    hostile = INPUTS | {"nodes": {"value": 256, "source": "\x1b[2J<script>alert(1)</script>"}}
    page = tmp_path / "plan.html"
    code, printed, _ = goodput("--from", write(tmp_path, hostile), "--html", str(page))
    # Then the terminal shows the escape escaped, and the page shows the markup as text
    assert code == 0 and "\x1b" not in printed and "\\x1b[2J<script>" in printed
    html = page.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- HTML ---------------------------------------------------------------------------------------
def test_given_html_then_one_offline_page_holds_both_curves_with_the_measured_point(tmp_path: Path) -> None:
    page = tmp_path / "plan.html"
    # When the plan is written as HTML
    code, printed, _ = goodput(*LLAMA3, *PHASES_15_MIN, "--html", str(page))
    html = page.read_text()
    # Then the page has the two curves, each with its point marked at the plan's own figures
    assert code == 0 and f"written: {page}" in printed
    curves = re.findall(r'<svg class="curve" data-x-label="([^"]+)"', html)
    assert curves == ["recovery time per failure (min)", "checkpoint interval (min)"]
    marked = re.findall(r'<circle class="measured" data-x="([0-9.]+)" data-ettr="([0-9.]+)"', html)
    assert [(float(x), round(100 * float(e), 2)) for x, e in marked] == [(15.0, 82.01), (30.0, 82.01)]
    # And the interval curve marks its best, Daly's 18.6 min
    (best,) = re.findall(r'<circle class="best" data-x="([0-9.]+)"', html)
    assert round(float(best), 1) == 18.6
    # And nothing is fetched: no script, no stylesheet or image link, no URL but the SVG namespace
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert set(re.findall(r"https?://[^\"' <]+", html)) == {"http://www.w3.org/2000/svg"}
    # And it names the models and their assumptions (the changes' too)
    assert html.count('class="model"') == 7  # ETTR, phases, interval, spares, shrink, changes, ceilings
    # And it says what to change in the terminal's own sentences
    block = printed.split("what to change", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    said = [" ".join(line.split()) for line in block]
    shown = [" ".join(unescape(item).replace(": ", " ", 1).split()) for item in re.findall(r'<li class="change">(.*?)</li>', html)]
    assert said and shown == said


# --- refusals -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "the cluster's size is unknown"),
        (["--nodes", "256", "--detect", "soon"], "a duration of at most 30d"),
        (["--nodes", "256", "--failure-rate", "-1"], "failures per 1,000 node-days"),
        (["--nodes", "256", "--failures", "3"], "--failures and --node-days go together"),
        (["--nodes", "256", "--failure-rate", "2", "--failures", "3", "--node-days", "9"], "one of them"),
        (["--nodes", "256", "--job-nodes", "512"], "larger than the cluster"),
        (["--nodes", "0"], "nodes must be 1 or more"),
        (["--nodes", "256", "--checkpoint-interval", "0"], "more than 0"),
        (["--nodes", "256", "--since", "7d"], "--since is the window of --stack"),
        (["--nodes", "256", "--job", "x"], "--job picks the manifests"),
        (["--nodes", "256", "--checkpoint-prefix", "s3://b/p", "--checkpoint-interval", "1h"], "given or measured, not both"),
        (["--nodes", "256", "--checkpoint-prefix", "not-s3"], "--checkpoint-prefix: not an s3:// URI"),
        (["--stack", "s", "--from", "f.json"], "--stack or --from"),
        (["--nodes", "256", "--html", "/nonexistent-dir/plan.html"], "--html /nonexistent-dir/plan.html: cannot be written"),
    ],
)
def test_inputs_it_cannot_plan_with_are_refused_on_one_line_with_exit_code_2(argv: list[str], said: str) -> None:
    code, printed, err = goodput(*argv)
    assert code == 2 and printed == ""
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a planner-inputs object"),
        (json.dumps({"summary": {}}), "unknown field(s) 'summary'"),
        (json.dumps({"goodput_inputs": "x"}), "not a planner-inputs object"),
        (json.dumps(INPUTS | {"nodes": -3}), "nodes"),
        (json.dumps(INPUTS | {"phases_seconds": {"detect": "fast"}}), "phases_seconds.detect"),
    ],
)
def test_a_file_it_cannot_plan_with_is_refused_naming_what_is_wrong(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, _, err = goodput("--from", str(path))
    assert code == 2 and said in err and err.count("\n") == 1


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    code, _, err = goodput("--from", str(tmp_path / "absent.json"))
    assert code == 2 and "cannot be read" in err


def test_a_report_written_from_the_model_reads_back_as_the_same_inputs(tmp_path: Path) -> None:
    # Given planner inputs as the fleet drill holds them, written the way docs/goodput.md says
    inputs = PlannerInputs.model_validate(INPUTS | {"spare_nodes": 2})
    report = {"fleet": "2048 nodes, 54 days", "goodput_inputs": inputs.model_dump(mode="json")}
    # When the planner reads the report
    code, printed, _ = goodput("--from", write(tmp_path, report, "fleet.json"), "--json")
    # Then it plans from those inputs: the same figures and provenance, the file named where a figure had no source
    read = as_plan(printed).inputs
    assert code == 0 and without_sources(read.model_dump()) == without_sources(inputs.model_dump())
    assert read.phases_seconds["detect"].source == "fleet drill p50" and read.phases_seconds["cordon"].source == "file fleet.json"


def without_sources(value: object) -> object:
    if isinstance(value, dict):
        return {key: without_sources(item) for key, item in value.items() if key != "source"}
    return value
