"""Find the newest *verified* checkpoint under a job's prefix: cheaply, and never a torn one.

docs/checkpoint-manifest.md is the spec. The order of attempts:

1. Manifest v1 or v1.1 (``step-<9 digits>/manifest.json``). The ``latest`` pointer is a hint: the folder it
   names is verified (manifest + one listing that also shows whether anything newer exists), so a
   fresh pointer costs 3 requests. A missing, corrupt, stale or torn-target pointer falls back to a
   search that never lists the whole prefix: zero-padded folders make S3's key order the step order,
   so ``StartAfter`` probes gallop then bisect to the newest page of folders (requests grow with
   log N). Candidates are verified newest first; a torn one falls back to the next older.
2. Megatron-LM (``iter_<7 digits>/`` + ``latest_checkpointed_iteration.txt``): the same, with the
   tracker as the pointer and DCP's ``.metadata`` (torch_dist) or the tracker itself (legacy format)
   as the proof of completeness.
3. Anything else (PyTorch DCP, Orbax, torchsnapshot in folders named by step): folders are listed in
   full (one request per 1,000) because unpadded names do not sort by step, and a folder counts only
   with its framework's completion marker.

The chosen checkpoint carries a v1.1 manifest's ``layout`` (None for v1 and without our manifest);
resharding.py says whether it loads at another data-parallel width.

A manifest names the job that wrote it; given the name of the job being resumed, another job's
manifest is rejected like a torn one (``manifest_job`` cuts both names the same way).

Every key followed comes from our own listing or from a pointer/manifest checked by
``relative_key_problem``: nothing outside the job's prefix is ever read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from hyperpod_recovery.domain.checkpoints.resharding import DCP_FRAMEWORK
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.manifest import (
    MANIFEST_NAME,
    MANIFEST_SCHEMAS,
    MAX_MANIFEST_BYTES,
    MAX_POINTER_BYTES,
    POINTER_NAME,
    CheckpointLayout,
    CheckpointManifest,
    CheckpointPointer,
    UnreadableJson,
    load_json,
    manifest_job,
    manifest_size_problem,
    manifest_version,
)
from hyperpod_recovery.ports import LIST_PAGE_MAX, CheckpointReader, Listing

PAGE = LIST_PAGE_MAX
# Verifying costs requests; a prefix whose newest 32 checkpoints are all torn needs a human anyway.
MAX_VERIFICATIONS = 32
# A manifest with 100,000 bad shards has 100,000 validation errors; its reason still has to fit in a
# Step Functions payload (256 KB) and be readable in a notification.
MAX_REASON_ERRORS = 3

_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9])(?:/(?P<prefix>.*))?$")
_TRAILING_NUMBER = re.compile(r"([0-9]{1,18})/$")

MEGATRON_TRACKER = "latest_checkpointed_iteration.txt"
DCP_MARKER = ".metadata"  # torch.distributed.checkpoint: written last, by the coordinator
ORBAX_MARKER = "commit_success.txt"  # Orbax on object stores, where a directory rename is not atomic
TORCHSNAPSHOT_MARKER = ".snapshot_metadata"
ORBAX_TMP = "orbax-checkpoint-tmp"
_MARKERS = ((DCP_MARKER, DCP_FRAMEWORK), (ORBAX_MARKER, "orbax"), (TORCHSNAPSHOT_MARKER, "torchsnapshot"))
INCOMPLETE = f"no manifest.json and no completion marker ({', '.join(m for m, _ in _MARKERS)}): incomplete or still being written"


# --- results --------------------------------------------------------------------------------
@dataclass
class Verdict:
    verified: bool
    framework: str | None = None
    reason: str = ""  # why not, or how it was verified
    job: str | None = None  # the job that wrote the manifest, when one was read
    layout: CheckpointLayout | None = None  # a verified v1.1 manifest's
    created_at: datetime | None = None  # a verified manifest's commit time (a marker has none)


@dataclass
class Discovery:
    checkpoint: CheckpointRef | None
    rejected: list[str] = field(default_factory=list)  # "step 3000: shard rank3.distcp is missing"
    found_by: str = "nothing found"  # "pointer", "pointer, then search", "search", "megatron tracker", "full listing"
    # The chosen checkpoint's commit time, as its manifest says (None: verified by a marker). What a
    # shrunk copy's restart is measured by (domain/elastic/estimates.py); never a ground for choosing.
    committed_at: datetime | None = None


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b/``); the prefix always ends with a slash."""
    match = _S3_URI.match(uri)
    if not match:
        raise ValueError(f"not an s3:// URI: {uri!r}")
    prefix = (match.group("prefix") or "").strip("/")
    if any(segment in ("", ".", "..") for segment in prefix.split("/")) and prefix:
        raise ValueError(f"s3 URI {uri!r} has an empty, '.' or '..' path segment")
    return match.group("bucket"), f"{prefix}/" if prefix else ""


