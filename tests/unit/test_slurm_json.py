"""Every Slurm version's answers read to the same agent-level answers (agent/hyperpod_recovery_agent/slurm_json.py).

The fixtures are what real Slurm 22.05 and 24.11 printed for one cluster set up the same way
(tools/slurm_fixtures.py, which says what each node and job is): the agent's SlurmCli runs on each
version's files as it runs on a controller, and every answer it gives the workflow is held equal.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from hyperpod_recovery.models.commands import RunningJob
from hyperpod_recovery_agent.capture import scontrol_details
from hyperpod_recovery_agent.job_ended import failed_job_detail
from hyperpod_recovery_agent.output_paths import unexpanded
from hyperpod_recovery_agent.sbatch_options import SbatchOptions, sbatch_options
from hyperpod_recovery_agent.slurm import FreeNode, NodeState, SlurmCli, SlurmCommandFailed, parse_node_boots
from hyperpod_recovery_agent.slurm_json import (
    SHAPE_22_05,
    ExitStatus,
    Shape,
    SlurmOutputUnreadable,
    read_job,
    read_jobs,
    read_nodes,
    release_of,
    shape_of,
)
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
VERSIONS = ("22.05", "24.11")
OUR_REASON = "hyperpod-recovery: fixture drained by the pipeline"
ADMIN_REASON = "fixture: down by an admin"
# tools/slurm_fixtures.py's cluster, as the workflow must see it whichever Slurm runs it.
NODE_STATES = {
    "ip-10-1-0-1": NodeState("ip-10-1-0-1", "allocated"),
    "ip-10-1-0-2": NodeState("ip-10-1-0-2", "allocated", ("DRAIN",), OUR_REASON),
    "ip-10-1-0-3": NodeState("ip-10-1-0-3", "idle", ("DRAIN",), OUR_REASON),
    "ip-10-1-0-4": NodeState("ip-10-1-0-4", "down", (), ADMIN_REASON),
    "ip-10-1-0-5": NodeState("ip-10-1-0-5", "idle"),
}
JOB_STATES = {
    "fixture-running": "RUNNING",
    "fixture-draining": "RUNNING",
    "fixture-options": "PENDING",
    "fixture-gpus": "PENDING",
    "fixture-gpus-per-task": "PENDING",
    "fixture-gpu-bind": "PENDING",
    "fixture-copy": "PENDING",
    "fixture-completed": "COMPLETED",
    "fixture-failed": "FAILED",
    "fixture-killed": "FAILED",
}
ENDED = {"fixture-completed": ExitStatus(0, 0), "fixture-failed": ExitStatus(3, 0), "fixture-killed": ExitStatus(0, 9)}
SCRIPT = "#!/bin/bash\nsleep 100000\n"


class FixtureSlurm(SlurmCli):
    """SlurmCli whose commands answer with what one real Slurm version printed (tests/fixtures/slurm/<version>)."""

    def __init__(self, version: str) -> None:
        super().__init__(env={})
        self.files = FIXTURES / version
        self.asked: list[list[str]] = []

    def _run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.asked.append(argv)
        answers = {
            ("scontrol", "--version"): "version.txt",
            ("sinfo", "--json"): "sinfo.json",
            ("scontrol", "show", "nodes", "--json"): "scontrol-show-nodes.json",
            ("squeue", "--json", "--states=all"): "squeue.json",
            ("scontrol", "show", "node", "-o"): "scontrol-show-node-o.txt",
        }
        if tuple(argv[:2]) == ("scontrol", "write"):
            return subprocess.CompletedProcess(argv, 0, SCRIPT, "")
        if tuple(argv[:3]) == ("scontrol", "show", "hostnames"):
            return subprocess.CompletedProcess(argv, 0, "\n".join(argv[3].split(",")), "")
        if tuple(argv[:3]) == ("scontrol", "show", "config"):
            return subprocess.CompletedProcess(argv, 0, "StateSaveLocation = /nonexistent\n", "")
        name = answers.get(tuple(argv[:4] if argv[0] == "scontrol" and argv[1] == "show" else argv[:3]))
        if name is None or not (self.files / name).exists():
            return subprocess.CompletedProcess(argv, 1, "", f"{argv[0]}: invalid option for this fixture")
        return subprocess.CompletedProcess(argv, 0, (self.files / name).read_text(), "")


def jobs_of(version: str) -> dict[str, Any]:
    return {job.name: job for job in read_jobs(json.loads((FIXTURES / version / "squeue.json").read_text()))}


def same_paths(version: str, value: Any) -> Any:
    """The fixtures' job directory names its version: the one difference that is not Slurm's."""
    return json.loads(json.dumps(value).replace(f"hyperpod-recovery-slurm-fixtures-{version}", "JOBS"))


# --- the cluster's nodes ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_every_nodes_state_flags_and_reason_are_the_same_on_every_version(version: str) -> None:
    assert FixtureSlurm(version).all_node_states() == NODE_STATES


@pytest.mark.parametrize("version", VERSIONS)
def test_the_node_dump_comes_from_the_command_that_gives_one_on_that_version(version: str) -> None:
    slurm = FixtureSlurm(version)
    slurm.nodes()
    expected = ["sinfo", "--json"] if version == "22.05" else ["scontrol", "show", "nodes", "--json"]
    assert slurm.asked == [["scontrol", "--version"], expected]


@pytest.mark.parametrize("version", VERSIONS)
def test_only_the_idle_unflagged_node_is_free_with_its_partition_and_active_features(version: str) -> None:
    assert FixtureSlurm(version).free_nodes() == {"ip-10-1-0-5": FreeNode(("dev",), frozenset({"fast", "ib"}))}


@pytest.mark.parametrize("version", VERSIONS)
def test_drained_nodes_are_told_apart_by_who_drained_them(version: str) -> None:
    states = FixtureSlurm(version).all_node_states()
    assert [name for name, state in states.items() if state.drained_by_us] == ["ip-10-1-0-2", "ip-10-1-0-3"]


def test_sinfo_of_2311_and_later_is_refused_as_a_node_dump_not_read_as_no_nodes() -> None:
    # Given 24.11's sinfo --json (rows of alike nodes), When read as a node dump, Then it is refused, never "no nodes"
    for path in (FIXTURES / "24.11" / "sinfo-grouped.json", FIXTURES / "24.11" / "reference" / "sinfo.json"):
        with pytest.raises(SlurmOutputUnreadable, match="scontrol show nodes"):
            read_nodes(json.loads(path.read_text()))


def test_not_responding_nodes_of_unknown_state_read_as_such() -> None:
    # (../shared/reference/examples/slurm-24.11: two nodes whose slurmd never answered)
    nodes = read_nodes(json.loads((FIXTURES / "24.11" / "reference" / "scontrol-show-nodes.json").read_text()))
    assert {(n.name, n.state, n.flags) for n in nodes} == {
        ("ip-10-1-0-1", "unknown", ("NOT_RESPONDING",)),
        ("ip-10-1-0-2", "unknown", ("NOT_RESPONDING",)),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_boot_times_are_read_from_scontrols_text_alike(version: str) -> None:
    boots = parse_node_boots((FIXTURES / version / "scontrol-show-node-o.txt").read_text())
    assert [b.name for b in boots] == list(NODE_STATES) and all(b.boot_time is not None for b in boots)


# --- the jobs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_every_jobs_state_is_squeues_own_word_on_every_version(version: str) -> None:
    slurm = FixtureSlurm(version)
    assert {job.name: job.state for job in slurm.queue()} == JOB_STATES
    assert {name: slurm.job_state(job.job_id) for name, job in jobs_of(version).items()} == JOB_STATES


@pytest.mark.parametrize("version", VERSIONS)
def test_ended_jobs_are_listed_with_their_exit_code_signal_and_end_time(version: str) -> None:
    jobs = jobs_of(version)
    assert {name: jobs[name].exit for name in ENDED} == ENDED
    assert all(jobs[name].end_time for name in ENDED) and jobs["fixture-options"].end_time is None


@pytest.mark.parametrize("version", VERSIONS)
def test_the_check_lists_the_running_jobs_with_their_checkpoint_location(version: str) -> None:
    slurm = FixtureSlurm(version)
    assert slurm.node_count() == 5
    assert slurm.running_jobs(50) == (
        [
            RunningJob(job_id="1", name="fixture-running", checkpoint_uri="s3://fixture-bucket/run"),
            RunningJob(job_id="2", name="fixture-draining"),
        ],
        0,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_the_jobs_on_a_node_and_a_resubmission_are_found_alike(version: str) -> None:
    slurm = FixtureSlurm(version)
    [spec] = slurm.jobs_on(["ip-10-1-0-2"])
    assert (spec.job_id, spec.name, spec.state, spec.nodes, spec.num_nodes) == ("2", "fixture-draining", "RUNNING", ["ip-10-1-0-2"], 1)
    copy = jobs_of(version)["fixture-copy"].job_id
    assert slurm.resubmission_of("1") == (copy, "inc-fixture")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failed_job_becomes_the_same_job_failed_event(version: str) -> None:
    jobs, slurm = jobs_of(version), FixtureSlurm(version)
    for name, state, code, signal in (("fixture-failed", "FAILED", 3, 0), ("fixture-killed", "FAILED", 0, 9)):
        environ = {"SLURM_JOB_ID": jobs[name].job_id, "SLURM_JOB_NODELIST": "ip-10-1-0-5"}
        detail = failed_job_detail(environ, slurm, cluster_name="ci", report_timeout=False)
        assert detail is not None and (detail.state, detail.exit_code, detail.signal, detail.nodes) == (
            state,
            code,
            signal,
            ["ip-10-1-0-5"],
        )
    completed = {"SLURM_JOB_ID": jobs["fixture-completed"].job_id}
    assert failed_job_detail(completed, slurm, cluster_name="ci", report_timeout=False) is None


# --- what a resubmission asks for ------------------------------------------------------------------
def options_of(version: str, name: str) -> dict[str, Any]:
    details = scontrol_details((FIXTURES / version / "scontrol-show-job-options.txt").read_text()) if name == "fixture-options" else {}
    return same_paths(version, sbatch_options(jobs_of(version)[name], {}, details).model_dump())


@pytest.mark.parametrize("name", ["fixture-options", "fixture-gpus", "fixture-gpus-per-task", "fixture-running", "fixture-failed"])
def test_a_jobs_sbatch_options_read_the_same_on_every_version(name: str) -> None:
    assert options_of("24.11", name) == options_of("22.05", name)


def test_the_options_job_asks_again_for_what_it_was_submitted_with() -> None:
    options = SbatchOptions.model_validate(options_of("24.11", "fixture-options"))
    assert options.arguments(now=0) == [
        *("--partition=dev", "--account=acme", "--nodes=1-2", "--ntasks-per-node=1", "--cpus-per-task=1", "--mincpus=1", "--mem=100"),
        *("--gres=gpu:1", "--constraint=fast", "--exclusive", "--use-min-nodes", "--licenses=fluent:1", "--time=30"),
        *("--output=/tmp/JOBS/jobs/train-%j.out", "--error=/tmp/JOBS/jobs/train-%j.err", "--input=/dev/null"),
        *("--mail-user=trainer@example.com", "--mail-type=END,FAIL", "--no-requeue", "--nice=5", "--wckey=pretrain"),
        "--kill-on-invalid-dep=yes",
    ]


@pytest.mark.parametrize("name", ["fixture-copy", "fixture-gpu-bind"])
def test_a_pending_job_that_asked_for_no_node_count_is_the_one_answer_that_differs(name: str) -> None:
    # 22.05 shows max_nodes 0 (none asked: Slurm derives the count again); 24.11 shows the count it chose
    # as both (a copy asks for that count: the size slurmctld gave the original)
    assert (options_of("22.05", name)["nodes"], options_of("24.11", name)["nodes"]) == (None, "1")
    assert {k: v for k, v in options_of("24.11", name).items() if k != "nodes"} == {
        k: v for k, v in options_of("22.05", name).items() if k != "nodes"
    }


def test_gpu_binding_and_frequency_read_back_in_sbatchs_words() -> None:
    options = options_of("24.11", "fixture-gpu-bind")
    assert (options["gres"], options["gpu_bind"], options["gpu_freq"]) == ("gpu:1", "closest", "high")


# --- shapes, versions, paths -------------------------------------------------------------------------
@pytest.mark.parametrize(("version", "parser"), [("22.05", "v0.0.38"), ("24.11", "v0.0.42")])
def test_each_answer_names_its_printer(version: str, parser: str) -> None:
    shape = shape_of(json.loads((FIXTURES / version / "squeue.json").read_text()))
    assert shape.parser == parser and shape.release.startswith(version) and shape.expands_paths is (version == "24.11")


@pytest.mark.parametrize(("text", "release"), [("slurm-wlm 24.11.5\n", (24, 11, 5)), ("slurm 22.05.8", (22, 5, 8)), ("slurm", None)])
def test_the_release_is_read_from_scontrols_version(text: str, release: tuple[int, int, int] | None) -> None:
    assert release_of(text) == release


@pytest.mark.parametrize("version", VERSIONS)
def test_the_agent_names_the_version_it_reads(version: str) -> None:
    expected = (FIXTURES / version / "version.txt").read_text().split()[-1]
    assert FixtureSlurm(version).version() == expected


@pytest.mark.parametrize(
    ("expanded", "job_id", "pattern"),
    [
        ("/w/train-3.out", "3", "/w/train-%j.out"),
        ("/w/run-123/out-12.log", "12", "/w/run-123/out-%j.log"),  # a directory is never rewritten
        ("/w/out-123.log", "12", "/w/out-123.log"),  # a longer number is not the job id
        ("/w/100%-12.log", "12", "/w/100%%-%j.log"),  # a literal % stays literal for sbatch
        ("/dev/null", "7", "/dev/null"),
        ("", "7", ""),
    ],
)
def test_an_expanded_path_gets_its_job_id_back_as_a_pattern(expanded: str, job_id: str, pattern: str) -> None:
    assert unexpanded(expanded, job_id) == pattern


def test_slurms_default_output_reads_as_none_given_as_2205_shows_it() -> None:
    # (the reference capture: a job in / with no --output, printed //slurm-1.out)
    [job] = read_jobs(json.loads((FIXTURES / "24.11" / "reference" / "squeue.json").read_text()))
    assert (job.standard_output, job.standard_error, job.state, job.state_reason) == ("", "", "PENDING", "Resources")


def test_paths_of_2205_and_2505_are_kept_as_given() -> None:
    record = {"job_id": 3, "standard_output": "/w/train-3.out", "current_working_directory": "/w"}
    assert read_job(record, SHAPE_22_05).standard_output == "/w/train-3.out"
    assert read_job(record, Shape("v0.0.43")).standard_output == "/w/train-3.out"
    assert read_job(record, Shape("v0.0.42")).standard_output == "/w/train-%j.out"


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"job_id": 1, "time_limit": "90"}, "time_limit"),
        ({"job_id": 1, "job_state": 3}, "job_state"),
        ({"job_id": 1, "flags": "JOB_MEM_SET"}, None),  # (a string of words is read as words)
        ({"job_id": "x"}, "job_id"),
        ({"job_id": 1, "shared": ["none", "user"]}, "shared"),
    ],
)
def test_a_field_of_no_known_shape_is_refused_by_name(record: dict[str, Any], field: str | None) -> None:
    if field is None:
        assert read_job(record).flags == {"JOB_MEM_SET"}
        return
    with pytest.raises(SlurmOutputUnreadable, match=field):
        read_job(record)


def test_an_answer_that_is_not_json_fails_the_command_it_answers() -> None:
    class Garbled(FixtureSlurm):
        def _run(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(argv, 0, "<html>proxy error</html>", "")

    with pytest.raises(SlurmCommandFailed, match="cannot be read"):
        Garbled("22.05").queue()


def test_every_fixture_is_read_without_error() -> None:
    readers = {"squeue": read_jobs, "scontrol-show-jobs": read_jobs, "sinfo": read_nodes, "scontrol-show-nodes": read_nodes}
    read = [path for path in FIXTURES.rglob("*.json") if path.stem in readers and "sinfo" not in json.loads(path.read_text())]
    for path in read:
        assert readers[path.stem](json.loads(path.read_text())), path
    assert len(read) == 7


def test_scontrol_show_jobs_reads_as_squeue_does() -> None:
    by_squeue = read_jobs(json.loads((FIXTURES / "24.11" / "squeue.json").read_text()))
    by_scontrol = read_jobs(json.loads((FIXTURES / "24.11" / "scontrol-show-jobs.json").read_text()))
    assert sorted(by_scontrol, key=lambda j: int(j.job_id)) == sorted(by_squeue, key=lambda j: int(j.job_id))
