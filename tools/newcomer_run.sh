#!/usr/bin/env bash
# A new platform engineer's first hour, scripted on this clone (issue 31's acceptance run): the quick
# start, the drills as a test suite (passing, and failing on a broken expectation), the offline
# preflight (Slurm and EKS), the on-call commands on the sandbox's stack, and a deploy without
# credentials. Each step shows what a newcomer sees; the script exits 1 if any step does not do
# what the README says. About 8 minutes (the project's drills, every scenario in events/drills/, are most of it).
#   tools/newcomer_run.sh [OUT]        (default out/newcomer)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/newcomer}
rm -rf "$OUT" && mkdir -p "$OUT"
failed=()

step() {  # step NAME EXPECTED(0|nonzero) COMMAND...
  local name=$1 expected=$2; shift 2
  echo "=== $name: $*"
  "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  cat "$OUT/$name.log"
  if { [[ $expected == nonzero ]] && ((code != 0)); } || [[ $expected == "$code" ]]; then
    echo "--- $name: exit $code, as expected"
  else
    echo "--- $name: exit $code, expected $expected"; failed+=("$name")
  fi
  echo
}

# 1. The quick start: one drill, its expectations met.
step drill 0 make drill OUT="$OUT/drill"
# 2. The project's drills as a suite: a table and JUnit XML.
step drills 0 make drills DIR=events/drills JUNIT="$OUT/drills.xml" OUT="$OUT/drills"
# ... and a team's own folder where one scenario expects what does not happen: non-zero.
mkdir -p "$OUT/mine"
cp events/drills/default.json "$OUT/mine/"
.venv/bin/python - "$OUT/mine" <<'PY'
import json, sys, pathlib
doc = json.loads(pathlib.Path("events/drills/default.json").read_text())
doc["name"], doc["expect"] = "expects-an-escalation", {"outcomes": ["escalated"]}
pathlib.Path(sys.argv[1], "expects-an-escalation.json").write_text(json.dumps(doc, indent=2))
PY
step drills-failing nonzero make drills DIR="$OUT/mine" JUNIT="$OUT/mine.xml" OUT="$OUT/mine-out"
# 3. The preflight, offline, against the sandbox's stack: Slurm and EKS.
step preflight-slurm 0 make preflight-sandbox
step preflight-eks 0 make preflight-sandbox ORCHESTRATOR=eks
# 4. The on-call commands on the sandbox's stack after an escalation (rejoin-deadline), with a live
#    recovery left running to stop.
step oncall 0 make oncall OUT="$OUT/oncall" START=workers:3 RUN="incidents --stack sandbox;incidents show {incident} --stack sandbox;locks --stack sandbox;stop {running} --stack sandbox --reason 'newcomer drill' --yes;incidents --stack sandbox;hold {hostname} --stack sandbox --reason 'vendor RMA 42' --yes;locks release {node} --stack sandbox --reason 'replaced by hand' --yes;locks --stack sandbox;unhold {hostname} --stack sandbox --reason 'RMA closed' --yes;breaker reset --stack sandbox --reason ' ';breaker status --stack sandbox"
# 5. make deploy without credentials: one clear line, before anything is built.
step deploy-no-credentials nonzero env -u AWS_PROFILE -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
  make deploy CLUSTER=arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456

if ((${#failed[@]})); then
  echo "newcomer run: ${#failed[@]} step(s) did not do what the README says: ${failed[*]}"; exit 1
fi
echo "newcomer run: every step did what the README says"