def list_all(reader: CheckpointReader, bucket: str, prefix: str, *, delimiter: str | None = None) -> Iterator[Listing]:
    """Every page under ``prefix`` (one request each)."""
    token: str | None = None
    while True:
        page = reader.list(bucket, prefix, delimiter=delimiter, token=token)
        yield page
        if not page.truncated or not page.next_token:
            return
        token = page.next_token


# --- verification -----------------------------------------------------------------------------
def schema_problem(exc: ValidationError) -> str:
    """The first few validation errors, ``field.path: message``, and how many more there are."""
    errors = exc.errors(include_url=False)
    shown = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"] for e in errors[:MAX_REASON_ERRORS])
    return shown + (f" (and {len(errors) - MAX_REASON_ERRORS} more)" if len(errors) > MAX_REASON_ERRORS else "")


def foreign_job_problem(manifest: CheckpointManifest, job: str | None) -> str:
    """ "" when ``job`` (a Slurm job name; None = not known) wrote ``manifest``, else why it is another job's."""
    if job is None or manifest.job == manifest_job(job):
        return ""
    return f"manifest.json was written by job {manifest.job!r}, not {manifest_job(job)!r}: another job's checkpoint"


def parse_manifest(step: int, body: bytes, job: str | None = None) -> tuple[CheckpointManifest | None, str]:
    """(manifest, "") when ``body`` is a valid v1 manifest for ``step`` written by ``job`` (any job when
    None), else (None, reason)."""
    problem = manifest_size_problem(len(body))
    if problem:
        return None, problem
    try:
        document = load_json(body)
        manifest = CheckpointManifest.model_validate(document)
    except UnreadableJson as exc:
        return None, f"manifest.json {exc}"
    except ValidationError as exc:
        return None, f"manifest.json does not match schema {_claimed_version(document)}: {schema_problem(exc)}"
    if manifest.step != step:
        return None, f"manifest says step {manifest.step} but lives in the folder of step {step}"
    problem = foreign_job_problem(manifest, job)
    return (None, problem) if problem else (manifest, "")


def _claimed_version(document: object) -> str:
    """The version a manifest that does not validate claims to follow (v1.1's layout is checked only
    there), else v1: what a reason names."""
    schema = document.get("schema") if isinstance(document, dict) else None
    return manifest_version(schema) if schema in MANIFEST_SCHEMAS else "v1"


def verified_by_manifest(manifest: CheckpointManifest, job: str | None, *, checked: str = "") -> Verdict:
    # Without the resumed job's name nothing was compared: say whose checkpoint it is instead.
    compared = "" if job is not None else " (not compared with a job name: none given)"
    layout = f"; {manifest.layout.summary()}" if manifest.layout is not None else ""
    reason = f"manifest {manifest.version}, {len(manifest.shards)} shards{checked}, written by job {manifest.job!r}{compared}{layout}"
    return Verdict(
        True, framework=manifest.framework, reason=reason, job=manifest.job, layout=manifest.layout, created_at=manifest.created_at
    )


def check_shards(manifest: CheckpointManifest, sizes: dict[str, int]) -> str:
    """ "" when every listed shard exists with its listed size, else the first problem."""
    for shard in manifest.shards:
        actual = sizes.get(shard.key)
        if actual is None:
            return f"shard {shard.key} is missing"
        if actual != shard.size:
            return f"shard {shard.key} is {actual} bytes, manifest says {shard.size}"
    return ""


def folder_sizes(reader: CheckpointReader, bucket: str, folder: str) -> dict[str, int]:
    """Every object under ``folder``: key relative to the folder -> size (one request per 1,000)."""
    return {key[len(folder) :]: size for page in list_all(reader, bucket, folder) for key, size in page.objects}


