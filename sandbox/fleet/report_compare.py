"""Fleet runs side by side (issue 50): ETTR and where the rest went, per run, without planned swaps and
with them at several recalls; the ceiling each assumption sets, as the goodput planner computes it for
the runs' inputs (so an assumption is not read as a result); and, for the goal set, PASS or FAIL per goal.
Terminal lines, a JSON document and an offline HTML page."""

from __future__ import annotations

from html import escape
from typing import Any

from hyperpod_recovery_cli.planner.sentences import ceiling_lines, pct
from sandbox.fleet.compare import GOAL_DAYS, GOAL_ETTR, GOAL_NODES, GOAL_RECALL
from sandbox.fleet.goodput import planned
from sandbox.fleet.swaps import PLANNED_PARTS
from sandbox.fleet.trace import RATES

PARTS = ("lost_work", "provisioning_wait", "restart", "checkpoint_cost", "pipeline", "detection", *PLANNED_PARTS)
PART_NAMES = {
    "lost_work": "lost work",
    "provisioning_wait": "provisioning wait",
    "restart": "restart",
    "checkpoint_cost": "checkpoints",
    "pipeline": "pipeline",
    "detection": "detection",
    "swaps": "swaps",
    "false_alarms": "false alarms",
    "shrunk": "shrunk",
}


