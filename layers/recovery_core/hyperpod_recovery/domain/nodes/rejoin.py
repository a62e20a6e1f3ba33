"""Has every repaired node come back? And how long to wait before asking again.

A watched node is found again by the identities HyperPod gives, and the watch says which one
matched (``WatchedNode.matched_by``):

* ``logical_id``: a new instance carrying the node's NodeLogicalId, the identity HyperPod says
  "persists throughout its lifecycle" (whether a replacement keeps it is not documented);
* ``hostname``: a new instance under the node's hostname, which is its Slurm name (what HyperPod
  documents for a replacement: "a fresh instance using the same host name");
* ``instance_group``: the only new instance of the node's group, and only while nothing else can
  explain it: the node is the only one of its group without a replacement found otherwise, and
  every place the group is missing (DescribeCluster's TargetCount, read fresh) is one of ours;
* ``instance_id``: its own instance, back from a reboot (ours, or HyperPod's own repair).

Identities that disagree (the logical id on one new instance, the hostname on another) match
nothing: the node waits, and if the deadline comes the cause names what was seen.

HyperPod's status is no evidence of a reboot: it may show a node Running all through one. A node
counts as back from a reboot only when slurmctld reports a boot time later than the reboot request
and slurmd responds (and HyperPod shows it Running). While such a node is Running without that
evidence, Check Rejoin asks the controller agent (Read Boot Times) before it decides; and a rebooted
node is replaced at the reboot deadline only after a reading taken then shows it did not come back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.nodes.cadence import expected_in, next_wait_seconds
from hyperpod_recovery.domain.nodes.replace import ALREADY_IN_PROGRESS_CODES
from hyperpod_recovery.errors import RejoinDeadlineExceeded

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import BatchOutcome, ClusterNode
    from hyperpod_recovery.models.commands import NodeBoot
    from hyperpod_recovery.models.node_recovery import IdentityMatch, RejoinWatch, WatchedNode

RUNNING = "Running"
# An instance in one of these is on its way out: never anyone's replacement, never back.
GONE_STATUSES = frozenset({"ShuttingDown", "NotFound"})
# Boot readings one execution takes (each is an agent round trip and about 70 history events); the
# last is kept for the reboot deadline, so that no rebooted node is replaced without one.
MAX_BOOT_READINGS = 30
NEW_NODES_NAMED = 5  # new instances a deadline cause lists per instance group


def back_from_reboot(boot: NodeBoot | None, since: datetime) -> bool:
    """slurmctld shows the node booted after ``since`` (its slurmd registered since) and responding."""
    return boot is not None and boot.boot_time is not None and boot.boot_time > since and boot.responding


@dataclass(frozen=True)
class _Found:
    own: ClusterNode | None  # the node's own instance, if listed
    node: ClusterNode | None = None  # what it is followed by: a replacement, or its own instance back
    match: IdentityMatch | None = None
    conflict: str = ""


def _live(node: ClusterNode) -> bool:
    return node.status not in GONE_STATUSES


def _launched(node: ClusterNode) -> float:
    return node.launch_time.timestamp() if node.launch_time is not None else 0.0


def _pick(candidates: list[ClusterNode]) -> ClusterNode | None:
    """The instance HyperPod is bringing up among several (a retried replacement): Running first, then the newest."""
    live = [n for n in candidates if _live(n)]
    return max(live, key=lambda n: (n.status == RUNNING, _launched(n))) if live else None


def _identify(watch: RejoinWatch, nodes: list[ClusterNode]) -> dict[str, _Found]:
    """Each waiting node's replacement by logical id or hostname, or its own instance."""
    excluded = watch.excluded_instances
    by_id = {n.node_id: n for n in nodes}
    by_logical: dict[str, list[ClusterNode]] = {}
    by_host: dict[str, list[ClusterNode]] = {}
    for node in nodes:
        if node.node_id in excluded:
            continue  # a watched node's own instance, or a repair that failed its health gate, is nobody's replacement
        if node.logical_id:
            by_logical.setdefault(node.logical_id, []).append(node)
        name = node.name_in(watch.orchestrator)
        if name:  # (on EKS a name carries its instance: only the node's own, which is excluded above)
            by_host.setdefault(name, []).append(node)
    found: dict[str, _Found] = {}
    for w in watch.nodes:
        own = by_id.get(w.node_id)
        logical = _pick(by_logical.get(w.logical_id, [])) if w.logical_id else None
        host = _pick(by_host.get(w.slurm_node, []))
        if logical is not None and host is not None and logical.node_id != host.node_id:
            found[w.node_id] = _Found(own, conflict=f"its NodeLogicalId is on {logical.node_id} but its hostname on {host.node_id}")
        elif logical is not None:
            found[w.node_id] = _Found(own, logical, "logical_id")
        elif host is not None:
            found[w.node_id] = _Found(own, host, "hostname")
        elif own is not None and _live(own) and w.may_return_as_itself:
            found[w.node_id] = _Found(own, own, "instance_id")
        else:
            found[w.node_id] = _Found(own)
    return found


