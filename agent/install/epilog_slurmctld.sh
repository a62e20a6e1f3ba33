#!/bin/sh
# EpilogSlurmctld for hyperpod-recovery: reports jobs that end FAILED / NODE_FAIL (/ TIMEOUT) to
# EventBridge. slurmctld runs it once per job end with only SLURM_JOB_* set, hence full paths.
# It always exits 0 (an event EventBridge refuses is spooled and sent by the agent service).
# If the cluster already has an EpilogSlurmctld, call this script from it instead.
exec /opt/hyperpod-recovery-agent/venv/bin/hyperpod-recovery-agent \
  --config /etc/hyperpod-recovery/agent.toml job-ended 2>>/var/log/hyperpod-recovery-epilog.log
