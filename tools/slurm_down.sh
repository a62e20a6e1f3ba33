#!/usr/bin/env bash
# Stop what tools/slurm_up.sh started under $BASE: its jobs first (a daemon killed mid-job leaves
# slurmstepd orphans), then its slurmd and slurmctld.
#   --munged (the tests' teardown): also stop munged if slurm_up.sh started it (keeps $BASE's logs).
#   --purge (make drill-down): --munged, and remove $BASE.
# Only processes named by $BASE's pid files, and only if they still are the daemon the file names.
# Says what it stopped and what it left; exit 1 if something it should have stopped is still running.
set -uo pipefail
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}
purge=0; munged=0
case "${1:-}" in
  --purge) purge=1; munged=1 ;;
  --munged) munged=1 ;;
  "") ;;
  *) echo "slurm_down: unknown option ${1}: --munged or --purge" >&2; exit 2 ;;
esac
say() { echo "slurm_down: $*"; }
# A zombie (its parent has not reaped it yet) has stopped too.
running() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
is() { running "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]; }
left=0
stop() {  # stop <pid file> <process name>
  local file=$1 name=$2 pid
  [ -f "$file" ] || return 0
  pid=$(tr -dc 0-9 < "$file")
  if [ -z "$pid" ] || ! is "$pid" "$name"; then
    [ $purge = 1 ] && say "$name: not running (stale $(basename "$file"))"
    rm -f "$file"; return 0
  fi
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 100); do running "$pid" || break; sleep 0.1; done
  running "$pid" && { kill -KILL "$pid" 2>/dev/null; for _ in $(seq 1 20); do running "$pid" || break; sleep 0.1; done; }
  if running "$pid"; then say "$name (pid $pid): still running"; left=1; else say "stopped $name (pid $pid)"; rm -f "$file"; fi
}

if [ ! -d "$BASE" ]; then
  [ $purge = 1 ] && say "nothing under $BASE: no Slurm of tools/slurm_up.sh to stop"
  exit 0
fi
# Every user's jobs (the tests also submit as a non-root user). Without a slurm.conf Slurm's commands
# retry reading it for 60 s: nothing was started there anyway; without slurmctld nothing runs either.
if [ -f "$BASE/slurm.conf" ] && [ -f "$BASE/slurmctld.pid" ] && is "$(tr -dc 0-9 < "$BASE/slurmctld.pid")" slurmctld; then
  export SLURM_CONF=$BASE/slurm.conf
  jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${jobs// }" ]; then
    scancel $jobs 2>/dev/null
    # until slurmd has ended them (squeue lists COMPLETING jobs too), 30 s at most
    for _ in $(seq 1 150); do [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
    say "cancelled job(s) ${jobs% }"
  fi
fi
for file in "$BASE"/slurmd-*.pid; do stop "$file" slurmd; done
stop "$BASE/slurmctld.pid" slurmctld
if [ $munged = 1 ]; then
  if [ -f "$BASE/munged.pid" ]; then
    stop "$BASE/munged.pid" munged
  elif pid=$(pgrep -x munged 2>/dev/null | head -1) && [ -n "$pid" ]; then
    say "munged (pid $pid): left running, it was running before tools/slurm_up.sh"
  fi
fi
if [ $purge = 1 ]; then
  pkgs="slurmctld slurmd slurm-client munge"
  if [ -f "$BASE/installed-packages" ]; then
    installed=$(cat "$BASE/installed-packages")
    say "left installed: $installed (tools/slurm_up.sh installed them; apt-get purge $installed removes them)"
  elif dpkg -s $pkgs >/dev/null 2>&1; then
    say "left installed: $pkgs (they were installed before tools/slurm_up.sh ran)"
  fi
  if [ $left = 1 ]; then
    say "kept $BASE: a daemon it names is still running"
  elif [ -f "$BASE/slurm.conf" ] || [ -d "$BASE/state" ]; then  # never a directory slurm_up.sh did not lay out
    rm -rf "$BASE" && say "removed $BASE"
  else
    say "kept $BASE: not a tools/slurm_up.sh directory (no slurm.conf, no state/)"
  fi
fi
exit $left
