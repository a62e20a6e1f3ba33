"""The drill report as one self-contained HTML page: a timeline picture (inline SVG) of every
incident's phases, the incidents' timelines, the metrics emitted, the notifications sent and the
api_calls table. No script, font or stylesheet is fetched: it opens offline, from a file.

The SVG's bars carry class "phase" and data-phase / data-start / data-end attributes (virtual
seconds), so a test can check in a real browser that each one is drawn where it belongs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from html import escape
from typing import Any

from hyperpod_recovery.domain.record.durations import format_duration, offset_text
from hyperpod_recovery.vocabulary import Outcome, PhaseName
from sandbox.expectations import Check, verdict_line
from sandbox.report import (
    JOBS_SHOWN,
    RUN_SHOWN,
    at_risk_lines,
    bounded,
    format_time_split,
    hang_verdicts,
    job_named,
    jobs_lines,
    kubernetes_names,
    outcome_counts,
    resubmission_text,
    verdict_lines,
)

PHASE_COLORS: dict[PhaseName, str] = {
    "detect": "#9467bd",
    "assess": "#8c564b",
    "inspect": "#8c564b",
    "cordon": "#ff7f0e",
    "find_jobs": "#bcbd22",
    "replace": "#d62728",
    "wait_for_rejoin": "#1f77b4",
    "recover_nodes": "#1f77b4",
    "wait_other_recovery": "#aec7e8",
    "resume": "#2ca02c",
    "find_checkpoint": "#17becf",
    "backoff": "#c7c7c7",
    "resubmit": "#e377c2",
    "grow_back": "#9467bd",
    "record": "#7f7f7f",
}  # "other" (a state no phase names) is drawn grey and left out of the legend
# Darker shades than any phase's, one per outcome: an outcome badge never reads as a phase bar.
OUTCOME_COLORS: dict[Outcome, str] = {
    "recovered": "#00692d",
    "escalated": "#a50026",
    "capped": "#b35806",
    "duplicate": "#4d4d4d",
    "rejected": "#6b5a00",
    "dry_run": "#2d4f8c",
    "stale": "#7a5230",
    "aborted": "#6a1b6e",
    "failed": "#d0006f",
    "recovered_by_itself": "#2f6f4f",
}
# The pictures' own coordinates (viewBox): the page scales them to its width, whatever the screen's.
WIDTH, LABEL, MARGIN, ROW, GAP = 960, 170, 90, 20, 6
NICE_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)


def _scale(start: float, end: float):  # type: ignore[no-untyped-def]
    span = max(end - start, 1e-6)
    plot = WIDTH - LABEL - MARGIN
    return lambda t: LABEL + (t - start) / span * plot


Clock = Callable[[float], str] | None  # a virtual time -> its UTC clock time (None: the report has no start)
AXIS, CLOCK_LINE = 30, 14  # the axis's height under a chart, and its UTC line's


def clock_of(report: dict[str, Any]) -> Clock:
    """The UTC clock of a report's virtual times (``started_at`` is T+0)."""
    if not report.get("started_at"):
        return None
    zero = datetime.fromisoformat(report["started_at"])
    return lambda at: (zero + timedelta(seconds=at)).strftime("%H:%M:%S")


def when(at: float, clock: Clock) -> str:
    """``T+2m 07.4s (09:02:07 UTC)``: a moment both ways."""
    return f"T+{format_duration(at)}" + (f" ({clock(at)} UTC)" if clock else "")


def _axis(start: float, end: float, y: float, clock: Clock = None) -> list[str]:
    x = _scale(start, end)
    step = next((s for s in NICE_STEPS if (end - start) / s <= 8), NICE_STEPS[-1])
    parts = [f'<line class="axis" x1="{LABEL}" y1="{y}" x2="{WIDTH - MARGIN}" y2="{y}" stroke="#444"/>']
    if clock:
        parts.append(f'<text x="{LABEL - 36}" y="{y + 16 + CLOCK_LINE}" text-anchor="end" class="tick">UTC</text>')
    tick = math.floor(start / step) * step
    while tick <= end + 1e-9:
        if tick >= start - 1e-9:
            parts.append(f'<line x1="{x(tick):.1f}" y1="{y}" x2="{x(tick):.1f}" y2="{y + 4}" stroke="#444"/>')
            parts.append(f'<text x="{x(tick):.1f}" y="{y + 16}" text-anchor="middle" class="tick">T+{offset_text(tick)}</text>')
            if clock:
                below = y + 16 + CLOCK_LINE
                parts.append(f'<text x="{x(tick):.1f}" y="{below}" text-anchor="middle" class="tick utc">{clock(tick)}</text>')
        tick += step
    return parts


