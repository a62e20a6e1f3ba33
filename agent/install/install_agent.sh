#!/bin/bash
# HyperPod lifecycle-script snippet: install the hyperpod-recovery controller agent from the bundle
# `make dists` writes (dist/agent-bundle/), and from nothing else.
#
#   install_agent.sh <CommandQueueUrl> <ClusterName> <bundle> <sha256>
#
#   <bundle>  dist/agent-bundle/ as a folder on the node, or its copy on S3 (s3://bucket/prefix/,
#             fetched with `aws s3 cp --recursive` as lifecycle scripts fetch theirs)
#   <sha256>  the sha256 of the bundle's requirements.txt, as `make dists` prints it. That file pins
#             every wheel by version and sha256 (pip --require-hashes), so this one value in your
#             lifecycle script pins the whole install to one build: a bundle rewritten on S3 is refused.
#
# Call it from on_create.sh, after the Slurm configuration step, on every node: it checks its
# arguments everywhere and installs only on the Slurm controller. pip runs with --no-index, no
# configuration and no PIP_* variables: no package index is asked for anything, our names included,
# and a cluster without internet installs from the bundle alone. Never a download piped to a shell:
# without a Python the bundle was built for (>= 3.11) it stops and says what to install.
#
# Exit codes: 0 installed (or not the controller: nothing to do); 1 refused or failed, one line on
# stderr says why (requirements.txt not the pinned one, a wheel whose sha256 differs or that is
# missing, no suitable Python, no aws CLI for an S3 bundle, S3 unreadable); 2 bad arguments.
# A refusal leaves an agent installed earlier as it was: the new venv is switched in last.
#
# Environment:
#   HYPERPOD_RECOVERY_PYTHON  the interpreter (default: the newest python3.X the bundle was built for)
#   SLURM_CONF                slurm.conf (default /opt/slurm/etc/slurm.conf)
#   DESTDIR                   install under this folder instead of /, and touch nothing outside it:
#                             no controller check, no slurm.conf change, no systemctl (tests, and
#                             trying a bundle on any machine)
# The controller group's execution role needs the stack's AgentPolicyArn output attached, and for an
# S3 bundle s3:GetObject and s3:ListBucket on its prefix.
set -euo pipefail
umask 022

USAGE="usage: install_agent.sh <CommandQueueUrl> <ClusterName> <agent-bundle folder or s3://bucket/prefix/> <sha256 of its requirements.txt> [<LedgerTableName>]"
usage() { echo "hyperpod-recovery: $* ($USAGE)" >&2; exit 2; }
fail() { echo "hyperpod-recovery: $*; the agent was not installed" >&2; exit 1; }

