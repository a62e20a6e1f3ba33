"""Lines of README.md, docs/runbook.md and the Makefile that the code used to contradict (issue 31,
section 7), held to what the code does."""

from __future__ import annotations

import re

from hyperpod_recovery.domain.messages.advice import ERROR_MEANING
from sandbox.template import load_template
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
RUNBOOK = (ROOT / "docs" / "runbook.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
TEMPLATE = load_template(ROOT / "template.yaml")


def _bench_scripts() -> list[str]:
    recipe = MAKEFILE.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"bench/[a-z_]+\.py", recipe)


def test_given_make_bench_when_the_readme_describes_it_then_it_names_every_benchmark_it_runs_and_how_long_it_takes() -> None:
    paragraph = README.split("`make bench`", 1)[1].split("CI runs", 1)[0]
    assert len(_bench_scripts()) == 7 and "seven benchmarks" in paragraph
    for script in _bench_scripts():
        assert f"`{script}`" in paragraph, script
    assert re.search(r"takes \d+ to \d+ minutes", paragraph)


def test_given_make_help_when_it_lists_bench_then_it_says_how_long_it_takes() -> None:
    help_line = next(line for line in MAKEFILE.splitlines() if line.startswith("bench:"))
    assert re.search(r"\d+-\d+ min", help_line.split("##", 1)[1])


def test_given_both_orchestrators_the_template_allows_when_the_runbook_describes_the_cluster_check_then_it_names_both() -> None:
    allowed = TEMPLATE["Parameters"]["Orchestrator"]["AllowedValues"]
    row = next(line for line in RUNBOOK.splitlines() if line.startswith("| `cluster` |"))
    assert "Slurm-orchestrated" not in row
    for orchestrator in allowed:
        assert orchestrator.upper() in row.upper(), orchestrator
    assert "`Orchestrator`" in row and "`EksClusterName`" in row


def test_given_an_unsupported_orchestrator_escalation_when_a_human_reads_what_to_do_then_it_names_the_parameters_to_redeploy_with() -> None:
    # The error means "not the orchestrator the stack was deployed for" (domain/nodes/assess.py), not a
    # release that recovers one orchestrator only.
    row = next(line for line in RUNBOOK.splitlines() if line.startswith("| `UnsupportedOrchestrator` |"))
    for text in (ERROR_MEANING["UnsupportedOrchestrator"], row):
        assert "not one this release recovers" not in text
        assert "Orchestrator" in text and "EksClusterName" in text
    for parameter in ("Orchestrator", "EksClusterName"):
        assert parameter in TEMPLATE["Parameters"]


def test_given_an_eks_stack_when_the_runbook_says_how_to_pause_without_a_deploy_then_the_failed_job_poller_is_among_the_rules() -> None:
    pause = RUNBOOK.split("**Pause now, without a deploy:**", 1)[1].split("\n- **", 1)[0]
    events = TEMPLATE["Resources"]["FindFailedJobsFunction"]["Properties"]["Events"]
    assert [name for name, event in events.items() if event["Type"] == "Schedule"] == ["EveryMinute"]
    assert "`FindFailedJobsFunctionEveryMinute`" in pause


def test_given_the_stacks_alarms_when_the_readme_counts_them_then_the_count_is_the_templates() -> None:
    ordinal_counts = {1: "one", 2: "two", 3: "three"}
    alarms = [r for r in TEMPLATE["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    always = sum(1 for alarm in alarms if "Condition" not in alarm)
    on_eks = always + sum(1 for alarm in alarms if alarm.get("Condition") == "IsEks")
    with_pagerduty = always + sum(1 for alarm in alarms if alarm.get("Condition") == "HasPagerDuty")
    on_hangs = sum(1 for alarm in alarms if alarm.get("Condition") == "DetectsHangs")
    assert len(alarms) == always + (on_eks - always) + (with_pagerduty - always) + on_hangs, (
        "an alarm under another condition: say it in the README"
    )
    assert f"with hang detection on (the default) {ordinal_counts[on_hangs]} more" in README
    numbers = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten", 11: "eleven"}
    ordinals = {7: "a seventh", 8: "an eighth", 9: "a ninth", 10: "a tenth", 11: "an eleventh", 12: "a twelfth"}
    assert f"{numbers[always]} alarms that notify" in README
    assert f"on EKS {ordinals[on_eks]}" in README
    assert f"with PagerDuty {ordinals[with_pagerduty]}" in README


def test_given_a_private_eks_endpoint_when_the_readme_lists_what_the_functions_reach_then_it_agrees_with_the_runbook() -> None:
    row = next(line for line in README.splitlines() if line.startswith("| `KubernetesSubnetIds`"))
    assert "path to STS" not in row  # the runbook: STS is not needed (the token is presigned in the function)
    for service in ("EKS", "SageMaker", "Step Functions", "DynamoDB"):
        assert service in row