def verify_folder(
    reader: CheckpointReader, bucket: str, folder: str, step: int, *, job: str | None = None, committed_by_tracker: bool = False
) -> Verdict:
    """Is the checkpoint in ``folder`` complete, and (with our manifest) written by ``job``? Our manifest
    if it has one, else its framework's marker (which names no job).

    ``committed_by_tracker``: Megatron's tracker names this iteration or a later one, which for the
    legacy (non-DCP) format is the only proof of completeness Megatron writes.
    """
    body = reader.get(bucket, folder + MANIFEST_NAME, MAX_MANIFEST_BYTES + 1)
    if body is not None:
        manifest, problem = parse_manifest(step, body, job)
        if manifest is None:
            return Verdict(False, reason=problem)
        problem = check_shards(manifest, folder_sizes(reader, bucket, folder))
        if problem:
            return Verdict(False, reason=problem, job=manifest.job)
        return verified_by_manifest(manifest, job)
    return _verify_by_marker(reader, bucket, folder, committed_by_tracker)


def _verify_by_marker(reader: CheckpointReader, bucket: str, folder: str, committed_by_tracker: bool) -> Verdict:
    # Markers are top-level files: one delimited listing usually shows them all. A marker that sorts
    # after a truncated page's last entry is checked with its own HEAD.
    page = reader.list(bucket, folder, delimiter="/")
    names = {key[len(folder) :]: size for key, size in page.objects}
    last_seen = max([*names, *(f[len(folder) :] for f in page.folders)], default="")
    for marker, framework in _MARKERS:
        size = names.get(marker)
        if size is None and page.truncated and marker > last_seen:
            size = reader.size(bucket, folder + marker)
        if size is not None:
            if size == 0 and marker == DCP_MARKER:
                return Verdict(False, reason=f"{marker} is empty (the coordinator's write did not finish)")
            return Verdict(True, framework=framework, reason=f"{framework} completion marker {marker}")
    subfolders = [f[len(folder) :] for f in page.folders]
    if committed_by_tracker and any(name.startswith("mp_rank_") for name in subfolders):
        return Verdict(True, framework="megatron", reason=f"legacy Megatron checkpoint committed by {MEGATRON_TRACKER}")
    if not names and not subfolders:
        return Verdict(False, reason="the folder is empty")
    return Verdict(False, reason=INCOMPLETE)


# --- padded layouts: log-N search -------------------------------------------------------------
@dataclass(frozen=True)
class PaddedLayout:
    """Checkpoint folders ``<folder_prefix><zero-padded step>/``, so key order is step order."""

    name: str
    folder_prefix: str
    digits: int

    def folder(self, step: int) -> str:
        return f"{self.folder_prefix}{step:0{self.digits}d}/"

    def position(self, name: str) -> int | None:
        """Where ``name`` sorts among the steps: the number in its first ``digits`` characters after the prefix."""
        digits = name[len(self.folder_prefix) : len(self.folder_prefix) + self.digits]
        # ASCII digits only: str.isdigit() also takes other scripts' digits ("٠٠٠٠٠١٠٠٠"), which sort after
        # every step, so positions would go backwards in key order and the search would never end.
        if not name.startswith(self.folder_prefix) or len(digits) != self.digits or not (digits.isascii() and digits.isdigit()):
            return None
        return int(digits)

    def step_of(self, name: str) -> int | None:
        position = self.position(name)
        return position if position is not None and name == self.folder(position) else None

    @property
    def end(self) -> int:
        return int(10**self.digits)


MANIFEST_LAYOUT = PaddedLayout("manifest v1", "step-", 9)
MEGATRON_LAYOUT = PaddedLayout("megatron", "iter_", 7)


@dataclass(frozen=True)
class _Page:
    """What one probe saw: (position, step or None for a look-alike) per folder, in key order."""

    found: list[tuple[int, int | None]]
    complete: bool  # nothing after it: the listing ended, or it reached a folder at or past the range's end
    last_folder: str | None  # the last folder key listed, where a contiguous probe goes on from
    size: int  # entries (folders and objects) per listing page, as S3 returned them


