"""Secrets a drill's hung job prints (a fault's ``stacks: secret_in_log``), and where a drill looks for
them afterwards: every channel's message, every incident record, every ledger item and every
execution's state. Issue 47: a hung job's last log line is redacted before it is kept or sent."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from hyperpod_recovery.domain.messages.wire import chat_notification, pager_event
from sandbox.slurm import DATA_LOADER_STACK

# AWS's documented example secret key (never a real one), and an API token of Hugging Face's shape.
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # noqa: S105 (planted on purpose)
API_TOKEN = "hf_kTqZ3vXw9LmN4pRs7YbC2dFg6HjK8aQeUo"  # noqa: S105 (planted on purpose)
PLANTED = {"aws-secret-key": AWS_SECRET_KEY, "api-token": API_TOKEN}
PIECE = 12  # no piece of a planted secret this long may be found anywhere

# Where the hung rank printed them (EKS: its last log line), and what py-spy --locals shows of them (Slurm).
# (short enough that the record's and the messages' quote of a last line, 120 characters, holds both)
SECRET_LOG = f"[rank{{rank}}] DataLoader: s3 read stalled, aws_secret_access_key={AWS_SECRET_KEY} token={API_TOKEN}\n"
SECRET_LOCALS = f"""        Locals:
            aws_secret_access_key: "{AWS_SECRET_KEY}"
            hub: "Authorization: Bearer {API_TOKEN}\""""
SECRET_STACK = DATA_LOADER_STACK.replace("    read_shard (data.py:88)\n", f"    read_shard (data.py:88)\n{SECRET_LOCALS}\n")


def _pieces() -> set[str]:
    return {s[i : i + PIECE] for s in PLANTED.values() for i in range(len(s) - PIECE + 1)}


def leaks(text: str) -> bool:
    """Whether ``text`` holds a planted secret or a piece of one."""
    return any(piece in text for piece in _pieces())


def found_in(places: Iterable[tuple[str, Any]]) -> list[str]:
    """The names of the places (name, what it holds) that hold a planted secret or a piece of one."""
    return [name for name, held in places if leaks(held if isinstance(held, str) else json.dumps(held, default=str))]


def channel_copies(notifications: list[dict[str, str]]) -> list[tuple[str, Any]]:
    """Each notification as each channel carries it: the topic's text, the chat copy, the page."""
    copies: list[tuple[str, Any]] = []
    for n, note in enumerate(notifications):
        subject, body = note.get("subject", ""), note.get("message", "")
        copies += [
            (f"notification {n} (topic)", f"{subject}\n{body}"),
            (f"notification {n} (chat)", chat_notification(subject, body, {})),
            (f"notification {n} (pagerduty)", pager_event(subject, body, {})),
        ]
    return copies
