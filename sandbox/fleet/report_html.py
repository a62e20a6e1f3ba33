"""The fleet report (sandbox/fleet/report.py) as one self-contained HTML page: three inline SVG plots
of its ``series`` (job downtime per hit over the run with its p50 and p99; ETTR per day, the mean over
jobs with its min-max band and each job faint; executions running over the run, a step line with
its peak), the report's tables, and the goodput planner's view of the run with what to change, the
terminal's lines (sandbox/fleet/goodput.py). No script, font or stylesheet is fetched: it opens offline, from
a file; the only addresses on it are the prices' sources, as links.

What a test can find: each plot is an ``svg`` with class ``fleet-downtime``, ``fleet-ettr`` or
``fleet-concurrency``; a hit is a ``circle.hit`` (data-at seconds, data-downtime seconds), a
percentile a ``line.pctl`` (data-name, data-seconds), a job's days a ``polyline.job`` (data-job;
one point a day), the mean a ``polyline.mean``, the steps a ``path.steps`` (data-steps), the peak a
``circle.peak`` (data-peak, data-at). Each table has an id; the planner's lines are ``pre.goodput``.
Every string from the report is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

from sandbox.fleet.goodput import format_goodput
from sandbox.fleet.swaps import PLANNED_PARTS

NEWLINE = "\n"

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 760, 300, 64, 20, 16, 44
DAY = 86_400.0
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}td.num{text-align:right}.warn{color:#a50026}.note{color:#555;font-size:90%}"
    "svg text{font-size:11px;fill:#333}.head{font-size:1.2em}"
)
REMEDY_COLORS = {"replace": "#d62728", "reboot": "#1f77b4", "job": "#2ca02c"}


def pct(ratio: float) -> str:
    return f"{100 * ratio:.2f} %"


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _cell(value: Any) -> str:
    text = str(value)
    numeric = text[:1].isdigit() or text[:1] == "$"
    return f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def _table(table_id: str, head: list[str], rows: list[list[Any]]) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f'<table id="{table_id}"><tr>{cells}</tr>{body}</table>'


def nice_ticks(low: float, high: float, most: int = 8) -> list[float]:
    """Round ticks (a step of 1, 2 or 5 times a power of ten) covering [low, high], at most ``most``."""
    span = (high - low) or 1.0
    magnitude = 10 ** math.floor(math.log10(span / most))
    step = next(m * magnitude for m in (1, 2, 5, 10) if span / (m * magnitude) <= most)
    first = math.ceil(low / step - 1e-9)
    return [round(k * step, 10) for k in range(first, math.floor(high / step + 1e-9) + 1)]


def _frame(
    css: str,
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    x_label: str,
    y_label: str,
    y_format: str = "{:g}",
    extra: str = "",
    y_ticks: int = 8,
) -> tuple[list[str], Callable[[float], float], Callable[[float], float]]:
    """An SVG's opening, box, grid and axes' labels; the functions from data to pixels."""
    (x_low, x_high), (y_low, y_high) = x_range, y_range
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_low) / ((x_high - x_low) or 1) * plot_w

    def py(y: float) -> float:
        return TOP + (y_high - y) / ((y_high - y_low) or 1) * plot_h

    parts = [
        f'<svg class="{css}" {extra}width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for y in nice_ticks(y_low, y_high, y_ticks):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y_format.format(y)}</text>')
    for x in nice_ticks(x_low, x_high):
        parts.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{x:g}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {TOP + plot_h / 2})">{escape(y_label)}</text>'
    )
    return parts, px, py


def downtime_chart(report: dict[str, Any]) -> str:
    """A point per hit (x the day, y its downtime in minutes, colour its remedy; hollow: never running
    again, its downtime to the run's end), the p50 and p99 as dashed lines."""
    points, days = report["series"]["downtime"], report["plan"]["days"]
    percentiles = {name: report["job_downtime_seconds"][name] for name in ("p50", "p99")}
    top = max([p["downtime"] / 60 for p in points] + [(v or 0) / 60 for v in percentiles.values()] + [1.0]) * 1.1
    parts, px, py = _frame(
        "fleet-downtime", (0, days), (0, top), "day of the run", "job downtime (min)", "{:g}", extra=f'data-points="{len(points)}" '
    )
    for name, seconds in percentiles.items():
        if seconds is None:
            continue
        y = py(seconds / 60)
        parts.append(
            f'<line class="pctl" data-name="{name}" data-seconds="{seconds}" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#555" stroke-dasharray="5,4"/>'
        )
        # p50 labelled at the left, p99 at the right: close percentiles do not print over each other
        x, anchor = (LEFT + 4, "start") if name == "p50" else (WIDTH - RIGHT - 4, "end")
        parts.append(f'<text x="{x}" y="{y - 4:.1f}" text-anchor="{anchor}">{name} {minutes(seconds)}</text>')
    for p in points:
        color = REMEDY_COLORS.get(p["remedy"], "#7f7f7f")
        fill = color if p["restarted"] else "none"
        label = f"job {p['job']}: {p['fault']} ({p['remedy']}), {minutes(p['downtime'])}"
        parts.append(
            f'<circle class="hit" data-at="{p["at"]}" data-downtime="{p["downtime"]}" cx="{px(p["day"]):.1f}" '
            f'cy="{py(p["downtime"] / 60):.1f}" r="3.5" fill="{fill}" stroke="{color}"><title>{escape(label)}</title></circle>'
        )
    parts.append("</svg>")
    legend = " · ".join(f'<span style="color:{c}">●</span> {escape(r)}' for r, c in REMEDY_COLORS.items())
    return "".join(parts) + f'<p class="note">{legend} · hollow: never running again (downtime to the run\'s end)</p>'


def ettr_chart(report: dict[str, Any]) -> str:
    """Per day: the mean over jobs (a line), its min-max band, each job a faint line (one point a day, at the day's middle)."""
    series = report["series"]["ettr_per_day"]
    mids = [(d["start"] + d["seconds"] / 2) / DAY for d in series["days"]]
    values = [v for shares in series["jobs"].values() for v in shares] or [1.0]
    low = max(0.0, min(values) * 100 - 0.5)
    high = min(100.0, max(values) * 100 + 0.5)
    parts, px, py = _frame(
        "fleet-ettr",
        (0, report["plan"]["days"]),
        (low, high),
        "day of the run",
        "ETTR that day (%)",
        "{:.1f}",
        extra=f'data-days="{len(mids)}" ',
    )
    band = [f"{px(x):.1f},{py(100 * v):.1f}" for x, v in zip(mids, series["max"], strict=True)]
    band += [f"{px(x):.1f},{py(100 * v):.1f}" for x, v in reversed(list(zip(mids, series["min"], strict=True)))]
    if band:
        parts.append(f'<polygon class="band" points="{" ".join(band)}" fill="#1f77b4" fill-opacity="0.15" stroke="none"/>')
    for job, shares in series["jobs"].items():
        points = " ".join(f"{px(x):.1f},{py(100 * v):.1f}" for x, v in zip(mids, shares, strict=True))
        parts.append(
            f'<polyline class="job" data-job="{escape(str(job))}" points="{points}" fill="none" stroke="#999" stroke-opacity="0.5">'
            f"<title>job {escape(str(job))}</title></polyline>"
        )
    mean = " ".join(f"{px(x):.1f},{py(100 * v):.1f}" for x, v in zip(mids, series["mean"], strict=True))
    parts.append(f'<polyline class="mean" points="{mean}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    parts += [
        f'<circle cx="{px(x):.1f}" cy="{py(100 * v):.1f}" r="2.5" fill="#1f77b4"/>' for x, v in zip(mids, series["mean"], strict=True)
    ]
    parts.append("</svg>")
    return "".join(parts) + '<p class="note">blue: the mean over jobs, shaded: min to max over jobs, grey: each job</p>'


def concurrency_chart(report: dict[str, Any]) -> str:
    """Executions running over the run, a step line from 0 at the start to the run's end; the peak a red dot."""
    concurrency, days = report["series"]["concurrent_executions"], report["plan"]["days"]
    steps = concurrency["steps"]
    top = max(1, concurrency["peak"])
    parts, px, py = _frame(
        "fleet-concurrency",
        (0, days),
        (0, top * 1.15),
        "day of the run",
        "executions running",
        "{:g}",
        extra=f'data-steps="{len(steps)}" ',
        y_ticks=min(8, top + 1),  # whole executions only
    )
    path = [f"M{px(0):.1f},{py(0):.1f}"]
    for t, running in steps:
        path.append(f"H{px(t / DAY):.1f}V{py(running):.1f}")
    path.append(f"H{px(days):.1f}")
    parts.append(f'<path class="steps" data-steps="{len(steps)}" d="{"".join(path)}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    if concurrency["peak_at"] is not None:
        x, y = px(concurrency["peak_at"] / DAY), py(concurrency["peak"])
        parts.append(
            f'<circle class="peak" data-peak="{concurrency["peak"]}" data-at="{concurrency["peak_at"]}" '
            f'cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#d62728"/>'
        )
        anchor = "end" if x > WIDTH * 0.7 else "start"
        parts.append(
            f'<text x="{x + (-6 if anchor == "end" else 6):.1f}" y="{y - 6:.1f}" text-anchor="{anchor}">peak {concurrency["peak"]}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _price_row(price: dict[str, Any]) -> str:
    """A price with its source as a link: the page's only addresses."""
    amount = f"${price['usd']:g} per {price['per']:,} {price['unit']}"
    quote = escape(price["quoted_by"])
    seen = "AWS's page" if price["confirmed"] else f'quoted by <a href="{quote}">{quote}</a>'
    return (
        f'<tr><td>{escape(price["what"])}</td><td class="num">{escape(amount)}</td>'
        f'<td><a href="{escape(price["source"])}">{escape(price["source"])}</a></td>'
        f"<td>{escape(price['taken'])}</td><td>{seen}</td></tr>"
    )


def _tables(report: dict[str, Any]) -> str:
    jobs = [
        [
            j["job"],
            j["nodes"],
            j["hits"],
            pct(j["ettr"]),
            *(
                f"{j['ettr_points_lost'][k]:.3f}"
                for k in ("lost_work", "detection", "pipeline", "provisioning_wait", "restart", "checkpoint_cost", *PLANNED_PARTS)
            ),
            f"{j['recovery_downtime_percent']:.3f} %",
            "yes" if j["not_running_at_end"] else "no",
        ]
        for j in report["jobs"]
    ]
    down = report["job_downtime_seconds"]
    cost, per_day, limits, safety = report["monthly_cost"], report["cost_per_day"], report["limits"], report["safety"]
    prices = "".join(_price_row(p) for p in report["prices"])
    return (
        '<h2>ETTR per job</h2><p class="note">points of the run\'s time lost to each cause</p>'
        + _table(
            "ettr",
            [
                "job",
                "nodes",
                "hits",
                "ETTR",
                "lost work",
                "detection",
                "pipeline",
                "provisioning wait",
                "restart",
                "checkpoints",
                "planned swaps",
                "false alarms",
                "shrunk",
                "recovery downtime (goal <= 0.5 %)",
                "down at end",
            ],
            jobs,
        )
        + "<h2>Job downtime per hit</h2>"
        + _table(
            "downtime",
            ["hits", "p50", "p90", "p99", "max", "never running again", "folded into a running incident", "failed reboots' wait"],
            [
                [
                    down["hits"],
                    *(minutes(down[k]) for k in ("p50", "p90", "p99", "max")),
                    down["never_restarted"],
                    down["folded_into_a_running_incident"],
                    minutes(sum(j["failed_reboot_wait_seconds"] for j in report["jobs"])),
                ]
            ],
        )
        + "<h2>Incidents by outcome</h2>"
        + _table("outcomes", ["workflow:outcome", "incidents"], [[k, v] for k, v in report["incidents"]["by_outcome"].items()])
        + f"<h2>Pages to a human: {report['pages']['total']} ({report['pages']['per_week']:.2f} per week)</h2>"
        + _table("pages", ["why", "pages"], [[k, v] for k, v in report["pages"]["why"].items()])
        + "<h2>Safety</h2>"
        + _table(
            "safety",
            ["capped incidents", "breaker openings", "breaker at end"],
            [[safety["capped_incidents"], len(safety["breaker_openings"]), safety["breaker_state_at_end"]]],
        )
        + "".join(f'<p class="warn">{escape(entry)}</p>' for entry in safety["breaker_openings"])
        + "<h2>Per day</h2>"
        + _table(
            "per-day",
            ["what", "per day"],
            [["state transitions", f"{per_day['state_transitions']:g}"], ["Lambda invocations", f"{per_day['lambda_invocations']:g}"]]
            + [[f"{k} calls", f"{v:g}"] for k, v in per_day["aws_calls_by_service"].items()],
        )
        + f"<h2>Monthly cost ({cost['days']} days) at {escape(cost['region'])} list prices of {escape(cost['prices_taken'])}: "
        f"{usd(cost['total_usd'])}</h2>"
        + _table(
            "cost",
            ["service", "what", "per 30 days", "unit", "USD"],
            [[line["service"], line["what"], f"{line['per_30_days']:,.1f}", line["unit"], usd(line["usd"])] for line in cost["lines"]]
            + [["total", "", "", "", usd(cost["total_usd"])], ["of which assumed counts", "", "", "", usd(cost["assumed_usd"])]],
        )
        + '<ul class="note">'
        + "".join(f"<li>{escape(a)}</li>" for a in cost["assumptions"])
        + "".join(f"<li>not billed: {escape(why)}</li>" for why in cost["free"].values())
        + "".join(f"<li>unpriced: {escape(k)} x {v:g} per 30 days</li>" for k, v in cost["unpriced"].items())
        + "</ul><h3>Prices</h3>"
        + f'<table id="prices"><tr><th>what</th><th>price</th><th>source</th><th>read on</th><th>figure seen on</th></tr>{prices}</table>'
        + "<h2>Limits</h2>"
        + _table(
            "limits",
            ["limit", "largest met", "where", "limit", "goal"],
            [
                [
                    "DynamoDB item (B)",
                    f"{limits['largest_dynamodb_item_bytes']:,}",
                    limits["largest_dynamodb_item"],
                    f"{limits['dynamodb_item_limit_bytes']:,}",
                    f"{limits['item_goal_bytes']:,}",
                ],
                [
                    "state payload (B)",
                    f"{limits['largest_state_payload_bytes']:,}",
                    limits["largest_state_payload_at"],
                    f"{limits['state_payload_limit_bytes']:,}",
                    "",
                ],
                ["throttling errors", limits["throttling_errors_met"], "", "", "0"],
            ],
        )
    )


def render_fleet_html(report: dict[str, Any]) -> str:
    plan, trace = report["plan"], report["trace"]
    title = f"fleet drill: {plan['nodes']} nodes x {plan['days']:g} days, jobs {plan['jobs']}, seed {plan['seed']}"
    mean_ettr = sum(j["ettr"] for j in report["jobs"]) / max(1, len(report["jobs"]))
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{STYLE}</style></head><body>'
        f"<h1>{escape(title)}</h1>"
        f'<p class="head">mean ETTR over jobs <b>{pct(mean_ettr)}</b> · {trace["failures"]} failures · '
        f"{report['job_downtime_seconds']['hits']} hits · {report['incidents']['total']} incidents · "
        f"{report['pages']['total']} pages · monthly cost {usd(report['monthly_cost']['total_usd'])}</p>"
        f'<p class="note">{plan["rate_per_1000_node_days"]} failures / 1,000 node-days, {plan["spares"]} spares; checkpoint every '
        f"{plan['checkpoint_interval_seconds']:g} s (blocking cost {plan['checkpoint_cost_seconds']:g} s), restart "
        f"{plan['restart_seconds']:g} s (modelled)</p>"
        "<h2>Job downtime over the run</h2>"
        + downtime_chart(report)
        + "<h2>ETTR per day</h2>"
        + ettr_chart(report)
        + "<h2>Concurrent recoveries</h2>"
        f"<p>peak {report['series']['concurrent_executions']['peak']} executions running at once, "
        f"{report['executions']['total']} in all</p>"
        + concurrency_chart(report)
        + _tables(report)
        + "<h2>The goodput planner on this run, and what to change</h2>"
        + f'<pre class="goodput">{escape(NEWLINE.join(format_goodput(report)))}</pre>'
        + "</body></html>\n"
    )
