"""An incident's node locks as a human knows the nodes: by instance id, with the hostnames whose
locks (``host:<name>``) go with them. A lock's key is never printed: ``locks release`` takes nodes."""

from __future__ import annotations

from collections.abc import Collection

from hyperpod_recovery.models.records import HOST_LOCK_PREFIX


def locked_nodes(locks: Collection[str]) -> tuple[list[str], list[str]]:
    """(instance ids, hostnames) of an incident's lock names (a hostname's lock is ``host:<name>``)."""
    instances = sorted(n for n in locks if not n.startswith(HOST_LOCK_PREFIX))
    hosts = sorted(n.removeprefix(HOST_LOCK_PREFIX) for n in locks if n.startswith(HOST_LOCK_PREFIX))
    return instances, hosts


def locked_text(locks: Collection[str]) -> str:
    """``i-0ab, i-0cd (ip-10-1-0-3, ip-10-1-0-4)``: the nodes by instance, their hostnames after."""
    instances, hosts = locked_nodes(locks)
    named = [h for h in hosts if h not in instances]
    return ", ".join(instances or hosts) + (f" ({', '.join(named)})" if instances and named else "")
