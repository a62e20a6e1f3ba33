"""The message a human reads when one of HyperPod's own hang detectors spoke (issue 32): an
imported verdict (rules hyperpod_hang, hpto_hang, hpto_slow) told once per episode, informational.

Every line is from the recorded verdict: what HyperPod's detector said (its rule, evidence, when,
where), what HyperPod did (its hung job detection's notify or cancel; on EKS the training operator
restarts the job itself), what we did (nothing: the rule is observe-only), the orchestrator's own
command to look at the job, and how to review the verdict. It asks for no restart: the job stays
HyperPod's. Its severity is ``inform`` (the topic and chat, never the pager: nothing is asked of
anyone now), ``quiet`` on a dry-run stack, as for an incident (domain/messages/severity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import SUBJECT_LIMIT
from hyperpod_recovery.models.progress import kube_job_key

if TYPE_CHECKING:
    from hyperpod_recovery.domain.messages.severity import Severity
    from hyperpod_recovery.models.hangs import HangVerdict, RecordedVerdict

# The SNS attribute ``outcome`` of a verdict notice (an incident's is its outcome): what a
# subscription filters on to take or leave them.
NOTICE_OUTCOME = "observed"
HEADLINE = "OBSERVED - HyperPod's own detector reported this job; hyperpod-recovery changed nothing."
# The kind the training operator's faults are read from (steps/find_failed_jobs.py), and the name
# kubectl finds it by (its CRD's singular: models/kubernetes.py JOB_KINDS).
OPERATOR_JOB_KIND = "HyperPodPyTorchJob"
# What HyperPod did, by the imported detection's ``taken`` (ImportedDetection.taken).
TAKEN = {
    "cancel": "HyperPod's hung job detection cancelled the job (action cancel)",
    "notify": "HyperPod's hung job detection only reported it (action notify)",
    "": "HyperPod's hung job detection did not say what it did",
}
OPERATOR_TAKEN = "the HyperPod training operator restarts the job itself: the job stays the operator's"
WE_DID = "nothing: observed only (rule {rule} is observe-only); the verdict is recorded for review"
# A verdict id's word for ours (the JobRecovery's name); an imported rule's is its name
# (cli/hyperpod_recovery_cli/verdicts.py REASONS, held equal by tests/unit/test_verdict_notice.py).
OUR_REASONS = {"stall": "hung", "slow": "slow"}
LINE_LIMIT = 1024  # one field of the verdict, as the body shows it


def verdict_id(verdict: HangVerdict) -> str:
    """``<job>-<rule word>-<episode epoch>``: the id ``hyperpod-recovery verdicts`` takes."""
    word = OUR_REASONS.get(verdict.rule, verdict.rule)
    return f"{verdict.job}-{word}-{int(verdict.episode_at.timestamp())}"


def orchestrator_of(verdict: HangVerdict) -> Literal["slurm", "eks"]:
    """The training operator is EKS's; HyperPod's hung job detection, Slurm's. Our own rules: by the job's key."""
    if verdict.imported is not None:
        return "eks" if verdict.imported.source == "hyperpod_training_operator" else "slurm"
    return "eks" if kube_job_key(verdict.job) else "slurm"


def job_named(verdict: HangVerdict) -> str:
    """The job as its orchestrator names it: ``job 1001``, ``HyperPodPyTorchJob team-a/llama`` (the
    training operator's faults are read from that kind only; another EKS job's kind is not in its verdict)."""
    operator = verdict.imported is not None and verdict.imported.source == "hyperpod_training_operator"
    return f"{OPERATOR_JOB_KIND} {verdict.job}" if operator else f"job {verdict.job}"


def look_commands(verdict: HangVerdict) -> list[str]:
    """The orchestrator's own commands that show the job now (read-only)."""
    key = kube_job_key(verdict.job)
    if key is None:
        return [f"scontrol show job {verdict.job}", f"sacct -j {verdict.job}"]
    namespace, name = key
    if job_named(verdict).startswith(OPERATOR_JOB_KIND):
        kind = OPERATOR_JOB_KIND.lower()
        return [f"kubectl -n {namespace} get {kind} {name}", f"kubectl -n {namespace} describe {kind} {name}"]
    return [f"kubectl -n {namespace} get pytorchjob,hyperpodpytorchjob {name}"]  # (our own verdict: its kind is not in it)


def hyperpod_did(verdict: HangVerdict) -> str:
    imported = verdict.imported
    if imported is None:
        return "nothing HyperPod reported"
    if imported.source == "hyperpod_training_operator":
        return OPERATOR_TAKEN
    return TAKEN.get(imported.taken, TAKEN[""])