def _svg(css: str, height: float, label: str, extra: str = "") -> str:
    """An SVG that scales to its page's width (no fixed size: the viewBox is its drawing's)."""
    return (
        f'<svg class="{css}"{extra} width="100%" viewBox="0 0 {WIDTH} {height}" preserveAspectRatio="xMinYMin meet" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}">'
    )


def phase_chart(incident: dict[str, Any], clock: Clock = None) -> str:
    """A Gantt chart of one incident's phases (one row each) with its timeline events as dots."""
    phases = incident["phases"]
    if not phases:
        return '<p class="empty">No phases: the execution ended before its outcome was recorded.</p>'
    start = min(p["start"] for p in phases)
    end = max(p["end"] for p in phases)
    x = _scale(start, end)
    height = (len(phases) + 1) * (ROW + GAP) + AXIS + (CLOCK_LINE if clock else 0) + _lanes_height(incident["timeline"], x, start, end)
    parts = [_svg("timeline", height, f"phases of incident {incident['id']}", f' data-incident="{escape(incident["id"])}"')]
    for row, phase in enumerate(phases):
        y = row * (ROW + GAP) + 4
        left, right = x(phase["start"]), x(phase["end"])
        width = max(right - left, 2.0)  # a 20 ms step is still visible
        duration = phase["end"] - phase["start"]
        color = PHASE_COLORS.get(phase["name"], "#999999")
        parts.append(f'<text x="{LABEL - 8}" y="{y + ROW - 5}" text-anchor="end" class="label">{escape(phase["name"])}</text>')
        parts.append(
            f'<rect class="phase" data-phase="{escape(phase["name"])}" data-start="{phase["start"]}" data-end="{phase["end"]}" '
            f'x="{left:.1f}" y="{y}" width="{width:.1f}" height="{ROW}" rx="3" fill="{color}">'
            f"<title>{escape(phase['name'])}: T+{escape(format_duration(phase['start']))} to "
            f"T+{escape(format_duration(phase['end']))} ({escape(format_duration(duration))})</title></rect>"
        )
        parts.append(f'<text x="{left + width + 4:.1f}" y="{y + ROW - 5}" class="duration">{escape(format_duration(duration))}</text>')
    y = len(phases) * (ROW + GAP) + 4
    parts.append(f'<text x="{LABEL - 8}" y="{y + ROW - 5}" text-anchor="end" class="label">events</text>')
    for entry in incident["timeline"]:
        if start <= entry["at"] <= end:
            parts.append(
                f'<circle class="event" cx="{x(entry["at"]):.1f}" cy="{y + ROW / 2}" r="4" fill="#333">'
                f"<title>T+{escape(format_duration(entry['at']))} {escape(entry['event'])}: {escape(entry['detail'])}</title></circle>"
            )
    for lane, left, entry in _event_labels(incident["timeline"], x, start, end):
        parts.append(f'<text class="event-label" x="{left:.1f}" y="{y + ROW + 12 + lane * EVENT_LANE:.1f}">{escape(entry["event"])}</text>')
    y += _lanes_height(incident["timeline"], x, start, end)
    parts += _axis(start, end, y + ROW + 6, clock)
    parts.append("</svg>")
    return "".join(parts)


EVENT_LANE, EVENT_LANES, CHAR_WIDTH, EVENT_CLUSTER = (
    13,
    6,
    6.2,
    12,
)  # label rows under the dots; 11px text's width per character; dots closer than this (px) share a label