def _is_new(node: ClusterNode, since: datetime) -> bool:
    return node.launch_time is not None and node.launch_time > since


def _old(nodes: list[ClusterNode], group: str, since: datetime) -> set[str]:
    return {n.node_id for n in nodes if n.instance_group == group and _live(n) and not _is_new(n, since)}


def _match_by_group(
    watch: RejoinWatch,
    nodes: list[ClusterNode],
    found: dict[str, _Found],
    target_counts: Callable[[], Mapping[str, int]],
    group_nodes: Callable[[str], list[ClusterNode]] | None,
) -> None:
    """The only new instance of a group for the only node of that group still unaccounted for, when
    the group's TargetCount says nothing else is missing from it. Conservative by construction: a
    scale-up, HyperPod's own repair of another node, or two of ours missing make it ambiguous."""
    excluded = watch.excluded_instances
    claimed = {f.node.node_id for f in found.values() if f.node is not None} | {
        w.replacement_node_id for w in watch.nodes if w.rejoined and w.replacement_node_id
    }
    counts: Mapping[str, int] | None = None
    for group in sorted({w.instance_group for w in watch.nodes if w.instance_group}):
        members = [w for w in watch.nodes if w.instance_group == group]
        # (a watched node's own instance is in ``nodes`` whenever it exists, so this much needs no more)
        gone = [w for w in members if w.node_id not in _old(nodes, group, watch.started_at)]
        waiting = [w for w in gone if not w.rejoined and found[w.node_id].match is None and not found[w.node_id].conflict]
        new = [
            n
            for n in nodes
            if n.instance_group == group
            and _live(n)
            and _is_new(n, watch.started_at)
            and n.node_id not in excluded
            and n.node_id not in claimed
        ]
        if len(waiting) != 1 or len(new) != 1 or new[0].status != RUNNING:
            continue  # (a match matters once the new node runs: TargetCount is read only then)
        counts = target_counts() if counts is None else counts
        target = counts.get(group)
        old = _old(nodes if group_nodes is None else group_nodes(group), group, watch.started_at)
        if target is None or target - len(old) != len(gone):
            continue  # a place of the group is missing that none of ours explains
        (w,) = waiting
        found[w.node_id] = _Found(found[w.node_id].own, new[0], "instance_group")


def _boot_since(watch: RejoinWatch, node: WatchedNode, repairs_since: datetime | None) -> datetime:
    """A boot after this moment is a reboot of the repair: our request, or (HyperPod's own repair,
    under way before we asked) the fault."""
    if node.initiation == "initiated" or repairs_since is None:
        return watch.started_at
    return min(watch.started_at, repairs_since)


