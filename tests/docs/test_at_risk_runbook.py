"""docs/runbook.md "At-risk signals": what a user copies must be what At Risk reads. The example
alerting rule labels each alert by the convention and groups by a node label; the alert manager
config routes to SNS; the message the documented JSON template renders is read into a verdict's
report; the alarm's name and dimensions make a signal for its node; the AtRiskSignals example parses,
and the table of defaults is the code's."""

from __future__ import annotations

import json
import re
import shlex

import pytest
import yaml

from hyperpod_recovery.domain.at_risk.alertmanager import NODE_LABELS, SIGNAL_LABEL, parse_alertmanager
from hyperpod_recovery.domain.at_risk.cloudwatch import parse_alarm_notification
from hyperpod_recovery.domain.at_risk.settings import DEFAULTS, parse_signal_settings
from tests.conftest import ROOT
from tests.docs.markdown import parse

RUNBOOK = parse(ROOT / "docs" / "runbook.md")


def block(marker: str) -> str:
    (found,) = [b for b in RUNBOOK.blocks if b.marker == f"<!-- {marker} -->"]
    return found.text


def test_the_example_rules_each_name_a_signal_by_the_label_and_keep_a_node_label_in_their_expression() -> None:
    rules = yaml.safe_load(block("at-risk-rule"))["groups"][0]["rules"]
    assert len(rules) >= 2
    for rule in rules:
        assert re.fullmatch(r"[a-z][a-z0-9_]{0,47}", rule["labels"][SIGNAL_LABEL]), rule["alert"]
        kept = re.search(r"by \(([^)]*)\)", rule["expr"])
        assert kept is not None and set(kept[1].replace(" ", "").split(",")) & set(NODE_LABELS), rule["alert"]


def test_the_example_alert_manager_config_routes_to_an_sns_topic_with_its_region() -> None:
    config = yaml.safe_load(yaml.safe_load(block("at-risk-alertmanager"))["alertmanager_config"])
    (receiver,) = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"].startswith("arn:aws:sns:") and sns["sigv4"]["region"]  # (AMP requires the region)


def test_the_message_the_runbook_shows_is_read_into_one_report_for_its_node() -> None:
    (report,), skipped = parse_alertmanager(block("at-risk-message"), {})
    assert (report.signal, report.instance_id, report.cluster, skipped) == ("row_remap_pending", "i-0a1b2c3d4e5f60718", "llm-train", {})


def test_the_example_alarm_makes_a_signal_for_its_instance() -> None:
    argv = shlex.split(block("at-risk-alarm").replace("\\\n", " "))
    options = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    after = argv[argv.index("--dimensions") + 1 :]
    dimensions = [dict(part.split("=", 1) for part in d.split(",")) for d in after if d.startswith("Name=")]
    message = {
        "AlarmName": options["--alarm-name"],
        "NewStateValue": "ALARM",
        "StateChangeTime": "2026-11-29T09:00:00.000+0000",
        "Trigger": {"Dimensions": [{"name": d["Name"], "value": d["Value"]} for d in dimensions]},
    }
    report = parse_alarm_notification(json.dumps(message))
    assert report is not None and (report.signal, report.instance_id) == ("thermal", "i-0a1b2c3d4e5f60718")


def test_the_settings_example_parses_and_enforces_what_it_says() -> None:
    settings = parse_signal_settings(block("at-risk-settings").strip())
    assert settings.of("row_remap_failure").mode == "enforce" and settings.of("thermal").mode == "observe"


@pytest.mark.parametrize("signal", sorted(DEFAULTS))
def test_the_runbooks_table_of_defaults_is_the_codes(signal: str) -> None:
    section = (ROOT / "docs" / "runbook.md").read_text().split("**Modes, priors, horizons**", 1)[1].split("<!-- at-risk-settings -->", 1)[0]
    name = "any other (`*`)" if signal == "*" else f"`{signal}`"
    (row,) = [line for line in section.splitlines() if line.startswith("|") and name in line]
    names = [n.strip(" `") for n in row.split("|")[1].split(",")] if signal != "*" else ["*"]
    prior, horizons = row.split("|")[2].strip(), row.split("|")[3].replace("days", "").split(",")
    setting = DEFAULTS[signal]
    assert float(prior) == setting.prior
    assert int(horizons[names.index(signal)].strip()) * 86400 == setting.horizon_seconds
