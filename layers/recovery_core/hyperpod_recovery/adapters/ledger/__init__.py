"""The ledger: our own state in one DynamoDB table (pk/sk strings, TTL attribute ``expires_at``), one
module per item family; ``DynamoLedger`` is all of them over one client (ports.Ledger and its roles).

    locks.py      NODE#<cluster>#<node>/LOCK and /HOLD: which incident holds a node, a human's opt-out
    jobs.py       JOB#<cluster>#<job>/RESUBMISSION, /RECREATION, /LINEAGE; LINEAGE#.../RESTART#<job>
    incidents.py  INCIDENT#<id>/RECORD, JOBS, EVIDENCE, REPLACEMENTS, EFFECT#<name>
    holdings.py   INCIDENT#<id>/HOLDINGS: what an incident holds (locks, cap places, claims) until it ends
    safety.py     CLUSTER#<cluster>/IN_RECOVERY, /BREAKER, /RECOVERY#<epoch>#<incident>; JOB_RESTARTS#<cluster>/<slot>
    waits.py      REJOIN#<cluster>/WAIT#<execution>; CLUSTER#<cluster>/ENDS_SWEPT; POLLED#<cluster>/<failure>
    verdicts.py   CLUSTER#<cluster>/VERDICT#<epoch>#<rule>#<job>: a hang or slowdown verdict and its review
    at_risk.py    CLUSTER#<cluster>/ATRISK#<epoch>#<signal>#<instance>: an at-risk verdict and its outcome; /ATRISK_SCORE#<signal>
    swaps.py      INCIDENT#<swap id>/SWAP: what a planned swap decided and did, with its numbers
    oncall.py     what only the operator's commands use: the IncidentsByCluster index, Scans of locks and
                  holds, CLUSTER#<cluster>/AUDIT#<epoch>#<n>
    table.py      every SDK call, its errors, and the one helper for conditional writes

No item grows with the cluster's history: what accumulates (recoveries, restarts, waits) is an item
per entry, read with one Query, and every item stays far below DynamoDB's 400 KB at the largest
parameters the template accepts (tests/contract/test_ledger_item_sizes.py). Every read-modify-write
is conditioned on what was read (a version, or the value itself), so two writers never erase each
other.
"""

from __future__ import annotations

from hyperpod_recovery.adapters.ledger.at_risk import AtRiskItems
from hyperpod_recovery.adapters.ledger.incidents import IncidentItems
from hyperpod_recovery.adapters.ledger.jobs import JobItems
from hyperpod_recovery.adapters.ledger.locks import NodeItems
from hyperpod_recovery.adapters.ledger.oncall import INCIDENTS_INDEX, OncallItems
from hyperpod_recovery.adapters.ledger.safety import SafetyItems
from hyperpod_recovery.adapters.ledger.swaps import SwapItems
from hyperpod_recovery.adapters.ledger.verdicts import VerdictItems
from hyperpod_recovery.adapters.ledger.waits import WaitItems


class DynamoLedger(NodeItems, JobItems, IncidentItems, SafetyItems, WaitItems, VerdictItems, AtRiskItems, SwapItems, OncallItems):
    """Every item family of the ledger's table over one DynamoDB client."""


__all__ = ["INCIDENTS_INDEX", "DynamoLedger"]