def observe_rejoin(
    watch: RejoinWatch,
    nodes: list[ClusterNode],
    now: datetime,
    poll_seconds: int,
    max_poll_seconds: int,
    *,
    target_counts: Callable[[], Mapping[str, int]] | None = None,
    group_nodes: Callable[[str], list[ClusterNode]] | None = None,
    repairs_since: datetime | None = None,
) -> RejoinWatch:
    """The watch after one look at the cluster's nodes (and at the boot reading Read Boot Times
    left in it, which this consumes). ``nodes``: every instance launched since the repairs began
    and each watched node's own (if it still exists); any other instance may be left out.
    ``target_counts``: each instance group's TargetCount, and ``group_nodes``: one group's every
    instance (None: ``nodes`` holds them all), both asked only when a node could be matched by its group."""
    reading = watch.boot_reading
    boots = {b.name: b for b in reading.result.nodes} if reading is not None else {}
    found = _identify(watch, nodes)
    if target_counts is not None:
        _match_by_group(watch, nodes, found, target_counts, group_nodes)

    updated: list[WatchedNode] = []
    for watched in watch.nodes:
        if watched.rejoined:
            updated.append(watched)
            continue
        f = found[watched.node_id]
        booted_at = watched.booted_at
        boot = boots.get(watched.slurm_node)
        if f.match == "instance_id" and booted_at is None and back_from_reboot(boot, _boot_since(watch, watched, repairs_since)):
            booted_at = boot.boot_time if boot is not None else None
        follows = f.node
        replacement = follows if f.match in ("logical_id", "hostname", "instance_group") else None
        new_name = replacement.name_in(watch.orchestrator) if replacement else None
        shown = follows or f.own
        # On EKS a replacement is back when its Kubernetes node is: Ready, with HyperPod's checks settled.
        settled = watch.orchestrator == "slurm" or (new_name is not None and _settled(boots.get(new_name)))
        updated.append(
            watched.model_copy(
                update={
                    "status": shown.status if shown else "NotListed",
                    "replacement_node_id": replacement.node_id if replacement else None,
                    "replacement_slurm_node": new_name if new_name != watched.slurm_node else None,
                    "renamed_in_service": watch.orchestrator == "eks" and new_name is not None and new_name != watched.slurm_node,
                    "matched_by": f.match,
                    "booted_at": booted_at,
                    # back: Running, and either a replacement whose name is known (on EKS: whose node
                    # is Ready and settled) or its own instance booted again
                    "rejoined": follows is not None
                    and follows.status == RUNNING
                    and (new_name is not None and settled if replacement is not None else booted_at is not None),
                }
            )
        )

    done = watch.dry_run or all(n.rejoined for n in updated)
    checks = watch.checks + (1 if reading is None else 0)  # a reading's own check continues the one that asked for it
    if not done and now >= watch.deadline:
        raise RejoinDeadlineExceeded(_not_back_text(watch, updated, nodes, found, checks))
    remaining = (watch.deadline - now).total_seconds()
    boot_check = [] if done or reading is not None else _boot_check(watch, updated, now)
    return watch.model_copy(
        update={
            "at": now,
            "checks": checks,
            "nodes": updated,
            "done": done,
            "next_wait_seconds": 0
            if done
            else next_wait_seconds(checks, poll_seconds, max_poll_seconds, remaining, expected_in(watch, now), announced=watch.announced),
            "boot_check": boot_check,
            "boot_reading": None,
            "boot_readings": watch.boot_readings + (1 if reading is not None else 0),
        }
    )


def _settled(boot: NodeBoot | None) -> bool:
    """An EKS replacement's node as the orchestrator read it: Ready, and HyperPod's checks done
    (its verdict, good or bad, is the health gate's to act on: domain/nodes/eks_nodes.py)."""
    return boot is not None and boot.responding


def _boot_check(watch: RejoinWatch, nodes: list[WatchedNode], now: datetime) -> list[str]:
    """Nodes to ask the orchestrator about now: those HyperPod shows Running as themselves without
    boot evidence yet, at the reboot deadline every rebooted node not back (before any is replaced),
    and on EKS each replacement HyperPod shows Running whose Kubernetes node is not known Ready yet."""
    at_reboot_deadline = watch.reboot_deadline is not None and now >= watch.reboot_deadline
    budget = MAX_BOOT_READINGS - watch.boot_readings - (0 if at_reboot_deadline else 1)
    if budget <= 0:
        return []
    rebooted = [
        n.slurm_node
        for n in nodes
        if not n.rejoined
        and n.matched_by == "instance_id"
        and n.booted_at is None
        and (n.status == RUNNING or (at_reboot_deadline and n.action == "reboot"))
    ]
    replaced = [
        n.replacement_slurm_node
        for n in nodes
        if watch.orchestrator == "eks" and not n.rejoined and n.status == RUNNING and n.renamed_in_service and n.replacement_slurm_node
    ]
    return rebooted + replaced


def reboots_past_deadline(watch: RejoinWatch, now: datetime, read: set[str]) -> list[WatchedNode]:
    """Rebooted nodes to replace (the ladder's next rung): past the reboot deadline, their own
    instance still there, and the boot reading just taken (``read``: the nodes it covered) showing
    no boot since the reboot. A node Slurm shows booted is never replaced; one without a reading
    waits for it."""
    if watch.dry_run or watch.reboot_deadline is None or now < watch.reboot_deadline:
        return []
    return [
        n
        for n in watch.nodes
        if n.action == "reboot" and not n.rejoined and n.booted_at is None and n.matched_by == "instance_id" and n.slurm_node in read
    ]


def escalate_to_replace(watch: RejoinWatch, outcome: BatchOutcome, node_ids: list[str], now: datetime) -> RejoinWatch:
    """The watch after replacing rebooted nodes that did not come back. A node whose replacement
    could not even start keeps waiting as it is, and the overall deadline escalates it."""
    failed = {f.node_id: f.error_code for f in outcome.failed}
    updated = []
    for node in watch.nodes:
        if node.node_id in node_ids and (node.node_id not in failed or failed[node.node_id] in ALREADY_IN_PROGRESS_CODES):
            node = node.model_copy(update={"action": "replace", "escalated_to_replace_at": now, "matched_by": None})
        updated.append(node)
    return watch.model_copy(update={"nodes": updated, "done": False, "boot_check": []})


