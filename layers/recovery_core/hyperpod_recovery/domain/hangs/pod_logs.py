"""A hung EKS job's evidence, from what Kubernetes keeps of it: the last lines of its pods' logs, its
status conditions and the events of it and of its pods. Pure: the EKS orchestrator reads, this shapes.

There is no stack dump on EKS (no agent on the nodes), so a node's signature is where its log stopped:
a digest of its pod's last log line with everything that varies between ranks and steps (numbers,
hex ids, timestamps) taken out. Ranks stuck at the same collective print the same last line and share
a signature; a node stuck elsewhere prints another (suspects.py from_evidence names the odd one out).

A silent log (no line at all) is a place too: where most nodes print and one does not, the silent one
is the odd one (the ranks that wait in a collective print the watchdog's timeout; the rank that never
reached it has nothing to say). Where most nodes are silent, the few that print are the ranks the job
logs on (rank 0 only, as most training scripts do), not the ranks that are stuck: their silence is
then not compared, so a rank that merely logs is never blamed for it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_recovery.redact import LEGACY_CUT, redact

SIGNATURE_CHARS = 16  # as the Slurm agent's stack signatures (agent/hyperpod_recovery_agent/stacks.py)
CUT_MARKER = LEGACY_CUT  # a pod log's cut start, marked as the agent marks a cut stack dump
SILENT = "<no log line>"  # what a silent log's signature is a digest of

# Terminal escapes (colours, cursor moves) and every control character but newline and tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# What differs between ranks, steps and moments but not between places: timestamps first (their
# digits and separators go as one), then hex ids and addresses, then any number (ranks, steps, losses).
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8,}\b")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# Numbers joined by separators are one value (a time or date in another format, a version): 9:5:1 is #.
_JOINED = re.compile(r"#(?:[:.,/-]#)+")


def clean(text: str) -> str:
    """The log as a terminal would have left it, in printable text: escapes gone, and of a line a
    progress bar rewrote (carriage returns), only what was written last."""
    lines = []
    for line in _ESCAPES.sub("", text).split("\n"):
        shown = line.rstrip("\r").rsplit("\r", 1)[-1]
        lines.append(_CONTROL.sub(" ", shown))
    return "\n".join(lines)


def last_line(text: str) -> str | None:
    """The log's last line with something on it, or None for a silent log."""
    for line in reversed(clean(text).split("\n")):
        if line.strip():
            return line.strip()
    return None


def normalized(line: str) -> str:
    """The place a log line says the rank is at: numbers, hex ids and timestamps are ``#``."""
    line = _TIMESTAMP.sub("#", line)
    line = _HEX.sub("#", line)
    line = _JOINED.sub("#", _NUMBER.sub("#", line))
    return " ".join(line.split())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:SIGNATURE_CHARS]


def log_signature(texts: Sequence[str]) -> str:
    """A node's signature from the logs of its pods of the job (usually one): the set of their last
    lines, normalized, order-free; a node whose pods print nothing is SILENT's."""
    places = sorted({normalized(line) for line in map(last_line, texts) if line is not None})
    return _digest("\n".join(places) if places else SILENT)


SILENT_SIGNATURE = _digest(SILENT)


def comparable(signatures: Mapping[str, str]) -> dict[str, str | None]:
    """The nodes' signatures as the classifier compares them: a silent node's is kept only where most
    nodes print (module docstring), else it is None (not compared)."""
    silent = sum(1 for s in signatures.values() if s == SILENT_SIGNATURE)
    keep_silent = silent * 2 < len(signatures)
    return {node: (s if s != SILENT_SIGNATURE or keep_silent else None) for node, s in signatures.items()}


def keep_end(text: str, limit: int) -> str:
    """The end of a text (a log's newest lines), marked as cut, within ``limit`` characters."""
    if len(text) <= limit:
        return text
    if limit <= len(CUT_MARKER):
        return text[len(text) - limit :]
    return CUT_MARKER + text[len(text) - (limit - len(CUT_MARKER)) :]


@dataclass(frozen=True)
class PodLog:
    """One pod's log tail as read: ``cut`` when the API server stopped at the byte bound (its newest
    lines are then not in ``text``)."""

    pod: str
    container: str
    text: str
    cut: bool = False