def severity_of_notice(*, dry_run: bool) -> Severity:
    """Informational: never the pager. A dry-run stack is quiet (no chat), as its incidents are."""
    return "quiet" if dry_run else "inform"


def notice_attributes(recorded: RecordedVerdict, *, dry_run: bool) -> dict[str, str]:
    """SNS message attributes (adapters/notifier.py routes on ``severity``; subscribers filter on the rest)."""
    verdict = recorded.verdict
    return {
        "outcome": NOTICE_OUTCOME,
        "cluster": verdict.cluster,
        "workflow": "job",
        "rule": verdict.rule,
        "verdict": verdict_id(verdict)[:256],
        "severity": severity_of_notice(dry_run=dry_run),
    }


def subject(verdict: HangVerdict) -> str:
    """``[hyperpod-recovery] <cluster>: observed <rule> <job>``: printable ASCII, at most 100 characters."""
    text = f"[hyperpod-recovery] {verdict.cluster}: observed {verdict.rule} {job_named(verdict)}"
    # (no backtick: in a subject it would open a code span that a command in the body closes)
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text.replace("`", "'"))
    return text if len(text) <= SUBJECT_LIMIT else text[: SUBJECT_LIMIT - 3] + "..."


def quoted(text: str) -> str:
    """A detector's own words, as one printable line (no escape sequence reaches a terminal)."""
    printable = "".join(c if c.isprintable() else " " for c in text.replace("`", "'"))
    return " ".join(printable.split())[:LINE_LIMIT] or "-"


def _where(verdict: HangVerdict) -> str:
    imported = verdict.imported
    if imported is None or not imported.where:
        return "-"
    if imported.source == "hyperpod_training_operator":
        return f"the {OPERATOR_JOB_KIND}'s {quoted(imported.where)}"
    parts = imported.where.split("/")
    node = f"instance {quoted(parts[2])} (instance group {quoted(parts[1])}), " if len(parts) == 3 and parts[2].startswith("i-") else ""
    return f"{node}log stream {quoted(imported.where)}"


def review_lines(verdict: HangVerdict, deployment: Deployment) -> list[str]:
    ident = verdict_id(verdict)
    if deployment.stack:
        return [
            f"  right: `hyperpod-recovery verdicts confirm {ident} --stack {deployment.stack} --reason 'what you checked'`",
            f"  wrong: `hyperpod-recovery verdicts reject {ident} --stack {deployment.stack} --reason 'what you checked'`",
        ]
    return ["  `hyperpod-recovery verdicts confirm` or `verdicts reject` with this id and the stack's name (--stack)"]


def verdict_notice(recorded: RecordedVerdict, *, deployment: Deployment | None = None) -> tuple[str, str]:
    """(subject, plain-text body) of an imported verdict's one message."""
    verdict = recorded.verdict
    imported = verdict.imported
    deployment = deployment or Deployment()
    detector = "the HyperPod training operator" if orchestrator_of(verdict) == "eks" else "HyperPod's hung job detection"
    lines = [
        HEADLINE,
        quoted(verdict.summary),
        "",
        "WHAT HYPERPOD'S DETECTOR SAID",
        f"  rule: {verdict.rule} ({detector}; its own rule: {quoted(imported.detector_rule if imported else '')})",
        f"  at: {verdict.episode_at:%Y-%m-%d %H:%M:%S} UTC (recorded {verdict.decided_at:%Y-%m-%d %H:%M:%S} UTC)",
        f"  where: {_where(verdict)}",
        f"  evidence: {quoted(imported.evidence if imported else '')}",
        "",
        "WHAT HYPERPOD DID",
        f"  {hyperpod_did(verdict)}",
        "",
        "WHAT HYPERPOD-RECOVERY DID",
        f"  {WE_DID.format(rule=verdict.rule)}",
        "",
        "TO LOOK AT THE JOB",
        *(f"  `{command}`" for command in look_commands(verdict)),
        "",
        "TO REVIEW THE VERDICT (was it really hung or slow then?)",
        *review_lines(verdict, deployment),
        "",
        f"Verdict: {verdict_id(verdict)} (rule {verdict.rule}, mode {verdict.mode}, cluster {quoted(verdict.cluster)})",
    ]
    # (each field is at most LINE_LIMIT characters: the body stays a few KB, far inside SNS's limit)
    return subject(verdict), "\n".join(lines)
