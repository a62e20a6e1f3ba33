# hyperpod-recovery: every workflow goes through make. `make drill` and `make test` set themselves up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The project venv runs the Lambda runtime's Python (3.13) where one is installed (pyenv machines hold
# it, inactive): the functions are tested on the version they run on, and coverage's sys.monitoring
# core (3.12+) measures the suite at almost no cost. Any python3 >= 3.11 works; PYTHON=... picks one.
# A candidate counts only if it can make a venv (a python3.13 without its venv package cannot).
PYENV_DIR    := $(or $(PYENV_ROOT),$(HOME)/.pyenv)
RUNTIME_PYTHON := $(firstword $(foreach candidate,$(shell ls -d $(PYENV_DIR)/versions/3.13.* 2>/dev/null | sort -V | tail -n 1 | sed 's|$$|/bin/python3.13|') \
  $(shell command -v python3.13 2>/dev/null),$(shell $(candidate) -c 'import ensurepip, venv' 2>/dev/null && echo $(candidate))))
PYTHON       ?= $(or $(RUNTIME_PYTHON),python3)
# SAM CLI and checkov live in venvs of their own, on the machine's python3 their pins were checked on.
TOOLS_PYTHON ?= python3
VENV         := .venv
SAM_VENV     := .venv-sam
CHECKOV_VENV := .venv-checkov
PY           := $(VENV)/bin/python
SAM          := $(SAM_VENV)/bin/sam
SLURM        ?= simulated
# Which real Slurm: 22.05 (Debian 12's packages on this host) or 24.11 (Debian 13's, in a trixie root
# tools/slurm_root.sh makes at SLURM_ROOT). `make test` runs the real-Slurm suite on each of SLURM_VERSIONS.
SLURM_VERSION  ?= 22.05
SLURM_VERSIONS ?= 22.05 24.11
SLURM_ROOT   ?= /var/lib/hyperpod-recovery/trixie
export SLURM_ROOT
SLURM_BASE   ?= /tmp/hyperpod-recovery-slurm
SLURM_NODES  ?= 4
SCENARIO     ?= $(if $(filter real,$(SLURM)),events/drills/real-slurm.json,events/drills/default.json)
OUT          ?= out
# sam validate/build need a region but never credentials; deploy uses your real profile and region.
DUMMY_REGION := AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-west-2}
export SAM_CLI_TELEMETRY := 0

# `sam build` for python3.13 needs a python3.13 on PATH. pyenv machines have it but inactive:
# select every installed 3.11-3.13 so the build finds the one it needs.
PYENV_VERSIONS := $(shell ls $${PYENV_ROOT:-$$HOME/.pyenv}/versions 2>/dev/null | grep -E '^3\.1[123]\.[0-9]+$$' | sort -V | paste -sd: -)

# The deployed stack the targets below act on; the CLI's --stack reads the same variable.
STACK        ?= $(HYPERPOD_RECOVERY_STACK)
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
# make deploy's answers (hyperpod-recovery deploy asks on a terminal for what is not given here).
CLUSTER      ?=
BUCKETS      ?=
EMAIL        ?=
PARAMS       ?=
DISARM       ?=
# The operator's command: the venv's in the Makefile's targets; `make install` puts it on PATH.
HPR          ?= $(VENV)/bin/hyperpod-recovery
INSTALL_HOME ?= $(HOME)/.local/share/hyperpod-recovery
BIN_DIR      ?= $(HOME)/.local/bin
ORCHESTRATOR ?= slurm

.PHONY: help setup test unit drill drills drill-down preflight drill-aws oncall lint format validate security build bench deploy arm install preflight-sandbox dists readme-sample golden clean FORCE

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-13s %s\n", $$1, $$2}'

# A venv made by another Python (a checkout's older 3.11 one) is made again from scratch: venv cannot
# re-point an existing one, and it would go on testing on the old Python.
VENV_STALE := $(shell test -x $(PY) && test "$$($(PY) -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" = \
  "$$($(PYTHON) -c 'import sys; print(sys.version_info[:2])' 2>/dev/null)" || echo stale)

