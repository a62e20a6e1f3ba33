"""Whether a batch script may read the arguments it was given (agent/hyperpod_recovery_agent/script_reads.py):
on Slurm 23.02+ a job submitted as a file is resubmitted without arguments only when its script never
reads any. Missing a read resubmits a job silently without its arguments; a read seen where the shell
expands nothing makes a job unresumable for nothing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery_agent.capture import no_arguments_read
from hyperpod_recovery_agent.sbatch_options import Unresumable
from hyperpod_recovery_agent.script_reads import first_argument_read

SHEBANG = "#!/bin/bash\n"


def reads(body: str, shebang: str = SHEBANG) -> bool:
    return first_argument_read(shebang + body + "\n") is not None


@pytest.mark.parametrize(
    "body",
    [
        "for a; do echo $a; done",  # no `in`: the arguments
        "for a do echo; done",
        "for a\ndo echo; done",
        "select a; do break; done",
        "last=${!#}",  # the last argument
        "n=${#}",
        'echo "it\'s $1"',  # a single quote inside double quotes quotes nothing
        "cat <<EOF\n'$1'\nEOF",  # an unquoted here-document expands, its quotes are text
        "cat <<-EOF\n\t${1}\n\tEOF",
        'log() { echo $1; }\nlog "$@"',
        'log() {\n  echo "$1"\n}\nlog "$@"',  # the call passes them on
        "f() {\n  echo {a,b}\n  echo $1\n}",  # a brace in the body: its end is not certain, read as code
        "f()\n{\n  echo $1\n}",  # another form of function: read as code
        "f() {\n  echo ${BASH_ARGV[0]}\n}",  # BASH_ARGV holds the script's arguments in a function too
        "trap 'echo $1' EXIT",  # run again as code, where $1 is the script's
        "eval 'echo $1'",
        "cmd='run $1'\neval \"$cmd\"",
        "cat <<'EOF' | . /dev/stdin\necho $1\nEOF",
        "x='$1'; echo \"${x@P}\"",
        'echo "$(case $x in a) echo "\'$1\'";; esac)"',  # a case pattern's ")" closes no $(
        "(( $# > 1 ))",
        "tr '\\0' ' ' < /proc/$$/cmdline",
    ],
)
def test_a_script_that_may_read_its_arguments_is_seen_to(body: str) -> None:
    assert reads(body)


@pytest.mark.parametrize(
    "body",
    [
        "awk '{print $1}' data.csv",  # single quotes: the shell expands nothing
        "python -c 'import sys; print(sys.argv[1:])'",
        "echo '$@ and $*'",
        "x=$'\\$1 \\''; echo \"$x\"",
        "cat <<'EOF'\nsrun train.py $1\nEOF",
        'cat <<"EOF"\n$@\nEOF',
        "cat <<\\EOF\n$1\nEOF",
        "python - <<'PY'\nimport sys\nprint(sys.argv[1])\nPY",
        'log() {\n  echo "[$(date)] $1"\n}\nlog starting',  # a function's $1 is its own
        'function log {\n  shift; echo "$@"\n}\nlog a b',
        'usage() {\n  echo "usage: $0 CONFIG" >&2\n  exit 2\n}',
        "echo \\$1",
        "srun train.py  # reads $1",
        "for a in 1 2; do echo $a; done",
        "for a\n  in x y; do :; done",
        "echo ${#NAME} ${NAME:1} $0 $$ ${arr[@]} ${arr[*]}",
        "echo \"$(echo '$1')\"",  # single quotes inside $(...) inside double quotes quote again
        "x=$(( 1 << 2 ))\necho '$1'",  # a shift, not a here-document
        "cat <<< '$1'",
    ],
)
def test_a_script_whose_shell_expands_no_argument_read_is_not_flagged(body: str) -> None:
    assert not reads(body)


def test_zsh_reads_its_arguments_as_argv_too() -> None:
    assert reads("print $argv[1]", "#!/bin/zsh\n") and not reads("argv=1; echo $argv")


def test_the_message_says_it_may_read_them_and_where() -> None:
    script = SHEBANG + 'set -euo pipefail\n\n   srun python train.py --config "$1"   \n'
    with pytest.raises(Unresumable) as raised:
        no_arguments_read("/work/train.sh", script)
    assert str(raised.value).endswith('its script may read its arguments: line 4: srun python train.py --config "$1"')


# --- property: scripts made of lines whose reading is known -------------------------------------------
# A read of the script's arguments where it stands; the same text where the shell expands nothing; lines
# that read nothing; and lines that run text as code again (after which quoted text counts too).
READS = ['srun train.py "$1"', "exec torchrun train.py \"$@\"", "for a; do echo $a; done", "n=$#", "CONFIG=${1:-x.yaml}",
         "last=${!#}", "while getopts c: o; do :; done", "shift", 'echo "$*"', "cat <<EOF\n$1\nEOF", "for f do :; done"]  # fmt: skip
QUOTED = ["awk '{print $1}' f", "echo 'usage: $0 $1'", "cat <<'EOF'\n$1 $@\nEOF", 'cat <<"END"\nshift\nEND', "x=$'$1'"]
NEUTRAL = ["set -euo pipefail", "srun python train.py --config llama.yaml", 'export NCCL_DEBUG="INFO"',
           "if [ -f ckpt ]; then echo resume; fi", "case $HOST in ip-*) echo ok;; esac", "# $1: the config",
           "source ~/venv/bin/activate", "echo ${#HOST} $0 $$", "cat <<EOF\nplain\nEOF"]  # fmt: skip
EVALUATES = ["trap 'rm -f lock' EXIT", 'eval "$SETUP"']


@st.composite
def scripts(draw: st.DrawFn) -> tuple[str, bool]:
    """A script and whether it may read its arguments."""
    top = draw(st.lists(st.sampled_from(NEUTRAL + QUOTED), max_size=6))
    read_here = draw(st.lists(st.sampled_from(READS), max_size=2))
    in_function = draw(st.lists(st.sampled_from(READS + NEUTRAL + QUOTED), max_size=3))
    evaluates = draw(st.lists(st.sampled_from(EVALUATES), max_size=1))
    lines = [*top, *read_here, *evaluates]
    random.Random(draw(st.integers(0, 2**16))).shuffle(lines)  # noqa: S311 - an order, not a secret
    if in_function:
        body = "\n".join("  " + line if "\n" not in line else line for line in in_function)
        lines.insert(draw(st.integers(0, len(lines))), f"helper() {{\n{body}\n}}")
    quoted_text = any(line in QUOTED for line in top + in_function)
    expected = bool(read_here) or (bool(evaluates) and (quoted_text or any(line in READS for line in in_function)))
    return SHEBANG + "\n".join(lines) + "\n", expected


@settings(max_examples=400, deadline=None)
@given(case=scripts())
def test_a_script_is_flagged_exactly_when_it_may_read_its_arguments(case: tuple[str, bool]) -> None:
    script, expected = case
    found = first_argument_read(script)
    assert (found is not None) == expected, script
    if found:
        # the line it names is the script's own, and one that reads (or is read again by eval/trap)
        number, line = found
        assert script.splitlines()[number - 1].strip() == line
        assert any(part in line for part in ("$", "shift", "getopts", "for", "eval", "trap")), line
