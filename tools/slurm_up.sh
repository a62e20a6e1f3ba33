#!/usr/bin/env bash
# A real single-host Slurm (slurmctld + one slurmd per fake node) for the agent's tests and
# `make drill SLURM=real`. Root, no systemd; all state under $BASE. Prints `export SLURM_CONF=...`
# (and, for 24.11, the PATH of its commands).
#   SLURM_VERSION=22.05 (default): Debian 12's packages on this host.
#   SLURM_VERSION=24.11: Debian 13's, in the trixie root of tools/slurm_root.sh (made when missing). Its
#     munged, slurmctld and slurmd run chrooted into the root, in a mount namespace of their own
#     (tools/slurm_root_ns.sh) where the root sees the host's /home, /root, /tmp, this checkout and $BASE
#     at the same paths (jobs see the files they see on a controller) and the host's / at /run/host;
#     nothing is mounted on the host. Its commands run on the host through $SLURM_ROOT/host-bin
#     (SLURM_CONF is the same path on both sides).
# Adapted from ../shared/reference/examples/slurm_ci_up.sh (accounting left out: the agent needs none).
# Each action is announced on stderr before it is taken, and what it leaves behind is recorded under
# $BASE for tools/slurm_down.sh: munged.pid if it started munged, installed-packages if it installed them,
# version for the Slurm it started; for 24.11 root, mount-ns and mounts (tools/slurm_root_ns.sh).
set -euo pipefail
BASE=${BASE:-${TMPDIR:-/tmp}/hyperpod-recovery-slurm}; NODES=${NODES:-4}; HOST=$(hostname -s)
SLURM_VERSION=${SLURM_VERSION:-22.05}
SLURM_ROOT=${SLURM_ROOT:-/var/lib/hyperpod-recovery/trixie}
EPILOG=${EPILOG:-}   # optional EpilogSlurmctld program (the agent's job-ended hook)
TOOLS=$(cd "$(dirname "$0")" && pwd)
pkgs="slurmctld slurmd slurm-client munge"
say() { echo "slurm_up: $*" >&2; }
. "$TOOLS/slurm_lib.sh"
case "$SLURM_VERSION" in 22.05|24.11) ;; *) say "SLURM_VERSION=$SLURM_VERSION: 22.05 or 24.11"; exit 2 ;; esac
running_version=$(cat "$BASE/version" 2>/dev/null || echo 22.05)
if [ -f "$BASE/slurmctld.pid" ] && [ "$(cat "/proc/$(tr -dc 0-9 < "$BASE/slurmctld.pid")/comm" 2>/dev/null)" = slurmctld ] \
   && [ "$running_version" != "$SLURM_VERSION" ]; then
  say "Slurm $running_version already runs from $BASE: stop it first (BASE=$BASE tools/slurm_down.sh --purge, or make drill-down)"
  exit 1
fi

installed=""
if [ "$SLURM_VERSION" = 22.05 ]; then
  if ! dpkg -s $pkgs >/dev/null 2>&1; then
    say "installing Debian packages $pkgs (apt-get; they stay installed)"
    apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    installed=$pkgs
  fi
else
  SLURM_ROOT=$(SLURM_ROOT=$SLURM_ROOT "$TOOLS/slurm_root.sh")
  export PATH="$SLURM_ROOT/host-bin:$PATH"
fi
said_path() { [ "$SLURM_VERSION" = 22.05 ] || echo "export PATH=$SLURM_ROOT/host-bin:\$PATH"; }
# Already up (make drill SLURM=real run twice): say where, change nothing.
if [ -f "$BASE/slurmctld.pid" ] && kill -0 "$(cat "$BASE/slurmctld.pid")" 2>/dev/null \
   && SLURM_CONF=$BASE/slurm.conf timeout 5 scontrol ping 2>/dev/null | grep -q UP; then
  say "Slurm $SLURM_VERSION already running from $BASE: nothing started"
  echo "export SLURM_CONF=$BASE/slurm.conf"; said_path; exit 0
fi
# What an earlier Slurm 24.11 of this $BASE left (a run interrupted half-way): its processes keep its
# namespace, with the host's files bound in it. Never start beside them (whichever version is asked for).
if [ -s "$BASE/mount-ns" ] && [ -s "$BASE/root" ]; then
  left=$(processes_in_root "$(cat "$BASE/root")" "$(cat "$BASE/mount-ns")")
  if [ -n "$left" ]; then
    say "an earlier Slurm 24.11 of $BASE still runs in its mount namespace ($(cat "$BASE/mount-ns")): $left; stop it first (BASE=$BASE tools/slurm_down.sh)"
    exit 1
  fi
