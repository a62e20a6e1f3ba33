"""The releases between the two real fixtures (23.02, 23.11, 24.05), read through the public reader
as the agent reads them: each answer's ``meta`` written as that release writes it, from SchedMD/slurm's
sources at the release's tag (src/interfaces/data_parser.c ``_populate_cli_response_meta`` at
slurm-23-02-7-1; the OPENAPI_META parser of data_parser/v0.0.40 at slurm-23-11-10-1 and v0.0.41 at
slurm-24-05-8-1). Also: output paths as slurmctld's printer expands them (src/api/job_info.c
``_fname_format``), and unlimited time limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_recovery_agent.output_paths import unexpanded
from hyperpod_recovery_agent.sbatch_options import SbatchOptions, sbatch_options
from hyperpod_recovery_agent.slurm_json import SlurmOutputUnreadable, read_jobs, shape_of
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
COMMAND = ["squeue", "--json", "--states=all"]
# 23.02 writes "plugins" (plural) and "Slurm", its version numbers as integers.
META_23_02 = {
    "plugins": {"data_parser": "data_parser/v0.0.39", "accounting_storage": "accounting_storage/none"},
    "command": COMMAND,
    "Slurm": {"version": {"major": 23, "micro": 7, "minor": 2}, "release": "23.02.7"},
}


def _meta_2311_on(parser: str, release: str) -> dict[str, Any]:
    """23.11 and later: the OPENAPI_META parser's fields (its version numbers are strings)."""
    major, minor, micro = release.split(".")
    return {
        "plugin": {"type": "", "name": "", "data_parser": f"data_parser/{parser}", "accounting_storage": "accounting_storage/none"},
        "client": {"source": "", "user": "root", "group": "root"},
        "command": COMMAND,
        "slurm": {"version": {"major": major, "micro": micro, "minor": minor.lstrip("0") or "0"}, "release": release, "cluster": "ci"},
    }


METAS = {
    "23.02": META_23_02,
    "23.11": _meta_2311_on("v0.0.40", "23.11.10"),
    "24.05": _meta_2311_on("v0.0.41", "24.05.8"),
}
# One job as 23.02-24.05 print it (the fields that matter here): run in /w, submitted as a file whose
# path alone slurmctld reports, with --output=train-%j.out, printed expanded.
JOB = {
    "job_id": 42,
    "job_state": "FAILED",
    "batch_flag": True,
    "command": "/w/train.sh",
    "current_working_directory": "/w",
    "standard_output": "/w/train-42.out",
    "standard_error": "/w/train-42.out",
    "time_limit": {"set": True, "infinite": False, "number": 30},
}


@pytest.mark.parametrize("release", sorted(METAS))
def test_a_job_of_2302_2311_or_2405_gets_its_expanded_output_path_back_as_a_pattern(release: str) -> None:
    # Given squeue --json of a release between 22.05 and 24.11, as that release writes its meta
    # When the agent reads its jobs
    [job] = read_jobs({"meta": METAS[release], "errors": [], "warnings": [], "jobs": [JOB]})
    # Then the printed path is the job's pattern again (a copy writes its own file, never over the
    # failed job's log), and the error path that goes with the output reads as none
    assert (job.standard_output, job.standard_error) == ("/w/train-%j.out", "")


@pytest.mark.parametrize("release", sorted(METAS))
def test_a_job_of_2302_2311_or_2405_is_known_to_be_reported_without_its_scripts_arguments(release: str) -> None:
    [job] = read_jobs({"meta": METAS[release], "jobs": [JOB]})
    assert job.command_lists_arguments is False


@pytest.mark.parametrize(("release", "parser"), [("23.02", "v0.0.39"), ("23.11", "v0.0.40"), ("24.05", "v0.0.41")])
def test_each_release_is_read_with_the_parser_its_meta_names(release: str, parser: str) -> None:
    shape = shape_of({"meta": METAS[release]})
    assert (shape.parser, shape.release.startswith(release)) == (parser, True)


@pytest.mark.parametrize(
    ("release", "parser"),
    [("22.05.8", "v0.0.38"), ("23.02.7", "v0.0.39"), ("23.11.10", "v0.0.40"), ("24.05.8", "v0.0.41"), ("24.11.5", "v0.0.42"),
     ("25.05.1", "v0.0.43")],
)  # fmt: skip
def test_a_meta_naming_no_parser_is_read_with_the_parser_of_its_release(release: str, parser: str) -> None:
    # Given a meta that names the release only (its plugin fields left out), under either spelling
    for key in ("slurm", "Slurm"):
        assert shape_of({"meta": {key: {"release": release}}}).parser == parser


