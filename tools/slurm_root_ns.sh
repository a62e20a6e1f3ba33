#!/usr/bin/env bash
# Run a command in a mount namespace of its own in which the Slurm 24.11 root (tools/slurm_root.sh) sees
# the host as it is: the host's / at <root>/run/host, /proc, /sys, and each DIR at its own path, all
# recursive (a tmpfs /tmp, a checkout on its own filesystem, /proc and /dev under / come along).
#   tools/slurm_root_ns.sh --record BASE ROOT [DIR...] -- COMMAND [ARG...]
# tools/slurm_up.sh starts 24.11's daemons this way (COMMAND chroots them into ROOT): they, their jobs
# and their epilogs live in the namespace, and it ends with the last of them.
# Why a namespace (unshare --propagation slave) rather than mounts on the host: on a systemd host / and
# /sys are shared mounts, and a bind of them under the root joins their peer groups, so unmounting there
# would unmount the host's own (the arch-chroot hazard) and every mount under the root would appear
# again under <root>/run/host. In a slave namespace the host's mounts reach the root (a filesystem
# mounted on the host later shows too), and nothing done inside ever reaches the host; nothing is
# mounted on the host, so nothing is left mounted there by a run that was interrupted.
# Records in BASE: root (the root's path), mount-ns (the namespace, as /proc/<pid>/ns/mnt names it),
# mounts (what was mounted in it, in order); tools/slurm_down.sh reads them.
set -euo pipefail
say() { echo "slurm_root_ns: $*" >&2; }
if [ "${1:-}" != --in-namespace ]; then
  exec unshare --mount --propagation slave -- "$0" --in-namespace "$@"
fi
shift
[ "${1:-}" = --record ] && [ $# -ge 4 ] || { say "usage: $0 --record BASE ROOT [DIR...] -- COMMAND [ARG...]"; exit 2; }
base=$2 root=$3; shift 3
dirs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do dirs+=("$1"); shift; done
[ "${1:-}" = -- ] && [ $# -ge 2 ] || { say "no command after --"; exit 2; }
shift
case "$root" in /*) ;; *) say "ROOT=$root: an absolute path, please"; exit 2 ;; esac

echo "$root" > "$base/root"
readlink /proc/self/ns/mnt > "$base/mount-ns"
: > "$base/mounts"
mount_in_root() {  # mount_in_root <path in the root> <mount arguments...>
  local target=$root$1
  mkdir -p "$target"
  mount "${@:2}" "$target"
  echo "$target" >> "$base/mounts"
}
# / first: a copy of the host's tree as it is, before anything is mounted under the root itself.
mount_in_root /run/host --rbind /
mount_in_root /proc -t proc proc
mount_in_root /sys --rbind /sys
for dir in "${dirs[@]}"; do mount_in_root "$dir" --rbind "$dir"; done
exec "$@"