$(VENV)/.installed: requirements-dev.txt layers/recovery_core/requirements.txt pyproject.toml $(if $(VENV_STALE),FORCE)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	# the package itself, editable: puts the `hyperpod-recovery` command on the venv's PATH
	$(PY) -m pip install --quiet --no-deps -e .
	rm -rf layers/recovery_core/*.egg-info  # a build leftover that would otherwise ship in the Lambda layer
	touch $@

# checkov in its own venv: its dependency pins must not move the project's.
$(CHECKOV_VENV)/.installed:
	$(TOOLS_PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet "checkov==3.3.30"
	touch $@

$(SAM_VENV)/.installed:
	$(TOOLS_PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/pip install --quiet "aws-sam-cli==1.170.0"
	touch $@

setup: $(VENV)/.installed $(SAM_VENV)/.installed  ## create .venv (project) and .venv-sam (SAM CLI)

# The suite runs on every core (pytest-xdist), except the real-Slurm tests: they share one slurmctld on
# fixed ports (tests/slurm/conftest.py) and run after, in one process per Slurm version (one at a time:
# the same ports), adding to the same coverage. A version not installed is skipped, or fails the run
# under HYPERPOD_RECOVERY_REQUIRE_SLURM=1 (CI).
# (xdist's --dist loadgroup would keep them on one worker, but it cannot rename test ids on pytest 9.2.)
# Coverage measures with sys.monitoring where the venv's Python has it (3.12+); its tracer is twice as slow.
COVERAGE_CORE_OF_VENV = $(shell $(PY) -c 'import sys; print("sysmon" if sys.version_info >= (3, 12) else "ctrace")')
test: setup lint validate security  ## lint, validate, security checks, and the whole test suite (the real-Slurm part on each of SLURM_VERSIONS)
	COVERAGE_CORE=$(COVERAGE_CORE_OF_VENV) $(PY) -m pytest -n auto -m "not slurm" --cov --cov-report= --durations=50
	@for version in $(SLURM_VERSIONS); do \
	  echo "== the real-Slurm tests on Slurm $$version (tests/slurm, SLURM_VERSION=$$version)"; \
	  SLURM_VERSION=$$version COVERAGE_CORE=$(COVERAGE_CORE_OF_VENV) $(PY) -m pytest -m slurm --cov --cov-append --cov-report= || exit 1; \
	done
	$(PY) -m coverage report --skip-covered
	$(PY) -m coverage html -q -d $(OUT)/coverage

unit: $(VENV)/.installed  ## fast tests only (no drills)
	$(PY) -m pytest -n auto -m "not sandbox and not slurm" -q

# A drill's arguments are checked before anything runs (SLURM=real would otherwise install and start
# Slurm first): one line naming what is wrong, and make's exit code 2.
drill: $(VENV)/.installed  ## run a recovery drill on an in-memory AWS (SCENARIO=path.json; SLURM=real: real slurmctld + agent process [SLURM_VERSION=22.05|24.11])
	@case '$(SLURM)' in simulated|real) ;; *) echo "error: SLURM=$(SLURM): simulated (the default) or real" >&2; exit 2 ;; esac
	@case '$(SLURM_VERSION)' in 22.05|24.11) ;; *) echo "error: SLURM_VERSION=$(SLURM_VERSION): 22.05 (the default) or 24.11" >&2; exit 2 ;; esac
	@$(PY) -m sandbox check --scenario '$(SCENARIO)' --out '$(OUT)'
ifeq ($(SLURM),real)
	@echo "make drill SLURM=real sets up a real Slurm $(SLURM_VERSION) on this host (root) and leaves it running for you to inspect:"
ifeq ($(SLURM_VERSION),22.05)
	@echo "  - installs Debian 12's $(SLURM_PACKAGES) with apt-get if they are missing (they stay installed)"
	@echo "  - starts munged (unless it runs already), slurmctld and $(SLURM_NODES) slurmd; state and logs in $(SLURM_BASE)"
else
	@echo "  - makes a Debian 13 root with debootstrap at $(SLURM_ROOT) and installs its $(SLURM_PACKAGES) there if it is missing (about a minute; it stays)"
	@echo "  - starts its munged, slurmctld and $(SLURM_NODES) slurmd chrooted there, in a mount namespace of their own that sees /proc, /sys,"
	@echo "    / (at /run/host), /home, /root, /tmp and this checkout (nothing is mounted on this host); state and logs in $(SLURM_BASE);"
	@echo "    its commands run on this host from $(SLURM_ROOT)/host-bin"
endif
	@echo "  - submits the scenario's training job (a 'sleep' under Slurm); the drill resubmits it and that job keeps running"
	@echo "  make drill-down stops all of it and removes $(SLURM_BASE)"
	@exports=$$(BASE=$(SLURM_BASE) NODES=$(SLURM_NODES) SLURM_VERSION=$(SLURM_VERSION) tools/slurm_up.sh) || exit 1; eval "$$exports"; \
	  SLURM_VERSION=$(SLURM_VERSION) $(PY) -m sandbox run --scenario '$(SCENARIO)' --out '$(OUT)' --slurm real; status=$$?; \
	  echo "still running: Slurm $(SLURM_VERSION)'s munged, slurmctld, $(SLURM_NODES) slurmd and the drill's jobs ($$(echo $$exports | sed 's/ export/;/g'); squeue)"; \
	  echo "make drill-down stops them and removes $(SLURM_BASE)"; exit $$status
else
	$(PY) -m sandbox run --scenario '$(SCENARIO)' --out '$(OUT)'
endif

DIR   ?= events/drills
JUNIT ?= $(OUT)/drills.xml
# Drills run at once, one process each; empty: the machine's cores.
JOBS  ?=
drills: $(VENV)/.installed  ## run every scenario of a folder, each held to its expect block, JOBS at once: a table, JUnit XML, an HTML report each [DIR=events/drills] [JUNIT=out/drills.xml] [JOBS=cores]
	$(PY) -m sandbox drills '$(DIR)' --junit '$(JUNIT)' --out '$(OUT)/drills' $(if $(JOBS),--jobs '$(JOBS)')

drill-down:  ## undo make drill SLURM=real (either version): cancel its jobs, stop slurmd, slurmctld and the munged it started, remove SLURM_BASE
	@BASE=$(SLURM_BASE) tools/slurm_down.sh --purge

# The CLI under these targets names make's variables in its messages (STACK=..., not --stack).
preflight drill-aws deploy arm: export HYPERPOD_RECOVERY_VIA_MAKE = 1
preflight: $(VENV)/.installed  ## read-only checks of a deployed stack before arming it: STACK=name [REGION=r]
	@if [ -z "$(STACK)" ]; then echo "make preflight needs STACK=<your stack name> or \$$HYPERPOD_RECOVERY_STACK (and AWS credentials for its account)" >&2; exit 2; fi
	$(VENV)/bin/hyperpod-recovery preflight --stack $(STACK) $(if $(REGION),--region $(REGION))

drill-aws: $(VENV)/.installed  ## drill the deployed stack: STACK=name [SCENARIO=events/drills/x.json] [REGION=r] [LIVE=1]; dry run unless LIVE=1
	@if [ -z "$(STACK)" ]; then echo "make drill-aws needs STACK=<your stack name> or \$$HYPERPOD_RECOVERY_STACK (and AWS credentials for its account)" >&2; exit 2; fi
	$(VENV)/bin/hyperpod-recovery drill --stack $(STACK) --scenario $(SCENARIO) $(if $(REGION),--region $(REGION)) $(if $(LIVE),--live --yes)

# The on-call commands, offline: the scenario is played in the sandbox, then each command of RUN
# (separated by ';') runs against its stack. {node}, {hostname} and {incident} are filled in.
ONCALL_SCENARIO ?= events/drills/rejoin-deadline.json
RUN ?= incidents --stack sandbox;incidents show {incident} --stack sandbox;locks --stack sandbox
# (RUN reaches the recipe through the environment: a quote in a command, --reason 'RMA 42', stays as written)
oncall: export ONCALL_RUN = $(RUN)
oncall: $(VENV)/.installed  ## try the on-call commands offline: [ONCALL_SCENARIO=path.json] [RUN='cmd;cmd'] [START=workers:3 (a live recovery left running: {running})]
	@IFS=';' read -ra commands <<< "$$ONCALL_RUN"; args=(); for c in "$${commands[@]}"; do args+=(--run "$$c"); done; \
	  $(PY) -m sandbox.oncall --scenario '$(ONCALL_SCENARIO)' --out '$(OUT)' $(if $(START),--start '$(START)') "$${args[@]}"

lint: $(VENV)/.installed  ## ruff (lint + format check) and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: $(VENV)/.installed  ## apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

validate: setup  ## sam validate --lint, the state machines (statelint + cfn-lint's ASL schema), ruff
	$(DUMMY_REGION) $(SAM) validate --lint --template template.yaml
	$(PY) tools/validate_asl.py
	$(VENV)/bin/ruff check .

security: $(CHECKOV_VENV)/.installed  ## checkov over template.yaml; skipped checks are explained in docs/security.md
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml -f template.yaml

build: $(SAM_VENV)/.installed  ## sam build (python3.13, arm64) without Docker
	@if [ -z "$(PYENV_VERSIONS)" ] && ! command -v python3.13 >/dev/null; then \
	  echo "sam build needs python3.13 on PATH (pyenv install 3.13, or a python3.13 binary)"; exit 1; fi
	PYENV_VERSION=$(PYENV_VERSIONS) $(DUMMY_REGION) $(SAM) build --template template.yaml

bench: $(VENV)/.installed  ## seven benchmarks, 12-18 min: cold import, checkpoint discovery, rack storm, fault suite, time to resume, hangs, stall storm
	$(PY) bench/cold_import.py
	$(PY) bench/checkpoint_discovery.py
	$(PY) bench/storm.py
	$(PY) bench/fault_suite.py
	$(PY) bench/time_to_resume.py
	$(PY) bench/hang_detection.py
	$(PY) bench/stall_storm.py

# deploy reads the credentials, the cluster and the stack first: no credentials, a wrong cluster or
# a missing answer fail in one line (make then says "Error 3" / "Error 2") before anything is built.
deploy: $(VENV)/.installed  ## deploy the stack for a cluster: CLUSTER=arn [BUCKETS=pattern] [EMAIL=a@b] [STACK=name] [PARAMS="K=V ..."] [DISARM=1] [YES=1: no terminal]
	$(HPR) deploy $(if $(CLUSTER),--cluster '$(CLUSTER)') $(if $(BUCKETS),--checkpoint-buckets '$(BUCKETS)') \
	  $(if $(EMAIL),--email '$(EMAIL)') $(if $(STACK),--stack '$(STACK)') $(if $(PARAMS),--param '$(PARAMS)') \
	  $(if $(DISARM),--disarm) $(if $(YES),--yes) $(if $(REGION),--region '$(REGION)') --sam '$(SAM)' --build-with '$(MAKE) --no-print-directory -f $(abspath $(firstword $(MAKEFILE_LIST))) build'

arm: $(VENV)/.installed  ## after a dry-run period: the preflight, and only if it passes DryRun=false: STACK=name [REGION=r]
	@if [ -z "$(STACK)" ]; then echo "make arm needs STACK=<your stack name> or \$$HYPERPOD_RECOVERY_STACK (and AWS credentials for its account)" >&2; exit 2; fi
	$(HPR) arm --stack '$(STACK)' $(if $(YES),--yes) $(if $(REGION),--region '$(REGION)')

install:  ## put the hyperpod-recovery command on your PATH (pipx; without pipx, a venv of its own linked into ~/.local/bin)
	@if command -v pipx >/dev/null; then pipx install --force .; else \
	  $(TOOLS_PYTHON) -m venv --clear '$(INSTALL_HOME)' && '$(INSTALL_HOME)/bin/pip' install --quiet . && \
	  mkdir -p '$(BIN_DIR)' && ln -sf '$(INSTALL_HOME)/bin/hyperpod-recovery' '$(BIN_DIR)/hyperpod-recovery'; fi
	@rm -rf build *.egg-info layers/recovery_core/*.egg-info  # pip's in-tree build leftovers
	@if command -v hyperpod-recovery >/dev/null; then echo "hyperpod-recovery is on PATH: $$(command -v hyperpod-recovery)"; \
	  else echo "installed in $(BIN_DIR), which is not on your PATH: export PATH=\"$(BIN_DIR):\$$PATH\""; fi

preflight-sandbox: $(VENV)/.installed  ## the preflight against the sandbox's deployed stack, offline [ORCHESTRATOR=eks]
	$(PY) -m tools.preflight_sandbox --orchestrator $(ORCHESTRATOR)

# agent-bundle downloads the agent's dependencies (boto3, pydantic: the Lambda layer's pins) from your
# package index once, here: the controller installs the folder with no index at all (install_agent.sh).
dists: $(VENV)/.installed  ## wheels by who runs them, into dist/: the checkpoint library, the agent, and dist/agent-bundle/ for install_agent.sh
	$(PY) tools/build_dists.py contract checkpoints agent agent-bundle --out dist

readme-sample: $(VENV)/.installed  ## run the default drill; write its output into README.md and re-render docs/images/drill-report-default.png
	$(PY) -m tools.readme_sample

golden: $(VENV)/.installed  ## rewrite tests/golden/drills/ and screenshots/ from the drills as they run now (read the diff: it is what changed)
	$(PY) tools/golden_reports.py
	$(PY) tools/report_screenshots.py

clean:  ## remove build output and reports (keeps the venvs)
	rm -rf .aws-sam $(OUT) dist .pytest_cache .ruff_cache .mypy_cache .coverage

FORCE:
