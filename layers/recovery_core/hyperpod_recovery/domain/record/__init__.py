"""The incident's record: how each workflow's run ends (outcome, summary, timeline, phases,
durations), what became of each job and node, the record of an execution that ended unrecorded,
and secrets redacted before anything is kept."""