def _event_labels(timeline: list[dict[str, Any]], x: Any, start: float, end: float) -> list[tuple[int, float, dict[str, Any]]]:
    """Where each event's name is written under its dot. Events whose dots overlap share one label
    (``fault detected +5``: the first, and how many more the tooltip and the timeline list); each
    label goes in the first lane where it does not run into the one before it."""
    groups: list[list[dict[str, Any]]] = []
    for entry in (e for e in timeline if start <= e["at"] <= end):
        if groups and x(entry["at"]) - x(groups[-1][0]["at"]) < EVENT_CLUSTER:
            groups[-1].append(entry)
        else:
            groups.append([entry])
    lanes: list[float] = []
    placed = []
    for group in groups:
        name = group[0]["event"] + (f" +{len(group) - 1}" if len(group) > 1 else "")
        left = min(x(group[0]["at"]) - 3, WIDTH - len(name) * CHAR_WIDTH)
        lane = next((i for i, right in enumerate(lanes) if right < left), len(lanes))
        if lane >= EVENT_LANES:
            continue  # (its dot and tooltip are still there)
        right = left + len(name) * CHAR_WIDTH + 6
        if lane < len(lanes):
            lanes[lane] = right
        else:
            lanes.append(right)
        placed.append((lane, left, {**group[0], "event": name}))
    return placed


def _lanes_height(timeline: list[dict[str, Any]], x: Any, start: float, end: float) -> int:
    used = {lane for lane, _, _ in _event_labels(timeline, x, start, end)}
    return (max(used) + 1) * EVENT_LANE + 4 if used else 0


def overview_chart(incidents: list[dict[str, Any]], clock: Clock = None) -> str:
    """Every incident of the drill on one time axis, coloured by outcome."""
    spans = [(i, min(p["start"] for p in i["phases"]), max(p["end"] for p in i["phases"])) for i in incidents if i["phases"]]
    if not spans:
        return ""
    start, end = min(s for _, s, _ in spans), max(e for _, _, e in spans)
    x = _scale(start, end)
    height = len(spans) * (ROW + GAP) + AXIS + (CLOCK_LINE if clock else 0)
    parts = [_svg("overview", height, "every incident on one time axis, coloured by outcome")]
    for row, (incident, first, last) in enumerate(spans):
        y = row * (ROW + GAP) + 4
        label = incident["id"] if len(incident["id"]) <= 24 else incident["id"][:23] + "…"
        color = OUTCOME_COLORS.get(incident["outcome"], "#999999")
        parts.append(f'<text x="{LABEL - 8}" y="{y + ROW - 5}" text-anchor="end" class="label">{escape(label)}</text>')
        parts.append(
            f'<rect class="incident" data-outcome="{escape(incident["outcome"])}" x="{x(first):.1f}" y="{y}" '
            f'width="{max(x(last) - x(first), 2.0):.1f}" height="{ROW}" rx="3" fill="{color}">'
            f"<title>{escape(incident['id'])}: {escape(incident['outcome'])}</title></rect>"
        )
        parts.append(
            f'<text x="{max(x(last), x(first) + 2) + 4:.1f}" y="{y + ROW - 5}" class="duration">{escape(incident["outcome"])}</text>'
        )
    parts += _axis(start, end, len(spans) * (ROW + GAP) + 4, clock)
    parts.append("</svg>")
    return "".join(parts)


RUN_COLOR, SHRUNK_COLOR, DOWN_COLOR = "#2ca02c", "#98df8a", "#d62728"  # a copy on all its nodes, on fewer, no copy training


