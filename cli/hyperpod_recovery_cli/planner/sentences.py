"""The planner's words, one source for each sentence: the terminal table (``hyperpod-recovery goodput``)
and the fleet drill's report (sandbox/fleet/report.py) print a plan with these."""

from __future__ import annotations

from hyperpod_recovery_cli.planner.model import Ceiling, Change, EttrEstimate, PlannedSwaps, RecallEstimate

WHAT_TO_CHANGE = "what to change (each alone; the ETTR it buys):"
NOTHING_TO_CHANGE = "what to change: nothing the planner models buys 0.01 points or more"
CEILINGS = "the ceiling each assumption sets (that loss alone, every other away: an assumption, not a result):"
RECALL_HEAD = ("RECALL", "SWAP NOW", "ETTR NOW", "SWAP RECOMMENDED", "ETTR RECOMMENDED", "SPARES", "INTERVAL")


def pct(ratio: float) -> str:
    return f"{100 * ratio:.2f} %"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def ettr_line(ettr: EttrEstimate) -> str:
    """The headline: Daly's ETTR, and the first-order split beside it (planned swaps' share when they are counted)."""
    swaps = f" | planned swaps {pct(ettr.swap_loss)}" if ettr.swap_loss > 0 else ""
    return (
        f"ETTR {pct(ettr.ettr)} (Daly)   first order {pct(ettr.first_order_ettr)}: checkpoint {pct(ettr.checkpoint_loss)} | "
        f"rework {pct(ettr.rework_loss)} | recovery {pct(ettr.recovery_loss)}{swaps}"
    )


def ceiling_line(ceiling: Ceiling) -> str:
    return f"{pct(ceiling.ettr):>8} ({-ceiling.points:+6.2f} pts)  {ceiling.assumption}"


def ceiling_lines(ceilings: list[Ceiling]) -> list[str]:
    """The ceilings block: its heading, then one line per assumption, the last all of them together."""
    return [CEILINGS] + [f"  {ceiling_line(c)}" for c in ceilings] if ceilings else []


def swaps_setting(swaps: PlannedSwaps) -> str:
    return (
        f"recall {100 * swaps.recall:.0f} % [{swaps.recall_provenance}], lead {minutes(swaps.lead_seconds)}"
        + (f" (median, lognormal σ {swaps.lead_shape:g})" if swaps.lead_shape else "")
        + ", "
        f"{100 * swaps.false_positive:.0f} % of verdicts false, {minutes(swaps.swap_lost_seconds)} lost past the commit, "
        f"restart {minutes(swaps.swap_restart_seconds)}" + (f" (assumed: {', '.join(swaps.assumed)})" if swaps.assumed else "")
    )


def swaps_lines(swaps: PlannedSwaps) -> list[str]:
    """Planned swaps as the plan counts them: the figures, what follows per day, the rule's decision for one verdict."""
    return [
        f"planned swaps {swaps_setting(swaps)}",
        f"              {swaps.swaps_per_day:.2f} swaps a day ({swaps.false_alarms_per_day:.2f} of them false alarms), each "
        f"{minutes(swaps.swap_seconds)} of the job; {pct(swaps.saved_share)} of failures swapped first; "
        f"{pct(swaps.before_commit_share)} of the foreseen ones come before the next commit",
        f"              per verdict: {swaps.decision}",
    ]


def recalls_heading(recalls: list[RecallEstimate]) -> str:
    first = recalls[0]
    return (
        f"planned swaps at several recalls ({minutes(first.lead_seconds)} lead, {100 * first.false_positive:.0f} % of verdicts false, "
        f"{minutes(first.swap_lost_seconds)} lost past the commit; now: the spares and interval given; recommended: the spares "
        "and the best interval):"
    )


def recall_rows(recalls: list[RecallEstimate]) -> list[list[str]]:
    """ETTR per recall, as given and with the recommended spares and interval (a table's rows, its head first)."""
    rows = [list(RECALL_HEAD)]
    for r in recalls:
        rows.append(
            [
                f"{100 * r.recall:.0f} %",
                r.action if r.recall else "-",
                pct(r.ettr),
                r.recommended_action if r.recall else "-",
                pct(r.recommended_ettr),
                str(r.recommended_spares),
                minutes(r.recommended_interval_seconds),
            ]
        )
    return rows


def change_sentence(change: Change) -> str:
    return f"{change.now} -> {change.to}: ETTR {pct(change.ettr)} ({change.gain_points:+.2f} pts); {change.how}"


def change_lines(changes: list[Change]) -> list[str]:
    """The "what to change" block: its heading, then one line per change, the most ETTR first."""
    if not changes:
        return [NOTHING_TO_CHANGE]
    width = max(len(c.kind) for c in changes)
    return [WHAT_TO_CHANGE] + [f"  {c.kind.replace('_', ' '):<{width}}  {change_sentence(c)}" for c in changes]
