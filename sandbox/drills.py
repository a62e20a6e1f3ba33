"""Drills as a test suite: every scenario of a folder run through the sandbox, each held to its
``expect`` block (sandbox/expectations.py), a table on the terminal and JUnit XML for CI.

    python -m sandbox drills DIR [--junit FILE] [--out DIR] [--jobs N]   (make drills [DIR=...] [JUNIT=...] [JOBS=N])

The drills run in ``--jobs`` processes at once (default: the machine's cores); each drill is alone in
its process while it runs (one virtual clock, one in-memory AWS), and the lines, the table and the
JUnit XML come in the scenarios' sorted order whatever finishes first. Each drill's report is written
to the output folder as JSON and HTML, with an index.html of them all.

A scenario that cannot be loaded is an error case (not a reason to stop the others); a drill whose
sandbox fails is an error case with its exception. Exit code: 0 every drill met its expectations,
1 one did not (or errored), 2 bad usage (no such folder, no scenario in it).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, TextIO

from sandbox.expectations import IMPLICIT, Check, evaluate
from sandbox.fault_suite import cap_limit, most_out_at_once
from sandbox.html_report import render_html
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
    html: str | None = None  # its report page, in the output folder

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
    (out / f"drill-{scenario.name}.html").write_text(render_html(report, result.checks))
    result.html = f"drill-{scenario.name}.html"
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


def index_html(results: list[Result], suite: str) -> str:
    """The output folder's index: every drill's verdict, outcome and downtime, linking to its report."""
    passed = sum(r.verdict == "pass" for r in results)
    skipped = sum(r.verdict == "skipped" for r in results)
    rows = "".join(
        f'<tr class="{escape(r.verdict.lower())}"><td>{escape(r.verdict)}</td>'
        + (f'<td><a href="{escape(r.html)}">{escape(r.scenario)}</a></td>' if r.html else f"<td>{escape(r.scenario)}</td>")
        + f"<td>{escape(r.outcomes)}</td><td>{escape(r.downtime)}</td>"
        + f"<td>{escape(r.error or r.skipped or '; '.join(c.line for c in r.checks if not c.ok))}</td></tr>"
        for r in results
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(suite)}</title><style>{INDEX_STYLE}</style></head><body>"
        f"<h1>{escape(suite)}: {passed} passed, {len(results) - passed - skipped} failed, {skipped} skipped</h1>"
        "<table><thead><tr><th>verdict</th><th>scenario</th><th>outcome</th><th>job downtime</th><th>why</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></body></html>\n"
    )


INDEX_STYLE = """
body { font: 14px/1.4 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
tr.fail td:first-child, tr.error td:first-child { color: #fff; background: #a50026; }
tr.pass td:first-child { color: #fff; background: #00692d; }
"""


def _context() -> Any:
    """Fork where the platform has it: a worker starts with the drill's modules already imported
    (a spawned one imports moto again, seconds each); the parent runs no drill, so no thread is forked."""
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def run_folder(folder: Path, out: Path, junit_path: Path | None, printed: TextIO, jobs: int | None = None) -> int:
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise ScenarioError(f"{folder}: no scenario (*.json) in it")
    out.mkdir(parents=True, exist_ok=True)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(paths)))
    results = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) if workers > 1 else _InProcess() as pool:
        # (map yields in the order given: the lines come in sorted order whatever finishes first)
        for result in pool.map(run_one, paths, [out] * len(paths)):
            print(f"{result.verdict:7} {result.scenario} ({result.seconds:.1f} s)", file=printed, flush=True)
            results.append(result)
    print("", file=printed)
    table(results, printed)
    suite = f"drills:{folder.name}"
    (out / "index.html").write_text(index_html(results, suite))
    print(f"reports: {out / 'index.html'} (one page per drill)", file=printed)
    if junit_path is not None:
        junit_path.parent.mkdir(parents=True, exist_ok=True)
        junit_path.write_bytes(junit(results, suite=suite))
        print(f"JUnit XML: {junit_path}", file=printed)
    return 0 if all(r.verdict in ("pass", "skipped") for r in results) else 1


class _InProcess:
    """One drill at a time in this process (--jobs 1): the executor's map, without a pool."""

    def __enter__(self) -> _InProcess:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def map(self, function: Any, *iterables: Any) -> Any:
        return map(function, *iterables)