def node_text(logs: Sequence[PodLog], limit: int, lines: int) -> str:
    """One node's evidence text: each pod's header and its log's end, the whole within ``limit``
    (each pod keeps an equal share of it, its newest lines)."""
    if not logs:
        return ""
    share = max((limit - (len(logs) - 1)) // len(logs), 0)  # the newlines between pods count too
    parts = []
    for log in logs:
        said = "last lines, cut at the byte bound: the newest are not shown" if log.cut else f"last {lines} lines"
        header = f"== pod {log.pod} container {log.container} ({said}) ==\n"
        body = clean(log.text).strip("\n") or "(no log line)"
        parts.append(header + keep_end(body, share - len(header)) if len(header) < share else header[:share])
    return "\n".join(parts)[:limit]


def node_signature(logs: Sequence[PodLog]) -> str | None:
    """The node's signature, None when a pod's last line is unknown (its tail was cut at the byte bound)."""
    if not logs or any(log.cut for log in logs):
        return None
    return log_signature([log.text for log in logs])


# --- the job's own text: its conditions and the events of it and its pods ------------------------
def _event_time(event: Mapping[str, Any]) -> str:
    """When the event last happened: core/v1 events set lastTimestamp, those written through
    events.k8s.io set series.lastObservedTime or eventTime."""
    series = event.get("series") or {}
    metadata = event.get("metadata") or {}
    return str(
        event.get("lastTimestamp") or series.get("lastObservedTime") or event.get("eventTime") or metadata.get("creationTimestamp") or ""
    )


def _event_count(event: Mapping[str, Any]) -> int:
    series = event.get("series") or {}
    return int(event.get("count") or series.get("count") or 1)


def event_lines(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per event, newest first: when, type, reason, how often, of what, and what it said."""
    ordered = sorted(events, key=_event_time, reverse=True)
    lines = []
    for event in ordered:
        involved = event.get("involvedObject") or {}
        count = _event_count(event)
        lines.append(
            " ".join(
                part
                for part in (
                    _event_time(event) or "-",
                    str(event.get("type") or "-"),
                    str(event.get("reason") or "-"),
                    f"(x{count})" if count > 1 else "",
                    f"{involved.get('kind') or '?'}/{involved.get('name') or '?'}:",
                    " ".join(clean(str(event.get("message") or "")).split()),
                )
                if part
            )
        )
    return lines


def condition_lines(job: Mapping[str, Any]) -> list[str]:
    """The job's status conditions, in the order its operator wrote them."""
    lines = []
    for condition in (job.get("status") or {}).get("conditions") or []:
        if not isinstance(condition, Mapping):
            continue
        when = condition.get("lastTransitionTime") or condition.get("lastUpdateTime") or "-"
        reason = f" {condition['reason']}" if condition.get("reason") else ""
        message = " ".join(clean(str(condition.get("message") or "")).split())
        lines.append(f"{when} {condition.get('type')}={condition.get('status')}{reason}{': ' + message if message else ''}")
    return lines


def job_text(title: str, job: Mapping[str, Any], events: Sequence[Mapping[str, Any]], notes: Sequence[str], limit: int) -> str:
    """The job's evidence text within ``limit``: its conditions first, then the events newest first
    (the oldest are what the bound cuts), then what could not be read."""
    lines = [title, "conditions:", *(f"  {line}" for line in condition_lines(job) or ["(none)"])]
    lines += ["events (newest first):", *(f"  {line}" for line in event_lines(events) or ["(none)"])]
    text = redact("\n".join(lines))  # before the cut: a cut first could keep a secret's start
    tail = "\n".join(notes)
    if not tail:
        return text[:limit]
    room = max(limit - len(tail) - 1, 0)
    return (text[:room] + "\n" + tail)[:limit]


# Kubeflow's training operator requires a PyTorchJob's training container to be named so.
KUBEFLOW_CONTAINER = "pytorch"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"


def training_container(pod: Mapping[str, Any]) -> str | None:
    """The container whose log is the training's: ``pytorch`` (a PyTorchJob's), else the one the pod
    names as its default (as kubectl logs picks it), else its first; None for a pod without any."""
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping) and c.get("name")]
    if KUBEFLOW_CONTAINER in names:
        return KUBEFLOW_CONTAINER
    default = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    if default in names:
        return str(default)
    return names[0] if names else None
