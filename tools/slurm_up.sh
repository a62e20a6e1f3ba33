#!/usr/bin/env bash
# A real single-host Slurm (slurmctld + one slurmd per fake node) for the agent's tests and
# `make drill SLURM=real`. Root, no systemd; all state under $BASE. Prints `export SLURM_CONF=...`
# (and, for 24.11, the PATH of its commands).
#   SLURM_VERSION=22.05 (default): Debian 12's packages on this host.
#   SLURM_VERSION=24.11: Debian 13's, in the trixie root of tools/slurm_root.sh (made when missing). Its
#     daemons and munged run chrooted into the root, with the host's /home, /root, /tmp, this checkout
#     and $BASE bound at the same paths (jobs see the files they see on a controller); its commands run
#     on the host through $SLURM_ROOT/host-bin (SLURM_CONF is the same path on both sides).
# Adapted from ../shared/reference/examples/slurm_ci_up.sh (accounting left out: the agent needs none).
# Each action is announced on stderr before it is taken, and what it leaves behind is recorded under
# $BASE for tools/slurm_down.sh: munged.pid if it started munged, installed-packages if it installed them,
# version for the Slurm it started.
set -euo pipefail
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}; NODES=${NODES:-4}; HOST=$(hostname -s)
SLURM_VERSION=${SLURM_VERSION:-22.05}
SLURM_ROOT=${SLURM_ROOT:-/var/lib/hyperpod-recovery/trixie}
EPILOG=${EPILOG:-}   # optional EpilogSlurmctld program (the agent's job-ended hook)
TOOLS=$(cd "$(dirname "$0")" && pwd)
pkgs="slurmctld slurmd slurm-client munge"
say() { echo "slurm_up: $*" >&2; }
case "$SLURM_VERSION" in 22.05|24.11) ;; *) say "SLURM_VERSION=$SLURM_VERSION: 22.05 or 24.11"; exit 2 ;; esac
running_version=$(cat "$BASE/version" 2>/dev/null || echo 22.05)
if [ -f "$BASE/slurmctld.pid" ] && [ "$(cat "/proc/$(tr -dc 0-9 < "$BASE/slurmctld.pid")/comm" 2>/dev/null)" = slurmctld ] \
   && [ "$running_version" != "$SLURM_VERSION" ]; then
  say "Slurm $running_version already runs from $BASE: stop it first (BASE=$BASE tools/slurm_down.sh --purge, or make drill-down)"
  exit 1
fi

installed=""
in_root=()   # how a daemon is started: as is (22.05), or chrooted into the trixie root (24.11)
if [ "$SLURM_VERSION" = 22.05 ]; then
  if ! dpkg -s $pkgs >/dev/null 2>&1; then
    say "installing Debian packages $pkgs (apt-get; they stay installed)"
    apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    installed=$pkgs
  fi
else
  SLURM_ROOT=$(SLURM_ROOT=$SLURM_ROOT "$TOOLS/slurm_root.sh")
  export PATH="$SLURM_ROOT/host-bin:$PATH"
  in_root=(chroot "$SLURM_ROOT")
fi
said_path() { [ "$SLURM_VERSION" = 22.05 ] || echo "export PATH=$SLURM_ROOT/host-bin:\$PATH"; }
# Already up (make drill SLURM=real run twice): say where, change nothing.
if [ -f "$BASE/slurmctld.pid" ] && kill -0 "$(cat "$BASE/slurmctld.pid")" 2>/dev/null \
   && SLURM_CONF=$BASE/slurm.conf timeout 5 scontrol ping 2>/dev/null | grep -q UP; then
  say "Slurm $SLURM_VERSION already running from $BASE: nothing started"
  echo "export SLURM_CONF=$BASE/slurm.conf"; said_path; exit 0
fi
mkdir -p "$BASE"/{state,spool,log,jobs}
[ -z "$installed" ] || echo "$installed" > "$BASE/installed-packages"
echo "$SLURM_VERSION" > "$BASE/version"

