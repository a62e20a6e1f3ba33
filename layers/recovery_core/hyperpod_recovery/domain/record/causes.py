"""A failure's cause as a human reads it: bounded, and a Lambda error's message rather than its JSON."""

from __future__ import annotations

import json

CAUSE_LIMIT = 4000


def error_message(cause: str | None) -> str:
    """A Lambda failure's Cause is a JSON document; a human wants its errorMessage."""
    if not cause:
        return ""
    try:
        parsed = json.loads(cause)
    except json.JSONDecodeError:
        return cause[:CAUSE_LIMIT]
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        return str(parsed["errorMessage"])[:CAUSE_LIMIT]
    return cause[:CAUSE_LIMIT]