fi
rm -f "$BASE/root" "$BASE/mount-ns" "$BASE/mounts"  # (an earlier 24.11's, ended: slurm_down.sh must not take them for this one's)
if [ "$SLURM_VERSION" != 22.05 ] && on_host=$(awk -v p="$SLURM_ROOT/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo) && [ -n "$on_host" ]; then
  say "mounted on this host under $SLURM_ROOT (not by these tools, whose mounts live in a namespace): $(echo $on_host); unmount them first"
  exit 1
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
  # The root's own munged, for this Slurm alone: its key, socket and pid file under $BASE.
  munge_dir=$BASE/munge
  mkdir -p "$munge_dir/private"; chmod 755 "$munge_dir"; chmod 700 "$munge_dir/private"
  [ -f "$munge_dir/private/munge.key" ] || { dd if=/dev/urandom bs=1 count=1024 of="$munge_dir/private/munge.key" 2>/dev/null; chmod 400 "$munge_dir/private/munge.key"; }
  auth_info="AuthInfo=socket=$munge_dir/munge.socket.2"
  plugin_dir="PluginDir=$SLURM_ROOT/usr/lib/$(root_triplet "$SLURM_ROOT")/slurm-wlm"
  if [ -n "$EPILOG" ]; then
    # slurmctld runs its epilog in the root; the agent's hook is a host program: run it on the host as
    # the namespace sees it (/run/host: the host's / with everything mounted under it).
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
if [ "$SLURM_VERSION" = 22.05 ]; then
  say "starting Slurm $SLURM_VERSION: slurmctld and $NODES slurmd as root (state, logs and pid files in $BASE; left running)"
  slurmctld -f "$SLURM_CONF"
  for n in $(seq 1 "$NODES"); do slurmd -f "$SLURM_CONF" -N "ip-10-1-0-$n"; done
else
  # The root sees the host's files where a job, a test or a drill puts them, at the same paths.
  repo=$(cd "$TOOLS/.." && pwd)
  binds=()
  for dir in /home /root /tmp "$repo" "$BASE" ${SLURM_ROOT_BINDS:-}; do
    [ -d "$dir" ] || continue
    case "$SLURM_ROOT/" in "$dir"/*) say "$SLURM_ROOT is under $dir, which it would bind into itself: choose another SLURM_ROOT"; exit 1 ;; esac
    covered=0; for done_dir in "${binds[@]}"; do case "$dir/" in "$done_dir"/*) covered=1 ;; esac; done
    [ $covered = 1 ] || binds+=("$dir")
  done
  # (what the namespace runs: a file, so that what started the daemons can be read afterwards)
  {
    echo '#!/bin/bash'
    echo '# tools/slurm_up.sh: starts Slurm 24.11 chrooted into its root, in the namespace of tools/slurm_root_ns.sh.'
    printf 'root=%q base=%q conf=%q munge_dir=%q nodes=%q\n' "$SLURM_ROOT" "$BASE" "$SLURM_CONF" "$munge_dir" "$NODES"
    cat <<'START'
set -eu
chroot "$root" /usr/sbin/munged --socket="$munge_dir/munge.socket.2" --key-file="$munge_dir/private/munge.key" \
  --log-file="$base/log/munged.log" --pid-file="$munge_dir/munged.pid" --seed-file="$munge_dir/private/munged.seed" 2>/dev/null
for _ in $(seq 1 50); do [ -s "$munge_dir/munged.pid" ] && break; sleep 0.1; done
cp "$munge_dir/munged.pid" "$base/munged.pid"
chroot "$root" slurmctld -f "$conf"
for n in $(seq 1 "$nodes"); do chroot "$root" slurmd -f "$conf" -N "ip-10-1-0-$n"; done
START
  } > "$BASE/start-in-root.sh"
  say "starting Slurm $SLURM_VERSION: its munged, slurmctld and $NODES slurmd chrooted into $SLURM_ROOT, in a mount namespace of their own where the root sees /, /proc, /sys and ${binds[*]} (nothing is mounted on this host; state, logs and pid files in $BASE; left running)"
  "$TOOLS/slurm_root_ns.sh" --record "$BASE" "$SLURM_ROOT" "${binds[@]}" -- /bin/bash "$BASE/start-in-root.sh"
fi
for _ in $(seq 1 60); do [ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] && break; sleep 0.5; done
[ "$(timeout 2 sinfo -h -t idle -o '%D' 2>/dev/null)" = "$NODES" ] || { echo "slurm did not come up; see $BASE/log" >&2; exit 1; }
echo "export SLURM_CONF=$SLURM_CONF"
said_path