def job_lane(report: dict[str, Any], clock: Clock = None, shown: int = JOBS_SHOWN) -> str:
    """The jobs a fault hit, on one time axis: a row per copy (the job itself first) drawn when it
    trained, labelled with its node count; the gaps when no copy trained in red across the job's rows."""
    jobs = [j for j in report.get("jobs", []) if j["fault_at"] is not None][:shown]
    if not jobs:
        return ""
    end = max(
        [report.get("virtual_seconds") or 0.0]
        + [t for j in jobs for c in j.get("copies") or [] for t in (c.get("started_at"), c.get("ended_at")) if t is not None]
        + [t for j in jobs for gap in j["down"] for t in gap]
    )
    end = max(end, 1.0)
    x = _scale(0.0, end)
    rows = sum(1 + len(j.get("copies") or []) for j in jobs)
    height = rows * (ROW + GAP) + (len(jobs) - 1) * GAP + AXIS + (CLOCK_LINE if clock else 0)
    parts = [_svg("jobs", height, "each job's copies: when each trained, on how many nodes")]
    y = 4.0
    for job in jobs:
        top = y
        full = job.get("nodes")
        first_stop = job["down"][0][0] if job["down"] else end
        # (the job by its short name, as its copies are: ``job 1001``; an EKS object's name)
        own = job["label"].rsplit("/", 1)[1] if "uid" in job else job["label"].split(" (")[0]
        runs = [(own, 0.0, first_stop, full, None, job["job"])]
        for c in job.get("copies") or []:
            stop = c["ended_at"] if c.get("ended_at") is not None else end
            runs.append((_copy_label(c), c.get("started_at"), stop, c["nodes"], c.get("from_step"), c["job"]))
        for name, start, stop, nodes, step, ident in runs:
            label = name if len(name) <= 24 else name[:23] + "…"
            parts.append(f'<text x="{LABEL - 8}" y="{y + ROW - 5}" text-anchor="end" class="label">{escape(label)}</text>')
            shrunk = bool(full) and nodes is not None and nodes < full
            size = f"{nodes} of {full} nodes" if shrunk else f"{nodes if nodes is not None else '?'} node{'' if nodes == 1 else 's'}"
            said = size + (f", from step {step}" if step is not None else "")
            if start is None:
                parts.append(f'<text x="{LABEL + 4}" y="{y + ROW - 5}" class="duration">never ran ({escape(said)})</text>')
            else:
                left, width = x(start), max(x(stop) - x(start), 2.0)
                color = SHRUNK_COLOR if shrunk else RUN_COLOR
                parts.append(
                    f'<rect class="run" data-job="{escape(str(ident))}" data-start="{start}" data-end="{stop}" data-nodes="{nodes}" '
                    f'x="{left:.1f}" y="{y}" width="{width:.1f}" height="{ROW}" rx="3" fill="{color}">'
                    f"<title>{escape(name)} on {escape(said)}: {escape(when(start, clock))} to {escape(when(stop, clock))} "
                    f"({escape(format_duration(stop - start))})</title></rect>"
                )
                wide = len(said) * CHAR_WIDTH
                # (inside the bar if it fits, else after it, else before it: never off the picture)
                if width > wide + 8:
                    at, anchor = left + 4, "start"
                elif left + width + 4 + wide <= WIDTH:
                    at, anchor = left + width + 4, "start"
                else:
                    at, anchor = left - 4, "end"
                parts.append(f'<text x="{at:.1f}" y="{y + ROW - 5}" text-anchor="{anchor}" class="run-label">{escape(said)}</text>')
            y += ROW + GAP
        for start, stop in job["down"]:
            parts.append(
                f'<rect class="down" data-job="{escape(str(job["job"]))}" data-start="{start}" data-end="{stop}" x="{x(start):.1f}" '
                f'y="{top - 2}" width="{max(x(stop) - x(start), 2.0):.1f}" height="{y - top - GAP + 4}" '
                f'fill="{DOWN_COLOR}" fill-opacity="0.25">'
                f"<title>{escape(job['label'])} down {escape(format_duration(stop - start))}: from its stop at "
                f"{escape(when(start, clock))} to a copy running at {escape(when(stop, clock))}</title></rect>"
            )
        y += GAP
    parts += _axis(0.0, end, y - GAP, clock)
    parts.append("</svg>")
    return "".join(parts)


def _copy_label(copy: dict[str, Any]) -> str:
    """A copy by name: ``job 1002``; an EKS object's name (its kind and namespace are its job's)."""
    return str(copy["name"]) if "name" in copy else f"job {copy['job']}"


def _hang_verdicts(report: dict[str, Any]) -> str:
    """The hang and slowdown verdicts the drill kept, as the terminal prints them."""
    lines = verdict_lines(report)
    if not lines:
        return ""
    return f'<h2>{escape(lines[0].capitalize())}</h2><pre class="verdicts">{escape(chr(10).join(line[2:] for line in lines[1:]))}</pre>'


def _at_risk_verdicts(report: dict[str, Any]) -> str:
    """The at-risk verdicts the drill kept, as the terminal prints them."""
    lines = at_risk_lines(report)
    if not lines:
        return ""
    return f'<h2>{escape(lines[0].capitalize())}</h2><pre class="verdicts">{escape(chr(10).join(line[2:] for line in lines[1:]))}</pre>'


def _verdict(report: dict[str, Any], checks: Sequence[Check] | None) -> str:
    """The drill's pass/fail against its expectations, first on the page; the checks under it (open
    when one failed)."""
    if checks is None:
        return ""
    failed = [c for c in checks if not c.ok]
    items = "".join(f'<li class="{"ok" if c.ok else "fail"}">{escape(c.line)}</li>' for c in checks)
    return (
        f'<p class="verdict {"fail" if failed else "pass"}">{escape(verdict_line(report["scenario"], list(checks)))}</p>'
        f'<details class="checks"{" open" if failed else ""}><summary>expectations ({len(checks)})</summary><ul>{items}</ul></details>'
    )