def _weighted(report: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """The run's ETTR and points lost per part, its jobs weighted by their nodes."""
    jobs = report["jobs"]
    nodes = sum(job["nodes"] for job in jobs)
    ettr = sum(job["ettr"] * job["nodes"] for job in jobs) / nodes
    points = {part: sum(job["ettr_points_lost"].get(part, 0.0) * job["nodes"] for job in jobs) / nodes for part in PARTS}
    return ettr, points


def row(report: dict[str, Any]) -> dict[str, Any]:
    """One run as the comparison shows it."""
    ettr, points = _weighted(report)
    spec = report["run"]["spec"]
    plan = report["plan"]
    precursors = report.get("precursors", {})
    return {
        "label": report["run"]["label"],
        "job_kind": spec["job_kind"],
        "planned_swaps": spec["planned_swaps"],
        "recall": spec["recall"],
        "recommended": spec["recommended"],
        "spares": plan["spares"],
        "checkpoint_interval_seconds": plan["checkpoint_interval_seconds"],
        "ettr": round(ettr, 5),
        "points_lost": {part: round(value, 3) for part, value in points.items()},
        "hits": sum(job["hits"] for job in report["jobs"]),
        "swaps": sum(job.get("planned_swaps", 0) for job in report["jobs"]),
        "false_alarm_swaps": sum(job.get("false_alarm_swaps", 0) for job in report["jobs"]),
        "signals_sent": precursors.get("signals_sent", 0),
        "failures_averted": precursors.get("failures_averted", 0),
        "pages": report["pages"]["total"],
        "second_copies": len(report["safety"]["second_copies"]),
        "wall_seconds": report["run"]["wall_seconds"],
        "path": report["run"].get("path"),
    }


def _assumption_ceilings(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The planner's ceilings for the run's own inputs (``goodput --from`` the run's report computes the same), and its lines."""
    plan = planned(report)
    found = [{"assumption": c.assumption, "ettr": round(c.ettr, 5), "points": round(c.points, 3)} for c in plan.ceilings]
    return found, ceiling_lines(plan.ceilings)


def _planner_recalls(report: dict[str, Any]) -> list[dict[str, Any]]:
    advice = report.get("planner_recommended")
    return list(advice["plan"].get("recalls", [])) if advice else []


def _is_goal_run(report: dict[str, Any]) -> bool:
    plan = report["plan"]
    return (
        plan["nodes"] == GOAL_NODES
        and plan["days"] == GOAL_DAYS
        and plan["rate_per_1000_node_days"] == RATES["llama3"]
        and plan["jobs"] == f"1x{GOAL_NODES}"
    )


def _goals(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for kind, target in GOAL_ETTR.items():
        runs = [r for r in reports if r["run"]["spec"]["job_kind"] == kind and r["run"]["spec"]["recommended"]]
        with_swaps = next((r for r in runs if r["run"]["spec"]["planned_swaps"] and r["run"]["spec"]["recall"] == GOAL_RECALL), None)
        without = next((r for r in runs if not r["run"]["spec"]["planned_swaps"]), None)
        if with_swaps is None:
            continue
        ettr = row(with_swaps)["ettr"]
        goal_run = _is_goal_run(with_swaps)
        found.append(
            {
                "job_kind": kind,
                "goal_ettr": target,
                "ettr": ettr,
                "without_planned_swaps": None if without is None else row(without)["ettr"],
                "goal_run": goal_run,
                "verdict": ("PASS" if ettr >= target else "FAIL") if goal_run else "NOT THE GOAL'S RUN",
            }
        )
    return found


def comparison(reports: list[dict[str, Any]], *, goals: bool, wall_seconds: float) -> dict[str, Any]:
    """The runs side by side, the planner's ceilings per job kind, and the goals when asked."""
    kinds: dict[str, dict[str, Any]] = {}
    for report in reports:
        kind = report["run"]["spec"]["job_kind"]
        if kind not in kinds or (report["run"]["spec"]["planned_swaps"] and not kinds[kind]["from_planned_swaps"]):
            # (the ceilings of a run with planned swaps: its inputs have the precursors' figures)
            ceilings, lines = _assumption_ceilings(report)
            kinds[kind] = {
                "ceilings": ceilings,
                "ceiling_lines": lines,
                "from_run": report["run"]["label"],
                "from_planned_swaps": bool(report["run"]["spec"]["planned_swaps"]),
                "planner_recalls": _planner_recalls(report),
            }
            if report.get("planner_recommended"):
                kinds[kind]["recommended"] = report["planner_recommended"]["line"]
    return {
        "fleet_comparison_version": 1,
        "runs": [row(report) for report in reports],
        "job_kinds": kinds,
        "goals": _goals(reports) if goals else [],
        "wall_seconds": round(wall_seconds, 1),
    }


def format_comparison(document: dict[str, Any]) -> str:
    """The comparison as a person reads it in a terminal."""
    lines = [
        "fleet runs side by side: ETTR, and the points lost to: " + " | ".join(PART_NAMES[p] for p in PARTS),
    ]
    for run in document["runs"]:
        points = " | ".join(f"{run['points_lost'][p]:.2f}" for p in PARTS)
        lines.append(
            f"  {run['label']:<62} ETTR {100 * run['ettr']:6.2f} %   {points}   "
            f"[{run['hits']} hits, {run['swaps']} swaps, {run['false_alarm_swaps']} on false alarms, "
            f"{run['failures_averted']} averted; spares {run['spares']}, every {run['checkpoint_interval_seconds']:g} s; "
            f"{run['wall_seconds']:.0f} s]"
        )
    for kind, said in document["job_kinds"].items():
        if said.get("recommended"):
            lines.append(f"{kind} job: {said['recommended']}")
        if said["ceilings"]:
            lines.append(f"{kind} job: the goodput planner on the inputs of the run '{said['from_run']}':")
            lines += [f"  {line}" for line in said["ceiling_lines"]]
        if said["planner_recalls"]:
            lines.append(
                f"  the planner's estimate ({kind} job, recommended settings): "
                + ", ".join(f"{100 * r['recall']:g} % recall {pct(r['recommended_ettr'])}" for r in said["planner_recalls"])
            )
    for goal in document["goals"]:
        without = "-" if goal["without_planned_swaps"] is None else pct(goal["without_planned_swaps"])
        lines.append(
            f"goal ({goal['job_kind']} job): ETTR >= {100 * goal['goal_ettr']:g} % with planner-recommended settings and planned swaps "
            f"at {100 * GOAL_RECALL:g} % recall: {pct(goal['ettr'])} (without planned swaps {without}): {goal['verdict']}"
        )
    lines.append(f"wall time: {document['wall_seconds']:.0f} s")
    return "\n".join(lines)


def render_comparison_html(document: dict[str, Any]) -> str:
    """The comparison as an offline page: the runs' table, the ceilings, the goals."""
    head = ["run", "ETTR", *(PART_NAMES[p] for p in PARTS), "hits", "swaps", "on false alarms", "averted", "spares", "interval s"]
    rows = [
        [
            run["label"],
            pct(run["ettr"]),
            *(f"{run['points_lost'][p]:.3f}" for p in PARTS),
            run["hits"],
            run["swaps"],
            run["false_alarm_swaps"],
            run["failures_averted"],
            run["spares"],
            f"{run['checkpoint_interval_seconds']:g}",
        ]
        for run in document["runs"]
    ]
    body = ["<h1>Fleet runs side by side</h1>", _table(head, rows)]
    for kind, said in document["job_kinds"].items():
        if said["ceilings"]:
            body.append(f"<h2>The ceiling each assumption sets ({escape(kind)} job): an assumption, not a result</h2>")
            body.append(_table(["assumption", "ETTR at most"], [[c["assumption"], pct(c["ettr"])] for c in said["ceilings"]]))
    if document["goals"]:
        body.append("<h2>Goals</h2>")
        body.append(
            _table(
                ["job", "goal", "with planned swaps", "without", "verdict"],
                [
                    [
                        g["job_kind"],
                        f">= {100 * g['goal_ettr']:g} %",
                        pct(g["ettr"]),
                        "-" if g["without_planned_swaps"] is None else pct(g["without_planned_swaps"]),
                        g["verdict"],
                    ]
                    for g in document["goals"]
                ],
            )
        )
    style = "body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}"
    head_html = f'<head><meta charset="utf-8"><title>fleet comparison</title><style>{style}</style></head>'
    return f"<!doctype html><html>{head_html}<body>{''.join(body)}</body></html>\n"


def _table(head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"
