"""The ledger item that carries a Slurm cluster's ``JobNodes`` from the controller agent (who writes
it, every 30 s) to Detect Hung Jobs (who reads it): one item in a partition of its own, the only
one the agent's role may write (template.yaml, ControllerAgentPolicy).

The snapshot is stored compact: every node name once, each job as ranges of indexes into that
sorted list (a job's nodes are mostly neighbours), the whole zlib-compressed in a Binary attribute.
2,000 jobs of 2,048 nodes each fit in a few kilobytes whether they share the nodes or hold blocks
of them (tests/contract/test_job_nodes_item.py); a snapshot over ``MAX_ITEM_BYTES`` is refused
whole (JobNodesTooLarge), never cut: a job left out would have its real reports ignored.
"""

import json
import zlib
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.models.job_nodes import JobNodes

ITEM_FORMAT = 1
SORT_KEY = "SNAPSHOT"
# DynamoDB's item limit is 400 KB (names and values): room for the keys and attributes around it.
MAX_ITEM_BYTES = 350_000
# Only for a partition the agent stopped writing: the reader's freshness bound says when one is old.
TTL_SECONDS = 86_400
# What a snapshot may inflate to: far above any real one, and a bound on a crafted item's cost.
_MAX_DOCUMENT_BYTES = 64_000_000


class JobNodesTooLarge(ValueError):
    """The snapshot would not fit one ledger item."""


class JobNodesUnreadable(ValueError):
    """The item is not a snapshot this code wrote (its message says which part)."""


def partition_key(cluster: str) -> str:
    return f"JOBNODES#{cluster}"


def _ranges(indexes: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for index in indexes:
        if runs and runs[-1][1] + 1 == index:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return runs


def encode(snapshot: JobNodes) -> bytes:
    names = sorted({node for nodes in snapshot.jobs.values() for node in nodes})
    position = {name: i for i, name in enumerate(names)}
    document = {
        "source": snapshot.source,
        "taken_at": snapshot.taken_at.isoformat(),
        "nodes": names,
        "jobs": {job: _ranges(sorted({position[n] for n in nodes})) for job, nodes in sorted(snapshot.jobs.items())},
        "ambiguous": sorted(snapshot.ambiguous),
    }
    return zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 9)


def decode(data: bytes) -> JobNodes:
    try:
        inflate = zlib.decompressobj()
        text = inflate.decompress(data, _MAX_DOCUMENT_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            raise JobNodesUnreadable(f"not one whole zlib stream within {_MAX_DOCUMENT_BYTES} bytes")
        document = json.loads(text)
        names = document["nodes"]
        jobs = {}
        for job, runs in document["jobs"].items():
            nodes: list[str] = []
            for start, end in runs:
                if not 0 <= start <= end < len(names):
                    raise JobNodesUnreadable(f"job {job}: range {start}-{end} outside {len(names)} nodes")
                nodes += names[start : end + 1]
            jobs[job] = nodes
        return JobNodes.model_validate({**{k: document[k] for k in ("source", "taken_at", "ambiguous")}, "jobs": jobs})
    except JobNodesUnreadable:
        raise
    except (zlib.error, ValueError, KeyError, TypeError, AttributeError, ValidationError, RecursionError) as exc:
        raise JobNodesUnreadable(f"{type(exc).__name__}: {str(exc)[:200]}") from exc


def item(snapshot: JobNodes, cluster: str) -> dict[str, Any]:
    """The PutItem ``Item`` (low-level attribute values); JobNodesTooLarge when it cannot fit."""
    data = encode(snapshot)
    if len(data) > MAX_ITEM_BYTES:
        raise JobNodesTooLarge(f"{len(snapshot.jobs)} jobs' nodes take {len(data)} bytes compressed, over {MAX_ITEM_BYTES}")
    return {
        "pk": {"S": partition_key(cluster)},
        "sk": {"S": SORT_KEY},
        "format": {"N": str(ITEM_FORMAT)},
        "taken_at": {"S": snapshot.taken_at.isoformat()},
        "data": {"B": data},
        "expires_at": {"N": str(int(snapshot.taken_at.timestamp()) + TTL_SECONDS)},
    }


def read_item(found: dict[str, Any], cluster: str) -> JobNodes:
    """The snapshot of a GetItem ``Item``; JobNodesUnreadable when it is not one for ``cluster``."""
    try:
        if found["pk"]["S"] != partition_key(cluster) or found["sk"]["S"] != SORT_KEY:
            raise JobNodesUnreadable("its key is not this cluster's snapshot")
        if found["format"]["N"] != str(ITEM_FORMAT):
            raise JobNodesUnreadable(f"format {found['format']['N']!r}, this code reads {ITEM_FORMAT}")
        data = found["data"]["B"]
    except (KeyError, TypeError) as exc:
        raise JobNodesUnreadable(f"missing {exc}") from exc
    snapshot = decode(bytes(data))
    if snapshot.source != "slurm":
        raise JobNodesUnreadable(f"source {snapshot.source!r} in a Slurm cluster's snapshot")
    return snapshot
