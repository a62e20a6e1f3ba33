"""A job's output paths as sbatch takes them (``--output=train-%j.out``) and as Slurm 23.02-24.11 print
them (expanded for the job: ``train-42.out``), from SchedMD/slurm's src/api/job_info.c (the printer) and
src/slurmd/common/fname.c (the job's own step, which opens the files)."""

from __future__ import annotations

import re

# What the job's own step expands in a batch job's paths (src/slurmd/common/fname.c, _batch_path_check:
# %A %a %b %J %j %n %N %s %t %u %x, with a width) but the printer does not (src/api/job_info.c,
# _fname_format: %A %a %b %j %u %x; %% prints as %): these come out of the printer as they went in.
_LEFT_AS_GIVEN = re.compile(r"(%\d*[JnNst])")
# An escape naming the job's id (%A is the job id of a job that is no array's), past any %%.
_NAMES_JOB_ID = re.compile(r"%\d*[jJA]")
_ESCAPE = re.compile(r"%%|%\d*[A-Za-z]")


def unexpanded(path: str, job_id: str) -> str:
    """An output path Slurm printed expanded for a job, handed back as a pattern that a copy of the job
    expands to a file of its own, never the job's (a copy opening the old job's log with its default
    truncate mode would erase the failure's evidence): the job id in the file's name, zero-padded or
    not (``%4j`` prints 0042), goes back to ``%j`` of that width; an escape the printer leaves as given
    (``%N``...) is kept; any other ``%`` was a literal one (given as ``%%``) and is escaped again. The
    user name and job name it may have had (``%u``, ``%x``) are the copy's too. A literal number in the
    file name equal to the job id reads as ``%j`` as well: the copy then writes a file of its own."""
    if not path:
        return path
    directory, slash, name = path.rpartition("/")
    return f"{_as_pattern(directory, None)}{slash}{_as_pattern(name, job_id)}"


def _as_pattern(text: str, job_id: str | None) -> str:
    pieces = _LEFT_AS_GIVEN.split(text)  # odd pieces: escapes left as given
    for index in range(0, len(pieces), 2):
        piece = pieces[index].replace("%", "%%")
        pieces[index] = piece if job_id is None else _job_ids_back(piece, job_id)
    return "".join(pieces)


def _job_ids_back(text: str, job_id: str) -> str:
    """Each run of the job id (zero-padded or not; "%j%j" prints 4242) between non-digits, as escapes."""
    once = rf"0*{re.escape(job_id)}"

    def escapes(run: re.Match[str]) -> str:
        return "".join(_job_id_escape(len(printed), len(job_id)) for printed in re.findall(once, run[0]))

    return re.sub(rf"(?<![0-9])(?:{once})+(?![0-9])", escapes, text)


def _job_id_escape(printed: int, digits: int) -> str:
    return f"%{printed}j" if printed > digits else "%j"


def names_job_id(path: str) -> bool:
    """Whether a path pattern (as sbatch takes it) names the job's id, so each job writes its own file."""
    return any(_NAMES_JOB_ID.fullmatch(escape[0]) for escape in _ESCAPE.finditer(path))
