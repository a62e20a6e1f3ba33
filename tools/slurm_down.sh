#!/usr/bin/env bash
# Stop what tools/slurm_up.sh started (jobs first: a daemon killed mid-job leaves slurmstepd orphans).
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}
SLURM_CONF=$BASE/slurm.conf scancel -u root 2>/dev/null; sleep 1
for f in "$BASE"/slurmd-*.pid "$BASE"/slurmctld.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
sleep 1; true