class _Search:
    """Newest folders of one padded layout under one prefix, without listing them all."""

    def __init__(self, reader: CheckpointReader, bucket: str, base: str, layout: PaddedLayout) -> None:
        self.reader, self.bucket, self.base, self.layout = reader, bucket, base, layout
        self.listed_whole_range = False  # the last newest() returned every folder of its range, not only the newest

    def _probe(self, position: int, hi: int, after: str | None) -> _Page:
        """Folders at ``position`` or after (the keys of folder ``p`` sort after ``<prefix><p>``), or right
        after the folder key ``after``; continued while every folder listed is a look-alike.

        A page of look-alikes alone (``step-000001000.tmp/``, ``step-00000100x/``, objects) says nothing
        about where the newest step is, so it never becomes a bound of the search.
        """
        prefix = self.base + self.layout.folder_prefix
        # Every key inside folder "x/" sorts before "x0" ("/" + 1); a folder "x0/" still sorts after it.
        start = after[:-1] + "0" if after else f"{prefix}{position:0{self.layout.digits}d}"
        page = self.reader.list(self.bucket, prefix, delimiter="/", start_after=start)
        found: list[tuple[int, int | None]] = []
        last_folder, size = after, 0
        while True:
            found += self._positions(page)
            last_folder = page.folders[-1] if page.folders else last_folder
            size = max(size, len(page.folders) + len(page.objects))
            ended = not page.truncated or not page.next_token or any(p >= hi for p, _ in found)
            if ended or any(s is not None for _, s in found):
                return _Page(found, ended, last_folder, size)
            page = self.reader.list(self.bucket, prefix, delimiter="/", token=page.next_token)

    def _positions(self, page: Listing) -> list[tuple[int, int | None]]:
        """(position, step or None for a look-alike such as ``step-000001000.tmp/``) per folder of the page."""
        found = []
        for folder in page.folders:
            name = folder[len(self.base) :]
            position = self.layout.position(name)
            if position is not None:
                found.append((position, self.layout.step_of(name)))
        return found

    def newest(self, above: int = -1, below: int | None = None) -> list[int]:
        """Steps of the newest checkpoint folders with ``above < step < below``, newest first.

        A probe lists up to a page of folders from a position on. Invariants: no step in range sits at
        a position ``>= hi``; ``tail`` holds the in-range steps of the last full page, which holds at
        least one step, ended at position ``lo`` with the folder key ``after`` (look-alikes of step
        ``lo`` may sort on both sides of ``step-<lo>/``, so a contiguous probe goes on from that key, not
        from ``lo + 1``). From the first full page the search learns the spacing of the steps, then
        gallops (doubling jumps) until a probe overshoots the newest folder, then bisects until the
        folders left between ``lo`` and ``hi`` should fit in one page, which it lists: O(log N) requests.
        """
        hi = self.layout.end if below is None else min(below, self.layout.end)
        lo, tail, after = above, list[int](), None
        self.listed_whole_range = False
        spacing: int | None = None  # positions per folder, learned from full pages
        page_size = PAGE  # entries per full page, learned too (S3 may return fewer than MaxKeys)
        jump = 0  # gallop distance; 0 once bisecting
        while lo + 1 < hi or after is not None:
            if spacing is None or lo + 1 >= hi or (hi - lo) // spacing <= page_size:
                position = lo + 1
            elif jump and lo + jump < hi:
                position = lo + jump
            else:
                jump, position = 0, (lo + 1 + hi) // 2
            contiguous = position == lo + 1
            page = self._probe(position, hi, after if contiguous else None)
            in_range = [(p, s) for p, s in page.found if p < hi]
            steps = sorted((s for _, s in in_range if s is not None), reverse=True)
            if page.complete:
                if contiguous:  # together with the last full page, the newest folders
                    self.listed_whole_range = lo == above
                    return steps + sorted(tail, reverse=True)
                if steps:
                    return steps
                hi = position
                continue
            first_jump, page_size = spacing is None, page.size
            # Positions per folder: within the page, or (one folder) from the probe's start to it.
            first, gaps = (in_range[0][0], len(in_range) - 1) if len(in_range) > 1 else (position - 1, 1)
            spacing = max(1, (in_range[-1][0] - first) // gaps)
            jump = spacing * page_size if first_jump else jump * 2
            lo, tail, after = in_range[-1][0], steps, page.last_folder
        return sorted(tail, reverse=True)


# --- discovery --------------------------------------------------------------------------------
class _Discoverer:
    def __init__(self, reader: CheckpointReader, uri: str, job: str | None) -> None:
        self.reader, self.job = reader, job
        self.bucket, self.base = split_s3_uri(uri)
        self.discovery = Discovery(checkpoint=None)
        self.verifications_left = MAX_VERIFICATIONS
        self.layout_found = False  # a pointer, tracker or checkpoint folder of the layout being tried exists

    def run(self) -> Discovery:
        # A prefix holds one job's checkpoints in one layout: the first layout with any folder decides.
        for attempt in (self._manifest_layout, self._megatron_layout, self._any_framework):
            if attempt() or self.layout_found:
                return self.discovery
        return self.discovery

    # Each layout returns True once a checkpoint is chosen.
    def _manifest_layout(self) -> bool:
        layout, search = MANIFEST_LAYOUT, _Search(self.reader, self.bucket, self.base, MANIFEST_LAYOUT)
        pointer = self._read_pointer()
        if pointer is None:
            return self._search(search, layout, found_by="search")
        folder = self.base + pointer.checkpoint
        verdict, newer_exists = self._verify_pointed(folder, pointer.step)
        if not verdict.verified:
            self._reject(layout, pointer.step, f"{verdict.reason} (named by the {POINTER_NAME} pointer)")
            return self._search(search, layout, found_by="search (pointer target torn)", skip={pointer.step})
        if not newer_exists:
            return self._choose(layout, pointer.step, verdict, found_by="pointer")
        # Stale pointer or a newer checkpoint still being written: look above it, else keep it.
        if self._search(search, layout, found_by="pointer, then search", above=pointer.step):
            return True
        return self._choose(layout, pointer.step, verdict, found_by="pointer (newer checkpoints torn)")

    def _read_pointer(self) -> CheckpointPointer | None:
        body = self.reader.get(self.bucket, self.base + POINTER_NAME, MAX_POINTER_BYTES + 1)
        if body is None:
            return None
        self.layout_found = True
        where = f"pointer {self.base}{POINTER_NAME}"
        if len(body) > MAX_POINTER_BYTES:
            self.discovery.rejected.append(f"{where}: larger than {MAX_POINTER_BYTES} bytes, ignored")
            return None
        try:
            return CheckpointPointer.model_validate(load_json(body))
        except UnreadableJson as exc:
            self.discovery.rejected.append(f"{where}: {exc}, ignored")
        except ValidationError as exc:
            self.discovery.rejected.append(f"{where}: rejected, never followed: {schema_problem(exc)}")
        return None

    def _verify_pointed(self, folder: str, step: int) -> tuple[Verdict, bool]:
        """Verify the pointer's folder with one listing that also shows whether any newer folder exists."""
        self.verifications_left -= 1
        body = self.reader.get(self.bucket, folder + MANIFEST_NAME, MAX_MANIFEST_BYTES + 1)
        if body is None:
            return Verdict(False, reason="no manifest.json"), True
        manifest, problem = parse_manifest(step, body, self.job)
        if manifest is None:
            return Verdict(False, reason=problem), True
        # Keys of the folder come first from here; the first key past them belongs to a newer folder.
        sizes: dict[str, int] = {}
        newer_exists = False
        token: str | None = None
        while True:
            page = self.reader.list(self.bucket, self.base + MANIFEST_LAYOUT.folder_prefix, start_after=folder[:-1], token=token)
            for key, size in page.objects:
                if key < folder:  # a look-alike such as step-000002000.tmp/ sorts just before the folder
                    continue
                if not key.startswith(folder):
                    newer_exists = True
                    break
                sizes[key[len(folder) :]] = size
            if newer_exists or not page.truncated or not page.next_token:
                break
            token = page.next_token
        problem = check_shards(manifest, sizes)
        if problem:
            return Verdict(False, reason=problem, job=manifest.job), True
        return verified_by_manifest(manifest, self.job), newer_exists

    def _megatron_layout(self) -> bool:
        layout, search = MEGATRON_LAYOUT, _Search(self.reader, self.bucket, self.base, MEGATRON_LAYOUT)
        body = self.reader.get(self.bucket, self.base + MEGATRON_TRACKER, 64)
        tracker = body.decode("ascii", "replace").strip() if body is not None else None
        self.layout_found = tracker is not None
        if tracker is None or not (tracker.isascii() and tracker.isdigit()) or int(tracker) >= layout.end:
            if tracker is not None:
                self.discovery.rejected.append(f"{MEGATRON_TRACKER}: says {tracker[:20]!r}, not an iteration number; searching")
            return self._search(search, layout, found_by="search")
        iteration = int(tracker)
        folder = self.base + layout.folder(iteration)
        self.verifications_left -= 1
        verdict = verify_folder(self.reader, self.bucket, folder, iteration, job=self.job, committed_by_tracker=True)
        if not verdict.verified:
            self._reject(layout, iteration, f"{verdict.reason} (named by {MEGATRON_TRACKER})")
            return self._search(search, layout, found_by="search (tracker target torn)", skip={iteration}, tracker=iteration)
        # Megatron writes the tracker after the save and a barrier; a newer folder with DCP's marker is
        # complete even if the tracker was not moved yet.
        if self._search(search, layout, found_by="megatron tracker, then search", above=iteration, tracker=iteration):
            return True
        return self._choose(layout, iteration, verdict, found_by="megatron tracker")

    def _search(
        self,
        search: _Search,
        layout: PaddedLayout,
        *,
        found_by: str,
        above: int = -1,
        below: int | None = None,
        skip: frozenset[int] | set[int] = frozenset(),
        tracker: int | None = None,
    ) -> bool:
        while True:
            steps = search.newest(above, below)
            if not steps:
                return False
            self.layout_found = True
            for step in steps:
                if step in skip:
                    continue
                if self.verifications_left <= 0:
                    self.discovery.rejected.append(f"gave up after {MAX_VERIFICATIONS} checkpoints that do not verify")
                    return False
                self.verifications_left -= 1
                committed = tracker is not None and step <= tracker
                folder = self.base + layout.folder(step)
                verdict = verify_folder(self.reader, self.bucket, folder, step, job=self.job, committed_by_tracker=committed)
                if verdict.verified:
                    return self._choose(layout, step, verdict, found_by=found_by)
                self._reject(layout, step, verdict.reason)
            if search.listed_whole_range:
                return False
            below = steps[-1]

    def _any_framework(self) -> bool:
        """Folders named by step in any style (``1000/``, ``checkpoint-1000/``, ``epoch_2_step_1000/``)."""
        candidates: list[tuple[int, str]] = []
        for page in list_all(self.reader, self.bucket, self.base, delimiter="/"):
            for folder in page.folders:
                name = folder[len(self.base) :]
                match = _TRAILING_NUMBER.search(name)
                # Padded layouts were searched already; Orbax's temporary folders are never complete.
                if not match or ORBAX_TMP in name or MANIFEST_LAYOUT.step_of(name) is not None or MEGATRON_LAYOUT.step_of(name) is not None:
                    continue
                candidates.append((int(match.group(1)), folder))
        for step, folder in sorted(candidates, reverse=True):
            if self.verifications_left <= 0:
                self.discovery.rejected.append(f"gave up after {MAX_VERIFICATIONS} checkpoints that do not verify")
                return False
            self.verifications_left -= 1
            verdict = verify_folder(self.reader, self.bucket, folder, step, job=self.job)
            name = folder[len(self.base) :]
            if verdict.verified:
                self.discovery.checkpoint = CheckpointRef(
                    uri=f"s3://{self.bucket}/{folder}", step=step, framework=verdict.framework, layout=verdict.layout
                )
                self.discovery.found_by = "full listing"
                self.discovery.committed_at = verdict.created_at
                return True
            self.discovery.rejected.append(f"{name} (step {step}): {verdict.reason}")
        return False

    def _choose(self, layout: PaddedLayout, step: int, verdict: Verdict, *, found_by: str) -> bool:
        framework = "megatron" if layout is MEGATRON_LAYOUT else verdict.framework
        uri = f"s3://{self.bucket}/{self.base}{layout.folder(step)}"
        self.discovery.checkpoint = CheckpointRef(uri=uri, step=step, framework=framework, layout=verdict.layout)
        self.discovery.found_by = found_by
        self.discovery.committed_at = verdict.created_at
        return True

    def _reject(self, layout: PaddedLayout, step: int, reason: str) -> None:
        label = f"step {step}" if layout is MANIFEST_LAYOUT else f"{layout.folder(step)[:-1]} (step {step})"
        self.discovery.rejected.append(f"{label}: {reason}")


def find_newest_verified(reader: CheckpointReader, uri: str, *, job: str | None = None) -> Discovery:
    """The newest checkpoint under ``uri`` that verifies complete, and why newer ones were rejected.

    ``job``: the Slurm job name of the job being resumed; a manifest another job wrote is rejected.
    None when it is not known: any job's manifest is accepted.
    """
    return _Discoverer(reader, uri, job).run()


def verify_checkpoint(reader: CheckpointReader, uri: str, step: int, *, job: str | None = None) -> Verdict:
    """Verify one step of a manifest-v1 prefix (``hyperpod-recovery checkpoint verify``), for ``job`` as above."""
    bucket, base = split_s3_uri(uri)
    return verify_folder(reader, bucket, base + MANIFEST_LAYOUT.folder(step), step, job=job)
