#!/bin/bash
# HyperPod lifecycle-script snippet: install the hyperpod-recovery controller agent.
#
# Call it from your on_create.sh (after setup_slurm / the Slurm configuration step) on every node;
# it does nothing except on the Slurm controller. Arguments:
#   install_agent.sh <CommandQueueUrl> <ClusterName> [<wheel or pip spec> ...]
# (the agent's wheel and the contract wheel it requires, both from `make dists`; default: the
# hyperpod-recovery distribution, which carries both)
# The controller instance group's execution role needs the stack's AgentPolicyArn output attached.
set -euo pipefail
QUEUE_URL=${1:?CommandQueueUrl (stack output)}; CLUSTER=${2:?cluster name}
PACKAGES=("${@:3}"); [ ${#PACKAGES[@]} -gt 0 ] || PACKAGES=(hyperpod-recovery)
# The agent's wheel requires hyperpod-recovery-contract: give its wheel too, or pip would look for
# that name on the package index, where it is not ours (anyone may publish under it).
case " ${PACKAGES[*]} " in
  *hyperpod[-_]recovery[-_]agent*)
    case " ${PACKAGES[*]} " in
      *hyperpod[-_]recovery[-_]contract*) ;;
      *) echo "hyperpod-recovery: the agent's wheel needs the contract wheel beside it (make dists builds both)" >&2; exit 2 ;;
    esac ;;
esac
SLURM_CONF=${SLURM_CONF:-/opt/slurm/etc/slurm.conf}
PREFIX=/opt/hyperpod-recovery-agent

# Only the controller runs slurmctld (HyperPod's resource_config.json names the node types).
if ! systemctl list-unit-files slurmctld.service >/dev/null 2>&1 || ! grep -q "^SlurmctldHost=$(hostname -s)\b" "$SLURM_CONF" 2>/dev/null; then
  echo "hyperpod-recovery: not the Slurm controller, agent not installed"; exit 0
fi

# Python >= 3.11 (the agent uses tomllib): the system one if new enough, else uv's.
PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then PY=$(command -v "$candidate"); break; fi
done
if [ -z "$PY" ]; then
  curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR=/usr/local/bin sh
  uv python install 3.12 && PY=$(uv python find 3.12)
fi
"$PY" -m venv "$PREFIX/venv"
"$PREFIX/venv/bin/pip" install --quiet --upgrade pip "${PACKAGES[@]}"

install -d -m 0755 /etc/hyperpod-recovery
HERE=$(cd "$(dirname "$0")" && pwd)
if [ ! -f /etc/hyperpod-recovery/agent.toml ]; then
  sed -e "s|^cluster_name = .*|cluster_name = \"$CLUSTER\"|" \
      -e "s|^command_queue_url = .*|command_queue_url = \"$QUEUE_URL\"|" \
      -e "s|^slurm_conf = .*|slurm_conf = \"$SLURM_CONF\"|" \
      "$HERE/agent.toml" > /etc/hyperpod-recovery/agent.toml
fi
install -m 0755 "$HERE/epilog_slurmctld.sh" /opt/hyperpod-recovery-agent/epilog_slurmctld.sh
install -m 0644 "$HERE/hyperpod-recovery-agent.service" /etc/systemd/system/hyperpod-recovery-agent.service

# Job-failure events: EpilogSlurmctld, unless the site already has one (then chain it by hand).
if grep -q '^EpilogSlurmctld=' "$SLURM_CONF"; then
  echo "hyperpod-recovery: EpilogSlurmctld already set; call $PREFIX/epilog_slurmctld.sh from it" >&2
else
  echo "EpilogSlurmctld=$PREFIX/epilog_slurmctld.sh" >> "$SLURM_CONF"
  scontrol reconfigure || systemctl restart slurmctld
fi

systemctl daemon-reload
systemctl enable --now hyperpod-recovery-agent.service
"$PREFIX/venv/bin/hyperpod-recovery-agent" check
