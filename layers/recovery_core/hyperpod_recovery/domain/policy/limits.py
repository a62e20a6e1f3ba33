"""AWS's hard limits, and how the pipeline's parameters are derived so that no accepted combination
of them can cross one.

Step Functions ends a Standard execution whose history passes 25,000 events (States.Runtime: the
execution fails, holding what it held until Reconcile Execution releases it). The only unbounded
loop in our workflows is the wait for rejoin, so its number of checks is bounded here: a long
deadline with a short poll interval gets longer waits, never more checks.

JobRecovery runs NodeRecovery as a nested execution and must not give up on it mid-recovery: its
timeout is derived from the same deadlines (``node_recovery_time_bound_seconds``).

tests/contract/test_workflow_limits.py counts the worst-case history of both workflows from the ASL and
checks these constants against it, over the whole parameter space the template accepts.
"""

from __future__ import annotations

import math

# Step Functions quotas (https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html).
EXECUTION_HISTORY_EVENTS = 25_000
STATE_MACHINE_NAME_LENGTH = 80
EXECUTION_NAME_LENGTH = 80
PAYLOAD_BYTES = 256 * 1024

# Checks of one wait for rejoin, over all its windows together (rejoin_window_seconds).
MAX_REJOIN_CHECKS = 300
# Replacements a node gets after its repair failed the health gate (domain/nodes/health_gate.py): each
# brings a rejoin window of its own, and a second Resume Nodes.
MAX_GATE_REPLACEMENTS = 1
# Waits a Cluster Event may cut short, per watch (Wait For Rejoin registers for events only for the
# first this many checks): a burst of events about one node cannot drive more passes than this
# through the loop than its waits' lengths allow.
MAX_EVENT_WAKES = 20

# What NodeRecovery spends besides its deadlines, at worst (22.2 h): the controller steps' own timeouts
# (Cordon Nodes 600 s, Resume Nodes 600 s once per rejoin, and Resubmit Job 900 s for each wave of
# four of the 64 jobs an incident carries, split between Resubmit Jobs Now and Resubmit Jobs, when
# the agent never answers), every Lambda step at its timeout (45 s) on every retry (a stopped
# function's retry included), one last check past the deadline, and a shrunk job's grow-back (every
# one of its MAX_GROW_BACK_CHECKS checks and each shrunk job's Grow Back Job at their slowest; its
# waits are the grace, added on its own): 77,695 s today. The contract
# test recomputes it from the ASL and the template and fails if it grows past this. A parent waiting too long costs nothing (the
# child's own end ends the wait); a parent giving up too soon stops a recovery in the middle.
NODE_RECOVERY_OVERHEAD_SECONDS = 80_000


def rejoin_wait_bounds(poll_seconds: int, max_poll_seconds: int, window_seconds: int) -> tuple[int, int]:
    """(first wait, longest wait) between rejoin checks.

    The longest wait is never below the first (a maximum set below the first wait is the first
    wait), and neither is below ``window / MAX_REJOIN_CHECKS``: waits only grow, so a window of
    ``window_seconds`` is covered by at most MAX_REJOIN_CHECKS checks (plus the one at the deadline)."""
    floor = math.ceil(window_seconds / MAX_REJOIN_CHECKS)
    first = max(poll_seconds, floor)
    return first, max(first, max_poll_seconds)


def rejoin_window_seconds(reboot_deadline_seconds: int, rejoin_deadline_seconds: int) -> int:
    """The longest one execution waits for its nodes, all windows together: a rebooted node that
    does not come back is replaced at the reboot deadline and the replacement then has the whole
    rejoin deadline; a replacement that fails the health gate is replaced again, with a rejoin
    deadline of its own, at most MAX_GATE_REPLACEMENTS times."""
    return reboot_deadline_seconds + (1 + MAX_GATE_REPLACEMENTS) * rejoin_deadline_seconds


def node_recovery_time_bound_seconds(reboot_deadline_seconds: int, rejoin_deadline_seconds: int, grow_back_grace_seconds: int = 0) -> int:
    """The longest a NodeRecovery execution can run: JobRecovery's timeout for its nested run. A shrunk
    job's grow-back waits at most its grace past its first check, plus one wait between checks (at most
    the grace again: domain/elastic/grow_back.py); its checks and grow-backs are in the overhead."""
    window = rejoin_window_seconds(reboot_deadline_seconds, rejoin_deadline_seconds)
    return window + 2 * grow_back_grace_seconds + NODE_RECOVERY_OVERHEAD_SECONDS


def execution_time_bound_seconds(
    reboot_deadline_seconds: int, rejoin_deadline_seconds: int, max_backoff_seconds: int, grow_back_grace_seconds: int = 0
) -> int:
    """The longest an execution of either workflow can run: NodeRecovery's bound, or JobRecovery's,
    which runs one NodeRecovery nested (or waits for another incident's, as long), waits out its
    restart backoff, and takes its own steps (far within a second NodeRecovery's overhead). The
    sweep of ended executions reads back this far for what may have ended since its last sweep."""
    node = node_recovery_time_bound_seconds(reboot_deadline_seconds, rejoin_deadline_seconds, grow_back_grace_seconds)
    return 2 * node + max_backoff_seconds
