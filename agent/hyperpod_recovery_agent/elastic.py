"""A Slurm job's shrink-and-continue opt-in (models/elastic.py), read by the agent when it describes a job.

The comment's ``resume=elastic,min=N`` first; else the batch script's own node range (``#SBATCH
--nodes=A-B``), which the agent must read from the script: Slurm 22.05 resets a job's ``max_nodes`` when
it starts, so neither ``squeue --json`` nor ``scontrol show job`` shows a started job's range (measured
on 22.05.8: pending ``node_count=1 max_nodes=2``, ``NumNodes=1-2``; running ``node_count=2 max_nodes=0``,
``NumNodes=2``; the submission environment has no trace of it either).
"""

from __future__ import annotations

import re
import shlex

from hyperpod_recovery.models.elastic import (
    ELASTIC_SOURCE_TEXT,
    MAX_ELASTIC_NODES,
    ElasticOptInUnreadable,
    ElasticPolicy,
    elastic_choice_in_comment,
)

_DIRECTIVE = "#SBATCH"
_RANGE = re.compile(r"([0-9]{1,6})-([0-9]{1,6})")


def node_range_in_script(script: str) -> tuple[int, int] | None:
    """The node range the script's own ``#SBATCH`` directives ask for, as sbatch reads them: only the
    directives before the first line that is neither blank nor a comment, a later ``--nodes``/``-N``
    overriding an earlier one (sbatch parses them as one command line). None when the last one is a
    single count, or there is none; ElasticOptInUnreadable for a range no job can have (0, or reversed)."""
    value: str | None = None
    for line in script.splitlines():
        if not line.startswith(_DIRECTIVE):
            if line.strip() and not line.lstrip().startswith("#"):
                break  # sbatch stops reading directives at the first command
            continue
        rest = line[len(_DIRECTIVE) :]
        if rest and not rest[0].isspace():
            continue  # "#SBATCHX": not a directive
        found = _nodes_option(rest)
        if found is not None:
            value = found
    if value is None:
        return None
    match = _RANGE.fullmatch(value)
    if match is None:
        return None  # a single count (or what sbatch itself refuses): rigid
    low, high = int(match[1]), int(match[2])
    if not 1 <= low <= high <= MAX_ELASTIC_NODES:
        raise ElasticOptInUnreadable(f"--nodes={value} is not a range of 1 to {MAX_ELASTIC_NODES} nodes")
    return low, high


def _nodes_option(arguments: str) -> str | None:
    """The last ``--nodes``/``-N`` value of one directive line's arguments (a ``#`` starts a comment)."""
    try:
        words = shlex.split(arguments, comments=True)
    except ValueError:  # an unbalanced quote: sbatch warns and reads the words as they are
        words = arguments.split("#", 1)[0].split()
    value: str | None = None
    for at, word in enumerate(words):
        following = words[at + 1] if at + 1 < len(words) else None
        if word.startswith("--nodes="):
            value = word.removeprefix("--nodes=")
        elif word in ("--nodes", "-N") and following is not None:
            value = following
        elif word.startswith("-N") and not word.startswith("--") and len(word) > 2:
            value = word[2:]
    return value


def elastic_opt_in(comment: str, script: str | None, num_nodes: int) -> tuple[ElasticPolicy | None, str | None]:
    """(policy, problem) of a job: its comment's opt-in, else its script's node range when the job runs
    within it (a count outside it came from the command line, which overrides the script: rigid). An
    opt-in that cannot be read is no policy, and the problem says why."""
    try:
        chosen = elastic_choice_in_comment(comment)
    except ElasticOptInUnreadable as exc:
        return None, f"{ELASTIC_SOURCE_TEXT['comment']}… cannot be read: {exc}"
    if chosen is not None:
        return chosen, None
    try:
        found = node_range_in_script(script or "")
    except ElasticOptInUnreadable as exc:
        return None, f"{ELASTIC_SOURCE_TEXT['node_range']} cannot be read: {exc}"
    if found is None or not found[0] <= num_nodes <= found[1]:
        return None, None
    return ElasticPolicy(min_nodes=found[0], max_nodes=found[1], source="node_range"), None
