#!/usr/bin/env bash
# A real single-host Slurm (Debian's slurmctld + one slurmd per fake node) for the agent's tests and
# `make drill SLURM=real`. Root, no systemd; all state under $BASE. Prints `export SLURM_CONF=...`.
# Adapted from ../shared/reference/examples/slurm_ci_up.sh (accounting left out: the agent needs none).
# Each action is announced on stderr before it is taken, and what it leaves behind is recorded under
# $BASE for tools/slurm_down.sh --purge (make drill-down): munged.pid if it started munged,
# installed-packages if it installed them.
set -euo pipefail
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}; NODES=${NODES:-4}; HOST=$(hostname -s)
EPILOG=${EPILOG:-}   # optional EpilogSlurmctld program (the agent's job-ended hook)
pkgs="slurmctld slurmd slurm-client munge"
say() { echo "slurm_up: $*" >&2; }
installed=""
if ! dpkg -s $pkgs >/dev/null 2>&1; then
  say "installing Debian packages $pkgs (apt-get; they stay installed)"
  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  installed=$pkgs
fi
# Already up (make drill SLURM=real run twice): say where, change nothing.
if [ -f "$BASE/slurmctld.pid" ] && kill -0 "$(cat "$BASE/slurmctld.pid")" 2>/dev/null \
   && SLURM_CONF=$BASE/slurm.conf timeout 5 scontrol ping 2>/dev/null | grep -q UP; then
  say "already running from $BASE: nothing started"
  echo "export SLURM_CONF=$BASE/slurm.conf"; exit 0
fi
mkdir -p "$BASE"/{state,spool,log,jobs}
[ -z "$installed" ] || echo "$installed" > "$BASE/installed-packages"
[ -f /etc/munge/munge.key ] || { say "creating /etc/munge/munge.key"; /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n >/dev/null 2>&1; then
  say "starting munged (Slurm's authentication daemon; tools/slurm_down.sh --munged or --purge stops it)"
  runuser -u munge -- /usr/sbin/munged
  # munged writes its pid file once it has forked: wait for it (bounded), then keep a copy as ours
  for _ in $(seq 1 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  if [ -s /run/munge/munged.pid ]; then cp /run/munge/munged.pid "$BASE/munged.pid"; else say "munged wrote no pid file: stop it yourself"; fi
fi
cat > "$BASE/slurm.conf" <<CONF
ClusterName=ci
SlurmctldHost=$HOST(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$BASE/slurmctld.pid
SlurmdPidFile=$BASE/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=30
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
${EPILOG:+EpilogSlurmctld=$EPILOG}
GresTypes=gpu
Licenses=fluent:4
NodeName=ip-10-1-0-[1-$NODES] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[17001-$((17000+NODES))] CPUs=1 RealMemory=1000 Gres=gpu:1 Features=fast,ib State=UNKNOWN
PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
# One "GPU" per node so that jobs can ask for GRES/GPUs, licenses and features like a training job does
# (tests/slurm/test_resubmit_as_owner.py). The gpu plugin wants a device file; /dev/null is one, and
# nothing uses it (task/none, no cgroups).
echo "NodeName=ip-10-1-0-[1-$NODES] Name=gpu File=/dev/null" > "$BASE/gres.conf"
export SLURM_CONF=$BASE/slurm.conf
say "starting slurmctld and $NODES slurmd as root (state, logs and pid files in $BASE; left running)"
slurmctld -f "$SLURM_CONF"
for n in $(seq 1 "$NODES"); do slurmd -f "$SLURM_CONF" -N "ip-10-1-0-$n"; done
for _ in $(seq 1 60); do [ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] && break; sleep 0.5; done
[ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] || { echo "slurm did not come up; see $BASE/log" >&2; exit 1; }
echo "export SLURM_CONF=$SLURM_CONF"