def test_a_meta_naming_neither_parser_nor_a_known_release_is_refused() -> None:
    for meta in ({"plugins": {}}, {"slurm": {"release": "21.08.8"}}, {"Slurm": {"release": "99.11.0"}}):
        with pytest.raises(SlurmOutputUnreadable, match="meta"):
            read_jobs({"meta": meta, "jobs": [JOB]})


# --- output paths as 23.02-24.11 print them ---------------------------------------------------------
@pytest.mark.parametrize(
    ("printed", "pattern"),
    [
        ("/w/train-0042.out", "/w/train-%4j.out"),  # %4j: zero-padded to 4
        ("/w/train-0000000042.out", "/w/train-%10j.out"),  # (the widest Slurm pads to)
        ("/w/train-42.out", "/w/train-%j.out"),  # %j, or %2j: the same file name
        ("/w/train-00421.out", "/w/train-00421.out"),  # another number
        ("/w/train-42-%N.out", "/w/train-%j-%N.out"),  # %N (node name): left for the job's step to expand
        ("/w/%n-%t-%s-%J-%5N.out", "/w/%n-%t-%s-%J-%5N.out"),
        ("/w/%N/train-42.out", "/w/%N/train-%j.out"),  # in a directory too
        ("/w/100%-42.out", "/w/100%%-%j.out"),  # a literal % (the job gave %%) stays literal
        ("/w/a%j-42.out", "/w/a%%j-%j.out"),  # %j printed: the job gave %%j
        ("/w/a%x.out", "/w/a%%x.out"),
        ("/w/%4N42.out", "/w/%4N%j.out"),  # an escape's width is not the job id
        ("/w/4242.out", "/w/%j%j.out"),  # %j%j
        ("/w/00420042.out", "/w/%4j%4j.out"),
    ],
)
def test_a_printed_path_is_handed_back_as_the_pattern_that_prints_it(printed: str, pattern: str) -> None:
    assert unexpanded(printed, "42") == pattern


def test_a_copy_of_a_job_with_a_padded_job_id_in_its_log_name_writes_a_file_of_its_own() -> None:
    [job] = read_jobs({"meta": META_23_02, "jobs": [{**JOB, "standard_output": "/w/train-0042.out", "standard_error": ""}]})
    options = sbatch_options(job, {}, {})
    assert options.output == "/w/train-%4j.out"


# --- unlimited time limits ----------------------------------------------------------------------------
def _options_of(version: str, name: str) -> SbatchOptions:
    [job] = [j for j in read_jobs(json.loads((FIXTURES / version / "squeue.json").read_text())) if j.name == name]
    return sbatch_options(job, {}, {})


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_an_unlimited_time_limit_is_asked_for_again_not_left_to_the_partitions_default(version: str) -> None:
    # Given a job whose time limit is UNLIMITED (fixture-draining: no --time, on a partition of MaxTime=INFINITE;
    # 22.05 prints it as null, 24.11 as {infinite: true})
    options = _options_of(version, "fixture-draining")
    # Then its copy asks for --time=UNLIMITED
    assert options.time_minutes == "UNLIMITED"
    assert "--time=UNLIMITED" in options.arguments(now=0)


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_a_time_limit_in_minutes_is_asked_for_in_minutes(version: str) -> None:
    assert "--time=90" in _options_of(version, "fixture-running").arguments(now=0)


@pytest.mark.parametrize(
    ("shape", "value", "expected"),
    [
        ("22.05", None, "UNLIMITED"),  # openapi/v0.0.38 prints INFINITE as null
        ("22.05", 0xFFFFFFFF, "UNLIMITED"),
        ("22.05", 0xFFFFFFFE, None),  # NO_VAL: unset
        ("23.02", {"set": False, "infinite": True, "number": 0}, "UNLIMITED"),
        ("23.02", {"set": False, "infinite": False, "number": 0}, None),
        ("23.02", {"set": True, "infinite": False, "number": 5}, 5),
    ],
)
def test_unlimited_is_told_apart_from_unset_on_each_shape(shape: str, value: object, expected: object) -> None:
    meta = META_23_02 if shape == "23.02" else {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}
    [job] = read_jobs({"meta": meta, "jobs": [{**JOB, "time_limit": value}]})
    assert sbatch_options(job, {}, {}).time_minutes == expected
    # (a record without the field at all: unset)
    [bare] = read_jobs({"meta": meta, "jobs": [{k: v for k, v in JOB.items() if k != "time_limit"}]})
    assert sbatch_options(bare, {}, {}).time_minutes is None
