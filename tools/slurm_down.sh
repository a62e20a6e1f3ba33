#!/usr/bin/env bash
# Stop what tools/slurm_up.sh started (jobs first: a daemon killed mid-job leaves slurmstepd orphans).
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}
# Every user's jobs (the tests also submit as a non-root user). Without a slurm.conf Slurm's commands
# retry reading it for 60 s: nothing was started there anyway.
if [ -f "$BASE/slurm.conf" ]; then
  jobs=$(SLURM_CONF=$BASE/slurm.conf timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  [ -n "${jobs// }" ] && SLURM_CONF=$BASE/slurm.conf scancel $jobs 2>/dev/null
  sleep 1
fi
for f in "$BASE"/slurmd-*.pid "$BASE"/slurmctld.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
sleep 1; true
