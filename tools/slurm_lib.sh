# Shared by tools/slurm_root.sh and tools/slurm_up.sh (sourced, not run).

# The multiarch folder of a Debian root, from where its libc is (x86_64-linux-gnu here; aarch64-linux-gnu
# on Graviton), as debootstrap laid it out: where its libraries and Slurm's plugins (slurm-wlm) are.
root_triplet() {  # root_triplet <root>
  local libc
  libc=$(ls -d "$1"/usr/lib/*-linux-gnu/libc.so.6 2>/dev/null | head -1)
  [ -n "$libc" ] || { echo "no usr/lib/*-linux-gnu/libc.so.6 in $1" >&2; return 1; }
  basename "$(dirname "$libc")"
}

# The processes whose root directory is <root> or under it (the daemons of tools/slurm_up.sh run
# chrooted there, an epilog under <root>/run/host), as "pid(name)" words; with a namespace (as
# /proc/<pid>/ns/mnt names it), only those in it. Read across namespaces: /proc/<pid>/root names the
# path in the process's own.
processes_in_root() {  # processes_in_root <root> [<mount namespace>]
  local proc found=""
  for proc in /proc/[0-9]*; do
    case "$(readlink "$proc/root" 2>/dev/null)/" in "$1"/*) ;; *) continue ;; esac
    [ -z "${2:-}" ] || [ "$(readlink "$proc/ns/mnt" 2>/dev/null)" = "$2" ] || continue
    found+=" ${proc#/proc/}($(cat "$proc/comm" 2>/dev/null))"
  done
  echo "${found# }"
}