if [ "$SLURM_VERSION" = 22.05 ]; then
  [ -f /etc/munge/munge.key ] || { say "creating /etc/munge/munge.key"; /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
  if ! munge -n >/dev/null 2>&1; then
    say "starting munged (Slurm's authentication daemon; tools/slurm_down.sh --munged or --purge stops it)"
    runuser -u munge -- /usr/sbin/munged
    # munged writes its pid file once it has forked: wait for it (bounded), then keep a copy as ours
    for _ in $(seq 1 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
    if [ -s /run/munge/munged.pid ]; then cp /run/munge/munged.pid "$BASE/munged.pid"; else say "munged wrote no pid file: stop it yourself"; fi
  fi
  auth_info=""; plugin_dir=""
else
  # The root sees the host's files where a job, a test or a drill puts them, at the same paths.
  repo=$(cd "$TOOLS/.." && pwd)
  binds=(/home /root /tmp "$repo" "$BASE" ${SLURM_ROOT_BINDS:-})
  mounted() { awk -v p="$1" '$5 == p { found = 1 } END { exit !found }' /proc/self/mountinfo; }
  mount_in_root() {  # mount_in_root <host path> <path in the root> <mount arguments...>
    local target=$SLURM_ROOT$2
    mounted "$target" && return 0
    mkdir -p "$target"; mount "${@:3}" "$target"
  }
  say "mounting /proc, /sys, the host's / (at /run/host) and ${binds[*]} into $SLURM_ROOT (tools/slurm_down.sh unmounts them)"
  mount_in_root proc /proc -t proc proc
  mount_in_root /sys /sys --rbind /sys
  mount_in_root / /run/host --bind /
  bound=()
  for dir in "${binds[@]}"; do
    [ -d "$dir" ] || continue
    case "$SLURM_ROOT/" in "$dir"/*) say "$SLURM_ROOT is under $dir, which it would bind into itself: choose another SLURM_ROOT"; exit 1 ;; esac
    covered=0; for done_dir in "${bound[@]}"; do case "$dir/" in "$done_dir"/*) covered=1 ;; esac; done
    [ $covered = 1 ] || { mount_in_root "$dir" "$dir" --bind "$dir"; bound+=("$dir"); }
  done
  # The root's own munged, for this Slurm alone: its key, socket and pid file under $BASE.
  munge_dir=$BASE/munge
  mkdir -p "$munge_dir/private"; chmod 755 "$munge_dir"; chmod 700 "$munge_dir/private"
  [ -f "$munge_dir/private/munge.key" ] || { dd if=/dev/urandom bs=1 count=1024 of="$munge_dir/private/munge.key" 2>/dev/null; chmod 400 "$munge_dir/private/munge.key"; }
  if ! [ -f "$BASE/munged.pid" ] || [ "$(cat "/proc/$(tr -dc 0-9 < "$BASE/munged.pid")/comm" 2>/dev/null)" != munged ]; then
    say "starting the root's munged (socket $munge_dir/munge.socket.2)"
    "${in_root[@]}" /usr/sbin/munged --socket="$munge_dir/munge.socket.2" --key-file="$munge_dir/private/munge.key" \
      --log-file="$BASE/log/munged.log" --pid-file="$munge_dir/munged.pid" --seed-file="$munge_dir/private/munged.seed" 2>/dev/null
    for _ in $(seq 1 50); do [ -s "$munge_dir/munged.pid" ] && break; sleep 0.1; done
    cp "$munge_dir/munged.pid" "$BASE/munged.pid"
  fi
  auth_info="AuthInfo=socket=$munge_dir/munge.socket.2"
  plugin_dir="PluginDir=$SLURM_ROOT/usr/lib/x86_64-linux-gnu/slurm-wlm"
  if [ -n "$EPILOG" ]; then
    # slurmctld runs its epilog in the root; the agent's hook is a host program: run it on the host.
    cat > "$BASE/epilog-on-host.sh" <<HOOK
#!/bin/sh
PATH=$SLURM_ROOT/host-bin:/usr/sbin:/usr/bin:/sbin:/bin exec /usr/sbin/chroot /run/host "$EPILOG"
HOOK
    chmod 755 "$BASE/epilog-on-host.sh"
    EPILOG=$BASE/epilog-on-host.sh
  fi
fi
cat > "$BASE/slurm.conf" <<CONF
ClusterName=ci
SlurmctldHost=$HOST(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
$auth_info
$plugin_dir
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
say "starting Slurm $SLURM_VERSION: slurmctld and $NODES slurmd as root (state, logs and pid files in $BASE; left running)"
"${in_root[@]}" slurmctld -f "$SLURM_CONF"
for n in $(seq 1 "$NODES"); do "${in_root[@]}" slurmd -f "$SLURM_CONF" -N "ip-10-1-0-$n"; done
for _ in $(seq 1 60); do [ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] && break; sleep 0.5; done
[ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] || { echo "slurm did not come up; see $BASE/log" >&2; exit 1; }
echo "export SLURM_CONF=$SLURM_CONF"
said_path