# --- what a human reads -------------------------------------------------------------------------
_MATCHED_BY = {
    "logical_id": "same NodeLogicalId",
    "hostname": "same hostname",
    "instance_group": "the only new node of its instance group",
}


def _boot_evidence(node: WatchedNode, orchestrator: Literal["slurm", "eks"]) -> str:
    if orchestrator == "eks":
        return (
            f"Ready with a new boot id since {node.booted_at:%Y-%m-%d %H:%M:%S} UTC"
            if node.booted_at
            else "not seen Ready with a new boot id"
        )
    return f"slurmctld BootTime {node.booted_at:%Y-%m-%d %H:%M:%S} UTC" if node.booted_at else "not seen booted since by slurmctld"


def rejoin_text(node: WatchedNode, orchestrator: Literal["slurm", "eks"] = "slurm") -> str:
    """How a node came back, and by which identity it was recognised."""
    if node.action == "check":
        return f"{node.slurm_node} ({node.node_id}, never taken out of HyperPod: a hang's suspect, checked in place)"
    if node.matched_by == "instance_id" or (node.replacement_node_id is None and node.matched_by is None):
        boot = f", {_boot_evidence(node, orchestrator)}" if node.booted_at else ""
        return f"{node.slurm_node} back from reboot as {node.node_id} (same instance{boot})"
    how = _MATCHED_BY[node.matched_by or "hostname"]
    if node.renamed_in_service:
        how += f"; Kubernetes node {node.replacement_slurm_node}"
    elif node.replacement_slurm_node:
        how += f"; it is {node.replacement_slurm_node} in Slurm now, {node.slurm_node} is left drained"
    elif node.matched_by != "hostname":
        how += " and hostname"
    return f"{node.slurm_node} as {node.replacement_node_id} ({how})"


def renamed_text(node: WatchedNode) -> str:
    """For a node whose replacement came back under another Slurm name: what it is now."""
    how = _MATCHED_BY[node.matched_by or "hostname"]
    return f"{node.slurm_node} is {node.replacement_slurm_node} now ({how}; {node.slurm_node} is left drained)"


def _describe(node: ClusterNode, orchestrator: Literal["slurm", "eks"]) -> str:
    name = node.name_in(orchestrator)
    facts = [name] if name else []
    facts += [f"logical id {node.logical_id}"] if node.logical_id else []
    return f"{node.node_id} ({', '.join([*facts, node.status])})"


def _waiting_text(node: WatchedNode, f: _Found, orchestrator: Literal["slurm", "eks"]) -> str:
    who = f"{node.slurm_node} ({node.node_id}"
    who += f", group {node.instance_group}" if node.instance_group else ""
    who += f", logical id {node.logical_id}" if node.logical_id else ""
    who += ")"
    if f.conflict:
        return f"{who}: identities disagree, {f.conflict}"
    if node.replacement_node_id:
        return f"{who}: replacement {node.replacement_node_id} ({_MATCHED_BY[node.matched_by or 'hostname']}) is {node.status}"
    if node.matched_by == "instance_id":
        return f"{who}: its instance is {node.status}, {_boot_evidence(node, orchestrator)}"
    own = f"its instance is {f.own.status}" if f.own is not None else "its instance is no longer listed"
    if node.replaced_again and node.gate_failure is not None:
        own = f"its first replacement {node.gate_failure.instance} failed the health check and was replaced again"
    return f"{who}: {own}; no new instance carries its NodeLogicalId or hostname"


def _not_back_text(watch: RejoinWatch, updated: list[WatchedNode], nodes: list[ClusterNode], found: dict[str, _Found], checks: int) -> str:
    pending = [n for n in updated if not n.rejoined]
    text = f"{len(pending)} node(s) not back by {watch.deadline.strftime('%Y-%m-%d %H:%M:%S')} UTC after {checks} checks: " + "; ".join(
        _waiting_text(n, found[n.node_id], watch.orchestrator) for n in pending
    )
    seen = []
    for group in sorted({n.instance_group for n in pending if n.instance_group}):
        # (a repair that failed the health gate is nobody's replacement: never offered as one)
        new = [n for n in nodes if n.instance_group == group and _is_new(n, watch.started_at) and n.node_id not in watch.excluded_instances]
        listed = ", ".join(_describe(n, watch.orchestrator) for n in new[:NEW_NODES_NAMED])
        listed += f" and {len(new) - NEW_NODES_NAMED} more" if len(new) > NEW_NODES_NAMED else ""
        seen.append(f"new in group {group} since {watch.started_at:%H:%M:%S} UTC: {listed or 'none'}")
    return text + (". Seen: " + "; ".join(seen) if seen else "")