def _legend(incidents: list[dict[str, Any]]) -> str:
    """The phases drawn in this report, in the order a workflow goes through them."""
    used = {p["name"] for i in incidents for p in i["phases"]}
    items = "".join(
        f'<span class="swatch" style="background:{color}"></span>{escape(name)} ' for name, color in PHASE_COLORS.items() if name in used
    )
    return f'<p class="legend">phases: {items}</p>' if items else ""


def _table(headers: list[str], rows: list[list[Any]], css: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _incident_section(incident: dict[str, Any], names: dict[str, str], clock: Clock = None) -> str:
    outcome = incident["outcome"]
    job = f" · {escape(job_named(str(incident['job']), names))}" if incident.get("job") else ""
    error = f'<p class="error">{escape(str(incident["error"]))}: {escape(str(incident["cause"]))}</p>' if incident["error"] else ""
    shown = incident["resubmissions"] if len(incident["resubmissions"]) <= RUN_SHOWN + 1 else incident["resubmissions"][:RUN_SHOWN]
    resubmissions = "".join(
        f"<li>{escape(resubmission_text(r, names))} (<code>{escape(r['checkpoint_uri'])}</code>)</li>" for r in shown
    ) + (f"<li>and {len(incident['resubmissions']) - len(shown)} more</li>" if len(shown) < len(incident["resubmissions"]) else "")
    # A dry run's actions are what an operator arms it for: shown, not folded into the timeline.
    would = [e for e in incident["timeline"] if e["event"].startswith("would ")]
    would_do = (
        '<div class="would"><b>would do (dry run, nothing was changed):</b><ul>'
        + "".join(f"<li>{escape(e['event'])}: {escape(bounded(e['detail']))}</li>" for e in would)
        + "</ul></div>"
        if would
        else ""
    )
    timeline = _table(
        ["at", *(["UTC"] if clock else []), "event", "detail"],
        [[f"T+{format_duration(e['at'])}", *([clock(e["at"])] if clock else []), e["event"], e["detail"]] for e in incident["timeline"]],
        "timeline",
    )
    split = format_time_split(incident)
    return (
        f'<section class="incident" id="{escape(incident["id"])}">'
        f'<h2><span class="badge" style="background:{OUTCOME_COLORS.get(outcome, "#999")}">{escape(outcome)}</span> '
        f"{escape(incident['id'])}</h2>"
        f"<p>{escape(incident['workflow'])} recovery{job} · trigger {escape(', '.join(incident['trigger']) or '-')} · "
        f"nodes {escape(bounded(', '.join(incident['nodes'])) or '-')}</p>"
        f'<p class="summary">{escape(bounded(incident["summary"]))}</p>{error}{would_do}'
        f"{phase_chart(incident, clock)}"
        f'<p class="split">{escape(split)}</p>'
        + (f"<ul>{resubmissions}</ul>" if resubmissions else "")
        + f"<details><summary>timeline ({len(incident['timeline'])} entries)</summary>{timeline}</details></section>"
    )


STYLE = """
body { font: 14px/1.4 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
@media (max-width: 600px) { body { margin: 8px; } }
svg { display: block; width: 100%; height: auto; }
.verdict { color: #fff; font-size: 16px; font-weight: 600; padding: 6px 12px; border-radius: 4px; }
.verdict.pass { background: #00692d; } .verdict.fail { background: #a50026; }
.checks li.fail { color: #a50026; font-weight: 600; } .clock { color: #555; }
svg .run-label { fill: #123; }
h1 { font-size: 20px; margin-bottom: 4px; } h2 { font-size: 16px; margin: 24px 0 4px; }
.badge { color: #fff; border-radius: 4px; padding: 1px 8px; text-transform: uppercase; font-size: 12px; }
.summary { font-weight: 600; }
.jobs li { font-size: 15px; } .would { border-left: 4px solid #2d4f8c; padding: 2px 10px; }
.error { color: #b00; } .split, .legend { color: #555; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; border-radius: 2px; }
svg text { font: 11px Helvetica, Arial, sans-serif; fill: #222; } svg .tick, svg .event-label { fill: #555; }
table { border-collapse: collapse; margin: 8px 0; max-width: 100%; } td { overflow-wrap: anywhere; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num, table.calls td:nth-child(2) { text-align: right; }
pre { background: #f7f7f7; padding: 8px; white-space: pre-wrap; font-size: 12px; }
"""


def render_html(report: dict[str, Any], checks: Sequence[Check] | None = None) -> str:
    """The page: the drill's pass/fail against ``checks`` (its expectations) first, then its jobs (a
    line each and a lane of their copies), its incidents, and what it called and sent. Times are the
    drill's clock (T+) and UTC."""
    cluster = report["cluster"]
    clock = clock_of(report)
    groups = ", ".join(f"{name} {count}" for name, count in cluster["instance_groups"].items())
    incidents = report["incidents"]
    names = kubernetes_names(report)
    summary_rows = [
        [
            i["id"],
            i["workflow"],
            i["outcome"],
            job_named(str(i["job"]), names) if i.get("job") else "",
            ", ".join(i["nodes"][:4]) + (" …" if len(i["nodes"]) > 4 else ""),
            format_duration(i["workflow_seconds"]),
            i["error"] or "",
        ]
        for i in incidents
    ]
    calls = _table(
        ["call", "count"], [[name, count] for name, count in report["api_calls"].items()] + [["total", report["api_calls_total"]]], "calls"
    )
    if "kubernetes_calls" in report:  # an EKS cluster's: verb and resource, as the API server served them
        kube = report["kubernetes_calls"]
        calls += _table(
            ["Kubernetes call", "count"], [[name, count] for name, count in kube.items()] + [["total", sum(kube.values())]], "kube-calls"
        )
    metrics = _table(
        ["metric", "unit", "values"],
        [[name, m["unit"], ", ".join(f"{v:g}" for v in m["values"])] for name, m in report.get("metrics", {}).items()],
        "metrics",
    )
    notifications = "".join(
        f"<details><summary>{escape(n['subject'])}</summary><pre>{escape(n['message'])}</pre></details>" for n in report["notifications"]
    )
    figures = (
        f"{report['executions']} execution(s) · {report['state_transitions']} state transitions · {report['api_calls_total']} API calls · "
        f"virtual time {format_duration(report['virtual_seconds'])} · "
        f"pipeline overhead {format_duration(report['pipeline_overhead_seconds'])} · "
        f"wall time {report['wall_seconds']:.1f}s"
    )
    title = f"hyperpod-recovery drill: {report['scenario']}"
    jobs = jobs_lines(report.get("jobs", []), verdicts=hang_verdicts(report))
    lead = (
        '<h2>Jobs</h2><ul class="jobs">' + "".join(f"<li>{escape(line)}</li>" for line in jobs) + "</ul>" + job_lane(report, clock)
        if jobs
        else "<p>No job was hit by a fault.</p>"
    )
    badge = f" <span class=badge style=background:{OUTCOME_COLORS['dry_run']}>dry run</span>" if report["dry_run"] else ""
    zero = datetime.fromisoformat(report["started_at"]).strftime("%Y-%m-%d %H:%M:%S") if clock else ""
    started = f'<p class="clock">times: T+ counts the drill\'s clock from T+0 = {zero} UTC</p>' if clock else ""
    counts = f"<h2>Incidents: {len(incidents)} ({escape(outcome_counts(incidents))})</h2>" if incidents else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}{badge}</h1>" + _verdict(report, checks) + f"<p>{escape(report['description'] or '')}</p>"
        f"<p>cluster <b>{escape(cluster['name'])}</b> ({escape(cluster['orchestrator'])}, "
        f"NodeRecovery={escape(cluster['node_recovery'])}): {escape(groups)}</p>"
        + started
        + lead
        + _hang_verdicts(report)
        + _at_risk_verdicts(report)
        + counts
        + (
            _table(["incident", "workflow", "outcome", "job", "nodes", "workflow time", "error"], summary_rows, "incidents")
            + overview_chart(incidents, clock)
            if incidents
            else "<p>No incident was started (see intake below).</p>"
        )
        + _legend(incidents)
        + "".join(_incident_section(i, names, clock) for i in incidents)
        + f'<p class="figures">{escape(figures)}</p>'
        + f"<h2>API calls</h2>{calls}"
        + f"<h2>Metrics emitted (CloudWatch EMF)</h2>{metrics}"
        + f"<h2>Notifications ({len(report['notifications'])})</h2>{notifications or '<p>none</p>'}"
        + "</body></html>\n"
    )
