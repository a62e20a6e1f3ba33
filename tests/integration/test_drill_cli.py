"""`make drill` is `python -m sandbox run`: what a new user sees, including bad scenario files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.__main__ import main
from tests.conftest import EVENTS


def _write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "scenario.json"
    path.write_text(content)
    return path


@pytest.mark.sandbox
def test_default_drill_prints_a_timeline_and_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for milestone in ("event received", "nodes cordoned", "replace initiated", "node rejoined", "checkpoint chosen", "job resubmitted"):
        assert milestone in printed
    assert "outcome RECOVERED" in printed
    report = json.loads((tmp_path / "drill-default.json").read_text())
    assert report["incidents"][0]["outcome"] == "recovered"
    assert f"report: {tmp_path / 'drill-default.json'}" in printed
    assert (tmp_path / "drill-default-lambda.log").stat().st_size > 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"name": "x", "cluster": {"instance_groups": []}, "faults": []}', "cluster.instance_groups"),
        (
            json.dumps(
                {
                    **json.loads((EVENTS / "drills" / "default.json").read_text()),
                    "faults": [{"at": 1, "kind": "node_health", "node": "gpu:99"}],
                }
            ),
            "no instance group 'gpu'",
        ),
        (
            json.dumps(
                {
                    **json.loads((EVENTS / "drills" / "default.json").read_text()),
                    "faults": [{"at": 1, "kind": "node_health", "node": "workers:16"}],
                }
            ),
            "outside group 'workers' (count 16)",
        ),
        (json.dumps({**json.loads((EVENTS / "drills" / "default.json").read_text()), "surprise": 1}), "surprise"),
    ],
)
def test_bad_scenario_file_is_a_clear_error_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    assert main(["run", "--scenario", str(_write(tmp_path, content)), "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_missing_scenario_file_is_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenario", str(tmp_path / "nope.json")]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_job_failed_fault_must_name_a_job_of_the_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = json.loads((EVENTS / "drills" / "default.json").read_text())
    scenario["faults"] = [{"at": 1, "kind": "job_failed", "job": "9999"}]
    assert main(["run", "--scenario", str(_write(tmp_path, json.dumps(scenario))), "--out", str(tmp_path)]) == 2
    assert "faults.0.job: no job '9999'" in capsys.readouterr().err


def test_a_lost_response_for_a_function_the_template_lacks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = json.loads((EVENTS / "drills" / "default.json").read_text())
    scenario["behaviour"]["lost_responses"] = [{"function": "NoSuchFunction"}]
    assert main(["run", "--scenario", str(_write(tmp_path, json.dumps(scenario))), "--out", str(tmp_path)]) == 2
    assert "no function 'NoSuchFunction' in template.yaml" in capsys.readouterr().err
