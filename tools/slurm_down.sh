#!/usr/bin/env bash
# Stop what tools/slurm_up.sh started under $BASE, whichever Slurm version it was ($BASE/version): its
# jobs first (a daemon killed mid-job leaves slurmstepd orphans), then its slurmd and slurmctld.
#   --munged (the tests' teardown): also stop munged if slurm_up.sh started it (keeps $BASE's logs).
#   --purge (make drill-down): --munged, and remove $BASE.
# Slurm 24.11 (the trixie root): its munged is this Slurm's own and always stopped. Its mounts live in
# the mount namespace of its daemons (tools/slurm_root_ns.sh, recorded in $BASE/mount-ns), which ends
# with the last process in it: nothing is unmounted here, and nothing was mounted on the host. Which
# root it ran from is read from $BASE/root, never from the environment.
# Only processes named by $BASE's pid files, and only if they still are the daemon the file names.
# Says what it stopped and what it left; exit 1 if something it should have stopped is still running.
set -uo pipefail
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}
. "$(cd "$(dirname "$0")" && pwd)/slurm_lib.sh"
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
version=$(cat "$BASE/version" 2>/dev/null || echo 22.05)
# The root a 24.11 ran from (also when a 22.05 start has since rewritten $BASE/version): its commands,
# and its munged is ours. (A base of a 24.11 that never got as far as recording it: the default root.)
root=$(cat "$BASE/root" 2>/dev/null || true)
[ -n "$root" ] || [ "$version" = 22.05 ] || root=/var/lib/hyperpod-recovery/trixie
[ -z "$root" ] || { export PATH="$root/host-bin:$PATH"; munged=1; }
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
if [ -s "$BASE/mount-ns" ] && [ -n "$root" ]; then
  namespace=$(cat "$BASE/mount-ns")
  in_namespace=$(processes_in_root "$root" "$namespace")
  if [ -n "$in_namespace" ]; then
    say "still running in Slurm 24.11's mount namespace ($namespace), whose mounts stay until they end: $in_namespace"; left=1
  else
    say "Slurm 24.11's mount namespace ended with its processes (nothing of it was mounted on this host)"
    rm -f "$BASE/mount-ns"  # (a later namespace may get its number)
  fi
fi
if [ -n "$root" ] && on_host=$(awk -v p="$root/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo) && [ -n "$on_host" ]; then
  say "mounted on this host under $root, not by these tools (left as they are): $(echo $on_host)"
fi
if [ $purge = 1 ]; then
  pkgs="slurmctld slurmd slurm-client munge"
  if [ -n "$root" ]; then
    say "left the Slurm 24.11 root at $root for the next run (tools/slurm_root.sh --remove removes it)"
  elif [ -f "$BASE/installed-packages" ]; then
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