if [ $# -lt 4 ] || [ $# -gt 5 ] || [[ ${3:-} == *" @ "* || ${3:-} == *.whl ]]; then
  usage "4 arguments: the queue, the cluster, the bundle make dists writes (dist/agent-bundle/) and the sha256 it prints; wheels or pip specs are no longer taken (pip would ask the package index for the agent's dependencies)"
fi
QUEUE_URL=$1 CLUSTER=$2 BUNDLE=$3 PINNED=$4 LEDGER_TABLE=${5:-}
[[ $QUEUE_URL =~ ^https://[A-Za-z0-9.-]+/[0-9]{12}/[A-Za-z0-9_-]{1,80}$ ]] ||
  usage "CommandQueueUrl: the stack's output, https://sqs.<region>.amazonaws.com/<account>/<queue>, not '$QUEUE_URL'"
[[ $CLUSTER =~ ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$ ]] || usage "ClusterName: a HyperPod cluster name (letters, digits, hyphens), not '$CLUSTER'"
# The stack's LedgerTableName output: the agent writes its job nodes snapshot there (optional: without it
# the agent answers commands, and hang detection cannot tell a job's own nodes).
[[ -z $LEDGER_TABLE || $LEDGER_TABLE =~ ^[a-zA-Z0-9_.-]{3,255}$ ]] || usage "LedgerTableName: the stack's output, a DynamoDB table name, not '$LEDGER_TABLE'"
[[ $PINNED =~ ^[0-9a-f]{64}$ ]] || usage "sha256: the 64 hex digits make dists prints for requirements.txt, not '$PINNED'"
SLURM_CONF=${SLURM_CONF:-/opt/slurm/etc/slurm.conf}
[[ $SLURM_CONF =~ ^/[A-Za-z0-9._/-]+$ ]] || usage "SLURM_CONF: an absolute path, not '$SLURM_CONF'"

ROOT=${DESTDIR:-}
PREFIX=$ROOT/opt/hyperpod-recovery-agent
ETC=$ROOT/etc/hyperpod-recovery
UNITS=$ROOT/etc/systemd/system
HERE=$(cd "$(dirname "$0")" && pwd)

# Only the controller runs slurmctld (HyperPod's resource_config.json names the node types).
if [ -z "$ROOT" ]; then
  if ! systemctl list-unit-files slurmctld.service >/dev/null 2>&1 || ! grep -q "^SlurmctldHost=$(hostname -s)\b" "$SLURM_CONF" 2>/dev/null; then
    echo "hyperpod-recovery: not the Slurm controller, agent not installed"
    exit 0
  fi
fi

# --- the bundle, and the one hash that pins it ---------------------------------------------------
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
case $BUNDLE in
  s3://*)
    command -v aws >/dev/null ||
      fail "the bundle is on S3 ($BUNDLE) and the aws CLI is not installed: install AWS CLI v2, or copy the bundle onto the node and give its folder"
    aws s3 cp --recursive --only-show-errors "${BUNDLE%/}/" "$WORK/bundle/" ||
      fail "could not copy $BUNDLE (aws's error above): the controller's role needs s3:GetObject and s3:ListBucket on it (and a cluster without internet an S3 VPC endpoint)"
    WHEELS=$WORK/bundle
    ;;
  *)
    [ -d "$BUNDLE" ] || fail "$BUNDLE: no such folder (give dist/agent-bundle/ from make dists, or its s3:// copy)"
    WHEELS=$(cd "$BUNDLE" && pwd)
    ;;
esac
[ -f "$WHEELS/requirements.txt" ] || fail "$BUNDLE has no requirements.txt: not the agent-bundle folder make dists writes"
cp "$WHEELS/requirements.txt" "$WORK/requirements.txt" # pip reads the copy whose hash was checked
GOT=$(sha256sum "$WORK/requirements.txt" | cut -d' ' -f1)
[ "$GOT" = "$PINNED" ] ||
  fail "$BUNDLE/requirements.txt has sha256 $GOT, not the $PINNED your lifecycle script pins: not that build of make dists"
PYTHONS=$(sed -n 's/^# python: //p' "$WORK/requirements.txt")
MACHINE=$(sed -n 's/^# machine: //p' "$WORK/requirements.txt")
[ "$(uname -m)" = "$MACHINE" ] || fail "this node is $(uname -m) and the bundle's wheels are for $MACHINE"

# --- a Python the bundle was built for (the agent needs >= 3.11: tomllib) --------------------------
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true; }
built_for() { [[ " $PYTHONS " == *" $1 "* ]]; }
PY=""
if [ -n "${HYPERPOD_RECOVERY_PYTHON:-}" ]; then
  VERSION=$(version_of "$HYPERPOD_RECOVERY_PYTHON")
  built_for "${VERSION:-none}" ||
    fail "HYPERPOD_RECOVERY_PYTHON=$HYPERPOD_RECOVERY_PYTHON is Python ${VERSION:-(does not run)}; the bundle is built for Python $PYTHONS"
  PY=$HYPERPOD_RECOVERY_PYTHON
else
  for candidate in $(tr ' ' '\n' <<<"$PYTHONS" | sort -rV | sed 's/^/python/') python3; do
    if command -v "$candidate" >/dev/null && built_for "$(version_of "$candidate")"; then
      PY=$(command -v "$candidate")
      break
    fi
  done
  [ -n "$PY" ] || fail "no Python ${PYTHONS// /, } on this node (the agent needs >= 3.11; HyperPod's Ubuntu 22.04 DLAMI has 3.10): install one from the OS's packages before this script (Ubuntu 22.04: apt-get install -y python3.11 python3.11-venv; Amazon Linux 2023: dnf install -y python3.11), or point HYPERPOD_RECOVERY_PYTHON at one"
  VERSION=$(version_of "$PY")
fi
"$PY" -c 'import ensurepip, venv' 2>/dev/null || fail "$PY cannot make a venv: install its venv package (Ubuntu: apt-get install -y python$VERSION-venv)"

# --- a new venv per build, switched in once it works ----------------------------------------------
RELEASE=releases/${PINNED:0:16}
PREVIOUS=$(readlink "$PREFIX/venv" 2>/dev/null || true)
if [ "$PREVIOUS" = "$RELEASE" ] && "$PREFIX/$RELEASE/bin/hyperpod-recovery-agent" --version >/dev/null 2>&1; then
  echo "hyperpod-recovery: this build is the one installed; its venv is kept" # the running agent's files stay
else
  rm -rf "${PREFIX:?}/$RELEASE"
  mkdir -p "$PREFIX/releases"
  "$PY" -m venv "$PREFIX/$RELEASE" >"$WORK/venv.log" 2>&1 || { cat "$WORK/venv.log" >&2; fail "$PY -m venv failed"; }
  if ! PIP_CONFIG_FILE=/dev/null "$PREFIX/$RELEASE/bin/python" -m pip --isolated --disable-pip-version-check --no-input \
    install --no-index --find-links "$WHEELS" --require-hashes --only-binary=:all: --no-cache-dir \
    -r "$WORK/requirements.txt" >"$WORK/pip.log" 2>&1; then
    rm -rf "${PREFIX:?}/$RELEASE"
    sed 's/^/  pip: /' "$WORK/pip.log" >&2
    if grep -q "DO NOT MATCH THE HASHES" "$WORK/pip.log"; then
      fail "a wheel in $BUNDLE is not the one make dists built (its sha256 is not the one requirements.txt pins)"
    elif grep -qiE "no matching distribution|could not find a version" "$WORK/pip.log"; then
      fail "$BUNDLE lacks a wheel requirements.txt pins for Python $VERSION ($(grep -oiE 'requirement [^ ]+' "$WORK/pip.log" | head -1))"
    fi
    fail "pip could not install the bundle (its output above)"
  fi
  "$PREFIX/$RELEASE/bin/hyperpod-recovery-agent" --version >/dev/null || fail "the installed agent does not start"
fi

# --- configuration, epilog, unit --------------------------------------------------------------------
install -d -m 0755 "$ETC" "$UNITS"
if [ ! -f "$ETC/agent.toml" ]; then
  edits=(-e "s|^cluster_name = .*|cluster_name = \"$CLUSTER\"|"
    -e "s|^command_queue_url = .*|command_queue_url = \"$QUEUE_URL\"|"
    -e "s|^slurm_conf = .*|slurm_conf = \"$SLURM_CONF\"|")
  if [ -n "$LEDGER_TABLE" ]; then edits+=(-e "s|^# ledger_table = .*|ledger_table = \"$LEDGER_TABLE\"|"); fi
  sed "${edits[@]}" "$HERE/agent.toml" >"$ETC/agent.toml"
elif [ -n "$LEDGER_TABLE" ] && ! grep -q '^ledger_table *=' "$ETC/agent.toml"; then
  # A configuration an earlier release wrote: the new key goes among the top-level ones.
  sed -i "/^command_queue_url = /a ledger_table = \"$LEDGER_TABLE\"" "$ETC/agent.toml"
fi
install -m 0755 "$HERE/epilog_slurmctld.sh" "$PREFIX/epilog_slurmctld.sh"
install -m 0644 "$HERE/hyperpod-recovery-agent.service" "$UNITS/hyperpod-recovery-agent.service"

# The switch: venv points at the new build (one rename); the previous build is kept to roll back to.
if [ -d "$PREFIX/venv" ] && [ ! -L "$PREFIX/venv" ]; then rm -rf "${PREFIX:?}/venv"; fi # an install from before builds were kept apart
ln -sfn "$RELEASE" "$PREFIX/venv.new"
mv -Tf "$PREFIX/venv.new" "$PREFIX/venv"
for build in "$PREFIX"/releases/*; do
  case "releases/${build##*/}" in "$RELEASE" | "$PREVIOUS") ;; *) rm -rf "$build" ;; esac
done
echo "hyperpod-recovery: agent $("$PREFIX/venv/bin/hyperpod-recovery-agent" --version) installed in $PREFIX/$RELEASE (Python $VERSION)"

if [ -n "$ROOT" ]; then
  echo "hyperpod-recovery: DESTDIR=$ROOT: slurm.conf and systemd left alone"
  exit 0
fi

# Job-failure events: EpilogSlurmctld, unless the site already has one (then chain it by hand).
if grep -q '^EpilogSlurmctld=' "$SLURM_CONF"; then
  grep -q "^EpilogSlurmctld=$PREFIX/epilog_slurmctld.sh$" "$SLURM_CONF" ||
    echo "hyperpod-recovery: EpilogSlurmctld already set; call $PREFIX/epilog_slurmctld.sh from it" >&2
else
  echo "EpilogSlurmctld=$PREFIX/epilog_slurmctld.sh" >>"$SLURM_CONF"
  scontrol reconfigure || systemctl restart slurmctld
fi

systemctl daemon-reload
systemctl enable hyperpod-recovery-agent.service
systemctl restart hyperpod-recovery-agent.service # an upgrade runs the new build; a command in progress is finished first
"$PREFIX/venv/bin/hyperpod-recovery-agent" check
