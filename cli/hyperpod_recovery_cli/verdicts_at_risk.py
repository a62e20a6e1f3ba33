"""The at-risk verdicts and each signal's measured precision and recall, from the ledger: how a
signal earns ``enforce`` (docs/runbook.md "At-risk signals").

    hyperpod-recovery verdicts at-risk --stack NAME [--since 30d|ISO] [--signal SIGNAL] [--json]

At Risk keeps one verdict per signal, node and episode (``ATRISK#<epoch>#<signal>#<instance>``), and
its tick writes beside it whether the node failed within the horizon. Here each pending verdict is
read as it would settle now. Per signal: precision = failed / (failed + not failed); recall = the
node failures of the window that a verdict of the signal preceded within its horizon / every node
failure of the window (a node incident in the ledger; a planned swap's own is not a failure); a
verdict whose node a planned swap took (swapped) counts in neither. A pending verdict with a planned
swap stays pending here until the tick reads the swap's record (domain/at_risk/outcomes.py).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TextIO

from hyperpod_recovery.domain.at_risk.outcomes import SignalStats, node_failures, settle, signal_stats
from hyperpod_recovery.domain.at_risk.settings import SignalSettings, parse_signal_settings
from hyperpod_recovery.models.at_risk import AtRiskRecord
from hyperpod_recovery_cli.oncall import EXIT_OK, _age, _since, _table, deployed, stack_option

DEFAULT_SINCE = "30d"
MAX_INCIDENTS = 2000  # node incidents read for the window's failures (newest first)
PARAMETER = "AtRiskSignals"


def _settings(parameters: dict[str, str]) -> SignalSettings:
    try:
        return parse_signal_settings(parameters.get(PARAMETER, ""))
    except ValueError:
        return parse_signal_settings("")  # (the stack could not deploy such a value: its functions refuse it)


def share(part: int, whole: int) -> str:
    return f"{part / whole * 100:.0f} % ({part}/{whole})" if whole else "n/a (0)"


def stats_rows(stats: Sequence[SignalStats], settings: SignalSettings) -> list[list[str]]:
    rows = [["SIGNAL", "MODE", "VERDICTS", "FAILED", "NOT FAILED", "PENDING", "SWAPPED", "PRECISION", "RECALL"]]
    for s in stats:
        rows.append(
            [s.signal, settings.of(s.signal).mode, str(s.verdicts), str(s.failed), str(s.not_failed), str(s.pending), str(s.swapped),
             share(s.failed, s.failed + s.not_failed), share(s.caught, s.failures)]
        )  # fmt: skip
    return rows


def _row(record: AtRiskRecord, now: datetime) -> list[str]:
    v = record.verdict
    outcome = record.outcome + (f" ({record.incident})" if record.incident else "")
    action = f"started {record.execution}" if record.execution else "observed"
    return [
        v.verdict_id,
        _age(v.observed_at, now),
        v.signal,
        v.mode,
        v.node or v.instance_id,
        v.source,
        f"{v.failure_chance:.0%}",
        outcome,
        action,
    ]


def list_at_risk(args: argparse.Namespace, client: Callable[[str], Any], out: TextIO, now: datetime) -> int:
    since = _since(args.since or DEFAULT_SINCE, now)
    assert since is not None  # (a default is given)
    place = deployed(args, client)
    settings = _settings(place.stack.parameters)
    # (verdicts observed before the window may have preceded its failures: read back one horizon more)
    earliest = since - timedelta(seconds=settings.longest_horizon_seconds)
    records = [r for r in place.ledger.at_risk_records(place.cluster, since=earliest) if not args.signal or r.verdict.signal == args.signal]
    failures = node_failures(place.ledger.incidents(place.cluster, since=earliest, limit=MAX_INCIDENTS))
    shown = sorted(
        (settle(r, failures, now) or r for r in records if r.verdict.observed_at >= since),
        key=lambda r: r.verdict.observed_at,
        reverse=True,
    )
    stats = signal_stats(records, failures, now, since)
    if args.json:
        document = {
            "since": since.isoformat(),
            "node_failures": len({(f.instance_id, f.at) for f in failures if f.at >= since}),
            "verdicts": [json.loads(r.model_dump_json()) for r in shown],
            "signals": {
                s.signal: {
                    "mode": settings.of(s.signal).mode, "verdicts": s.verdicts, "failed": s.failed, "not_failed": s.not_failed,
                    "pending": s.pending, "swapped": s.swapped, "precision": s.precision, "recall": s.recall,
                    "failures_caught": s.caught, "failures": s.failures,
                }
                for s in stats
            },
        }  # fmt: skip
        print(json.dumps(document, indent=2), file=out)
        return EXIT_OK
    said = ", ".join([f"since {since:%Y-%m-%d %H:%M} UTC"] + ([f"signal {args.signal}"] if args.signal else []))
    print(f"{place.cluster} (stack {place.stack.name}): {len(shown)} at-risk verdict(s) ({said})", file=out)
    if shown:
        _table([["VERDICT", "AGE", "SIGNAL", "MODE", "NODE", "SOURCE", "CHANCE", "OUTCOME", "ACTION"]] + [_row(r, now) for r in shown], out)
        print("\nevidence:", file=out)
        for record in shown:
            print(f"  {record.verdict.verdict_id}: {'; '.join(record.verdict.evidence.splitlines()) or '-'}", file=out)
    failed_nodes = len({(f.instance_id, f.at) for f in failures if f.at >= since})
    print(
        f"\nper signal (node failures in the window: {failed_nodes}; precision = failed / settled, recall = failures a verdict preceded):",
        file=out,
    )
    if stats:
        _table(stats_rows(stats, settings), out)
    else:
        print("  no verdict in the window", file=out)
    return EXIT_OK


def add_command(actions: Any, region: argparse.ArgumentParser, wrap: Callable[[Callable[..., int], bool], Any]) -> None:
    """``verdicts at-risk`` beside ``verdicts list|confirm|reject`` (verdicts.add_commands)."""
    listed = actions.add_parser(
        "at-risk", parents=[region], help="at-risk verdicts newest first with their evidence, then each signal's precision and recall"
    )
    stack_option(listed)
    listed.add_argument("--since", help=f"only those observed since: a duration (30m, 6h, 7d) or an ISO time (default {DEFAULT_SINCE})")
    listed.add_argument("--signal", help="only this signal's")
    listed.add_argument("--json", action="store_true")
    listed.set_defaults(run=wrap(list_at_risk, False))
