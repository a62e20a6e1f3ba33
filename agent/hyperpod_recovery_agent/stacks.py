"""Reading ``py-spy dump`` output: where each thread is stuck, as one short signature per node.

py-spy prints, per process, a ``Process <pid>: <command>`` and a ``Python v<version> (<path>)`` line,
then per thread a ``Thread <id> (<status>): "<name>"`` line followed by its frames, innermost first,
each indented four spaces: ``    <function> (<file>:<line>)`` (``--native`` frames may have no line;
``--locals`` adds deeper-indented lines under a frame).
"""

from __future__ import annotations

import hashlib
import re

_THREAD = re.compile(r"^Thread \S+ \([^)]*\)")
# Exactly four spaces: ``--locals`` lines are indented deeper and are not frames.
_FRAME = re.compile(r"^ {4}(?! )(?P<function>.+?) \((?P<file>.+?)(?::(?P<line>\d+))?\)\s*$")
SIGNATURE_CHARS = 16


def innermost_frames(dump: str) -> set[tuple[str, str]]:
    """(function, file) of the first frame of every thread in the dump (every process of it)."""
    frames: set[tuple[str, str]] = set()
    in_thread_header = False
    for line in dump.splitlines():
        if _THREAD.match(line):
            in_thread_header = True
            continue
        if in_thread_header:
            frame = _FRAME.match(line)
            if frame is not None:
                frames.add((frame["function"], frame["file"]))
            in_thread_header = False  # a thread with no frame (idle native thread) adds nothing
    return frames


def stack_signature(dump: str) -> str | None:
    """A digest of the SET of innermost frames of every thread: line numbers, thread order, pids and
    how many ranks share a frame do not count, so nodes stuck in the same place share it. None when
    the text holds no frame (nothing to compare)."""
    frames = innermost_frames(dump)
    if not frames:
        return None
    canonical = "\n".join(f"{function}\t{file}" for function, file in sorted(frames))
    return hashlib.sha256(canonical.encode()).hexdigest()[:SIGNATURE_CHARS]
