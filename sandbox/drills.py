"""Drills as a test suite: every scenario of a folder run through the sandbox, each held to its
``expect`` block (sandbox/expectations.py), a table on the terminal and JUnit XML for CI.

    python -m sandbox drills DIR [--junit FILE] [--out DIR]      (make drills [DIR=...] [JUNIT=...])

A scenario that cannot be loaded is an error case (not a reason to stop the others); a drill whose
sandbox fails is an error case with its exception. Exit code: 0 every drill met its expectations,
1 one did not (or errored), 2 bad usage (no such folder, no scenario in it).
"""

from __future__ import annotations

import json
import re
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sandbox.expectations import IMPLICIT, Check, evaluate
from sandbox.fault_suite import cap_limit, most_out_at_once
from sandbox.runner import DrillRunner
from sandbox.scenario import Scenario, ScenarioError, load_scenario

# Drills that need what the sandbox cannot give them here (a real slurmctld): run by their own tests.
NEEDS_REAL_SLURM = frozenset({"real-slurm"})


def check_drill(scenario: Scenario, report: dict[str, Any]) -> list[Check]:
    """The scenario's expectations (or the implicit ones) against its drill's report."""
    return evaluate(scenario.expect or IMPLICIT, report, cap_limit(scenario), most_out_at_once(report))


@dataclass
class Result:
    scenario: str
    path: Path
    seconds: float = 0.0
    checks: list[Check] = field(default_factory=list)
    error: str | None = None  # the scenario could not be loaded, or the sandbox failed
    outcomes: str = "-"
    downtime: str = "-"
    skipped: str | None = None

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "ERROR"
        return "pass" if all(c.ok for c in self.checks) else "FAIL"


def _outcomes(report: dict[str, Any]) -> str:
    counts = Counter(i["outcome"] for i in report["incidents"])
    return ", ".join(f"{o} x{n}" if n > 1 else o for o, n in sorted(counts.items())) or "no incident"


def _downtime(report: dict[str, Any]) -> str:
    downs = [j.get("downtime_seconds") for j in report.get("jobs", []) if j.get("fault_at") is not None]  # the jobs a fault hit
    if not downs:
        return "-"
    if any(d is None for d in downs):
        return "not running"
    return f"{max(downs):.1f} s" + (f" (max of {len(downs)})" if len(downs) > 1 else "")


def run_one(path: Path, out: Path) -> Result:
    result = Result(scenario=path.stem, path=path)
    started = time.perf_counter()
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        result.error = f"scenario not loaded: {exc}"
        return result
    result.scenario = scenario.name
    if scenario.name in NEEDS_REAL_SLURM:
        result.skipped = "needs a real slurmctld (make drill SLURM=real)"
        return result
    try:
        report = DrillRunner(scenario, log_path=out / f"drill-{scenario.name}-lambda.log").run()
    except Exception as exc:  # a sandbox failure is this case's error, not the suite's end
        result.error = "".join(traceback.format_exception_only(exc)).strip()
        return result
    finally:
        result.seconds = time.perf_counter() - started
    (out / f"drill-{scenario.name}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    result.checks = check_drill(scenario, report)
    result.outcomes, result.downtime = _outcomes(report), _downtime(report)
    return result


def table(results: list[Result], printed: TextIO) -> None:
    rows = [["SCENARIO", "OUTCOME", "JOB DOWNTIME", "VERDICT"]]
    rows += [[r.scenario, r.outcomes, r.downtime, r.verdict] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=printed)
    for r in results:
        for check in r.checks:
            if not check.ok:
                print(f"{r.scenario}: {check.line}", file=printed)
        if r.error:
            print(f"{r.scenario}: ERROR {r.error}", file=printed)
    passed = sum(r.verdict == "pass" for r in results)
    skipped = sum(r.verdict == "skipped" for r in results)
    print(f"\n{passed} passed, {len(results) - passed - skipped} failed, {skipped} skipped", file=printed)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """Text XML 1.0 can carry: a control character (an ANSI colour in a sandbox error) is written as
    its escape, or every CI reader refuses the whole file."""
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def junit(results: list[Result], suite: str) -> bytes:
    """JUnit XML as Jenkins, GitLab and GitHub's test reporters read it: a testsuite of testcases, a
    <failure> per failed expectation (message: the first; text: all), <error> for a case that could
    not run, <skipped> for one that needs what is not here."""
    failed = [r for r in results if r.verdict == "FAIL"]
    errors = [r for r in results if r.verdict == "ERROR"]
    root = ET.Element(
        "testsuite",
        name=_xml(suite),
        tests=str(len(results)),
        failures=str(len(failed)),
        errors=str(len(errors)),
        skipped=str(sum(r.verdict == "skipped" for r in results)),
        time=f"{sum(r.seconds for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(
            root, "testcase", classname=_xml(suite), name=_xml(r.scenario), file=_xml(str(r.path)), time=f"{r.seconds:.3f}"
        )
        broken = [c for c in r.checks if not c.ok]
        if r.skipped:
            ET.SubElement(case, "skipped", message=_xml(r.skipped))
        elif r.error:
            ET.SubElement(case, "error", message=_xml(r.error.splitlines()[0][:500]), type="DrillError").text = _xml(r.error)
        elif broken:
            failure = ET.SubElement(case, "failure", message=_xml(broken[0].line[:500]), type="ExpectationFailed")
            failure.text = _xml("\n".join(c.line for c in r.checks))
        lines = "\n".join(c.line for c in r.checks)
        ET.SubElement(case, "system-out").text = _xml(f"outcome: {r.outcomes}\njob downtime: {r.downtime}\n{lines}")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def run_folder(folder: Path, out: Path, junit_path: Path | None, printed: TextIO) -> int:
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise ScenarioError(f"{folder}: no scenario (*.json) in it")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for path in paths:
        result = run_one(path, out)
        print(f"{result.verdict:7} {result.scenario} ({result.seconds:.1f} s)", file=printed, flush=True)
        results.append(result)
    print("", file=printed)
    table(results, printed)
    if junit_path is not None:
        junit_path.parent.mkdir(parents=True, exist_ok=True)
        junit_path.write_bytes(junit(results, suite=f"drills:{folder.name}"))
        print(f"JUnit XML: {junit_path}", file=printed)
    return 0 if all(r.verdict in ("pass", "skipped") for r in results) else 1
