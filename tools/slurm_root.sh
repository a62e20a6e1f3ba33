#!/usr/bin/env bash
# Slurm 24.11 (what clusters built in 2025-26 run) beside the host's Debian 12 Slurm 22.05: Debian 13's
# packages installed into a trixie root made with debootstrap, never over the host's packages.
# Reused when it is already there (a marker file names what it holds). Prints the root's path.
#
# What the root holds besides Debian's packages (its daemons run chrooted into it: tools/slurm_up.sh):
#   host-bin/   one wrapper per Slurm command, run on the host by the trixie loader with the root's
#               libraries, as any user (an owner's sbatch cannot chroot) and in the caller's own
#               directory and environment; the same path works inside the root (see the next line).
#   <ROOT>      a symlink to / inside the root: every path under the root (PluginDir, host-bin) means
#               the same file on the host and in the chroot.
#   /etc/passwd, group, hosts symlinks to /run/host/etc/…, where slurm_root_ns.sh binds the host's /: the
#               users a job runs as are the host's, even those added while Slurm runs.
#   python3     the jobs of the real-Slurm tests run python inside the root (minbase has none).
# --remove: delete the root, only when no process runs in it and nothing is mounted in it on this host
# (Slurm 24.11's mounts live in a namespace of its daemons, tools/slurm_root_ns.sh: never `rm -rf` the
# root by hand, a chrooted shell could still see the host's files through it).
set -euo pipefail
ROOT=${SLURM_ROOT:-/var/lib/hyperpod-recovery/trixie}
SUITE=trixie
PACKAGES="slurmctld slurmd slurm-client munge python3"
MARKER=.hyperpod-recovery-root
say() { echo "slurm_root: $*" >&2; }
. "$(dirname "$0")/slurm_lib.sh"

case "$ROOT" in /*) ;; *) say "SLURM_ROOT=$ROOT: an absolute path, please"; exit 2 ;; esac
# A path still mounted under a root is the host's (a bind mount): never delete through it.
mounted_under() { awk -v p="$1/" 'index($5 "/", p) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; }
if [ "${1:-}" = --remove ]; then
  for dir in "$ROOT" "$ROOT.tmp"; do
    [ -e "$dir" ] || continue
    if mounted_under "$dir"; then say "kept $dir: something is mounted in it on this host (not by these tools: unmount it first)"; exit 1; fi
    running=$(processes_in_root "$dir")
    if [ -n "$running" ]; then say "kept $dir: running in it: $running (tools/slurm_down.sh stops Slurm 24.11)"; exit 1; fi
    [ -f "$dir/$MARKER" ] || [ "$dir" = "$ROOT.tmp" ] || { say "kept $dir: not a root this tool made (no $MARKER)"; exit 1; }
    rm -rf --one-file-system "$dir"; say "removed $dir"
  done
  exit 0
fi
[ $# = 0 ] || { say "unknown argument $1: none, or --remove"; exit 2; }
if [ -f "$ROOT/$MARKER" ]; then
  say "reusing $ROOT ($(cat "$ROOT/$MARKER"))"
  echo "$ROOT"; exit 0
fi
work="$ROOT.tmp"
if [ -e "$work" ]; then
  if mounted_under "$work"; then say "something is mounted under $work: unmount it first"; exit 1; fi
  say "removing an unfinished root at $work"; rm -rf --one-file-system "$work"
fi
if [ -e "$ROOT" ]; then say "$ROOT exists but is not a root this tool made (no $MARKER): move it away"; exit 1; fi

# Debian's mirror as the host's apt names it (deb822 or one-line sources), else deb.debian.org.
mirror=${DEBIAN_MIRROR:-$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | sed 's/#.*//' | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ' || true)}
mirror=${mirror:-http://deb.debian.org/debian}
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (apt-get; it stays installed)"
  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
mkdir -p "$(dirname "$ROOT")"
# Both steps mount /proc (and debootstrap more) into the root: each in a mount namespace of its own
# (propagation slave), so nothing reaches the host's mounts and nothing stays mounted if it fails.
say "debootstrap --variant=minbase $SUITE $work $mirror"
start=$SECONDS
unshare --mount --propagation slave -- debootstrap --variant=minbase "$SUITE" "$work" "$mirror" >"$work.log" 2>&1 \
  || { say "debootstrap failed: see $work.log"; exit 1; }
say "debootstrap took $((SECONDS - start)) s"
start=$SECONDS
# policy-rc.d: no daemon starts at install (there is no init in the root anyway)
printf '#!/bin/sh\nexit 101\n' > "$work/usr/sbin/policy-rc.d"; chmod 755 "$work/usr/sbin/policy-rc.d"
say "apt-get install $PACKAGES (in the root)"
install="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES && apt-get clean"
unshare --mount --propagation slave -- /bin/sh -c 'mount -t proc proc "$1/proc" && exec chroot "$1" /bin/sh -c "$2"' sh "$work" "$install" \
  >>"$work.log" 2>&1 || { say "apt-get in the root failed: see $work.log"; exit 1; }
say "apt-get took $((SECONDS - start)) s"

mkdir -p "$work$(dirname "$ROOT")" "$work/run/host"
ln -s / "$work$ROOT"
for file in passwd group hosts; do ln -sf "/run/host/etc/$file" "$work/etc/$file"; done
# The machine's own multiarch folder and loader (x86_64-linux-gnu and ld-linux-x86-64.so.2 here;
# aarch64-linux-gnu and ld-linux-aarch64.so.1 on Graviton), as debootstrap laid them out.
triplet=$(root_triplet "$work")
loader=$(cd "$work" && ls lib*/ld-linux*.so.* | head -1)
libs="$ROOT/usr/lib/$triplet"
mkdir -p "$work/host-bin"
for command in sacct salloc sattach sbatch sbcast scancel scontrol sdiag sinfo sprio squeue srun sshare sstat strigger; do
  [ -x "$work/usr/bin/$command" ] || continue
  # --inhibit-cache: the host's ld.so.cache names the host's libraries, never the root's.
  cat > "$work/host-bin/$command" <<WRAPPER
#!/bin/sh
exec $ROOT/$loader --inhibit-cache --library-path $libs:$libs/slurm-wlm --argv0 $command $ROOT/usr/bin/$command "\$@"
WRAPPER
  chmod 755 "$work/host-bin/$command"
done
version=$(chroot "$work" dpkg-query -W -f '${Version}' slurmctld)
echo "slurm-wlm $version from Debian $SUITE, made $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$work/$MARKER"
rm -f "$work.log"
mv "$work" "$ROOT"
say "made $ROOT (slurm-wlm $version)"
echo "$ROOT"
