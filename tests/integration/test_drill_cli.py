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


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Runs `python -m sandbox` expecting a refusal: exit 2, one line on stderr, nothing on stdout."""
    assert main(list(argv)) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.count("\n") == 1 and printed.err.startswith("error: "), printed
    assert "Traceback" not in printed.err and printed.err[:-1].isprintable(), printed.err
    return printed.err


def test_given_a_folder_as_the_scenario_then_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `make drill SCENARIO=events/drills` (the folder, not a file in it)
    err = _refused(capsys, "run", "--scenario", str(EVENTS / "drills"), "--out", str(tmp_path))
    assert "is a directory" in err and "events/drills/default.json" in err


def test_given_an_out_that_is_a_file_then_one_line_exit_2_and_the_file_is_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `make drill OUT=README.md`: an existing file where the report's folder belongs
    readme = tmp_path / "README.md"
    readme.write_text("# keep me\n")
    err = _refused(capsys, "run", "--out", str(readme))
    assert "--out" in err and "not a directory" in err and readme.read_text() == "# keep me\n"


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"\xff\xfe\x00", "not a UTF-8 text file"), (b"[" * 100_000, "nested too deeply"), (b'{"name": "x\\u001b[2J"}', "cluster")],
    ids=["binary", "deep", "escape in a value"],
)
def test_given_an_unreadable_scenario_then_one_printable_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str
) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(content)
    assert says in _refused(capsys, "run", "--scenario", str(path), "--out", str(tmp_path))


def test_given_many_problems_then_they_are_one_line_naming_each_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = json.loads((EVENTS / "drills" / "default.json").read_text())
    scenario["faults"] = [1, {"at": 1, "kind": "node_health", "node": 7}]
    scenario["surprise\n\x1b[2J"] = 1
    err = _refused(capsys, "run", "--scenario", str(_write(tmp_path, json.dumps(scenario))), "--out", str(tmp_path))
    assert "faults.0" in err and "faults.1.node" in err and "surprise\\n\\x1b[2J" in err


@pytest.mark.parametrize(
    ("job", "field"),
    [
        ({"kubernetes": {"kind": "PyTorchJob"}}, "jobs.0.kubernetes"),
        ({"kubernetes": {}}, "jobs.0.kubernetes"),
    ],
)
def test_given_a_kubernetes_job_spec_in_a_slurm_scenario_then_it_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: dict[str, object], field: str
) -> None:
    # Given a Slurm scenario whose job carries an EKS job's object (it would be ignored: nothing models it)
    scenario = json.loads((EVENTS / "drills" / "default.json").read_text())
    scenario["jobs"][0] |= job
    err = _refused(capsys, "run", "--scenario", str(_write(tmp_path, json.dumps(scenario))), "--out", str(tmp_path))
    assert field in err and "EKS only" in err


@pytest.mark.parametrize("field", ["batch", "script_bytes", "comment"])
def test_given_a_slurm_job_field_in_an_eks_scenario_then_it_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    # Given an EKS scenario whose job sets what only a Slurm job has (a batch script, its comment)
    scenario = json.loads((EVENTS / "drills" / "eks-default.json").read_text())
    scenario["jobs"][0][field] = {"batch": False, "script_bytes": 4096, "comment": "resume=after_rejoin"}[field]
    err = _refused(capsys, "run", "--scenario", str(_write(tmp_path, json.dumps(scenario))), "--out", str(tmp_path))
    assert f"jobs.0.{field}" in err and "Slurm only" in err


def test_given_bad_usage_then_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--scenario"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "--scenario" in err and "--help" in err
