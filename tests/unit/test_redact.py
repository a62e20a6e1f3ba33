"""Secrets out of the evidence (redact.py): every well-known shape, embedded in any text, is
gone from what is kept; redaction is idempotent, leaves a text without secrets as it was, and stays
within its bound in bytes."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.models.commands import (
    INCIDENT_EVIDENCE_BYTES,
    JOB_TEXT_BYTES,
    JOB_TEXT_LIMIT,
    MAX_EVIDENCE_NODES,
    NODE_EVIDENCE_BYTES,
    STACKS_TEXT_LIMIT,
    HangEvidenceResult,
    NodeStacks,
)
from hyperpod_recovery.redact import CUT_MARKER, LEGACY_CUT, cut_bytes, redact, redact_within

B64 = string.ascii_letters + string.digits + "/+"
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


def _chars(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


def _mixed_case(run: str) -> bool:
    return any(c.isupper() for c in run) and any(c.islower() for c in run)


aws_key_id = st.builds(lambda p, r: p + r, st.sampled_from(["AKIA", "ASIA"]), _chars(UPPER_DIGITS, 16))
aws_secret = _chars(B64, 40).filter(_mixed_case)
session_token = st.builds(
    lambda p, r: p + r, st.sampled_from(["IQoJb3JpZ2luX2VjE", "FwoGZXIvYXdzE"]), st.text(B64, min_size=100, max_size=400)
)
github = st.builds(lambda p, r: p + r, st.sampled_from(["ghp_", "gho_", "ghs_"]), _chars(ALNUM, 36))
slack = st.builds(lambda p, r: p + r, st.sampled_from(["xoxb-", "xoxa-", "xoxp-"]), st.text(ALNUM + "-", min_size=20, max_size=60))
openai = st.builds(lambda p, r: p + r, st.sampled_from(["sk-", "sk-proj-"]), st.text(ALNUM + "_-", min_size=24, max_size=64))
hugging_face = st.builds(lambda r: "hf_" + r, _chars(ALNUM, 34))
jwt_part = st.text(ALNUM + "_-", min_size=10, max_size=60)
jwt = st.builds(lambda a, b, c: f"eyJ{a}.{b}.{c}", jwt_part, jwt_part, jwt_part)
password = st.text(ALNUM + "!#$%()*+-./<=>?@[^_`{|}~", min_size=10, max_size=40).filter(lambda v: not v.startswith("[REDACTED:"))
url_password = st.text(ALNUM + "!$()*+-._~", min_size=10, max_size=40)

# What surrounds a secret: anything, multi-line and non-ASCII included, separated from it by a space
# (a secret glued to the letters around it is another, longer token).
surroundings = st.text(min_size=0, max_size=200)


def _shapes() -> st.SearchStrategy[tuple[str, str]]:
    """(the text that carries a secret, the secret): every shape in its usual settings."""
    return st.one_of(
        aws_key_id.map(lambda s: (s, s)),
        aws_key_id.map(lambda s: (f"export AWS_ACCESS_KEY_ID={s}", s)),
        aws_secret.map(lambda s: (s, s)),
        aws_secret.map(lambda s: (f"aws_secret_access_key = {s}", s)),
        aws_secret.map(lambda s: (f'{{"SecretAccessKey": "{s}"}}', s)),
        aws_secret.map(lambda s: (f"AWS_SECRET_ACCESS_KEY={s}", s)),
        aws_secret.map(lambda s: (f"Comment=key={s}", s)),
        aws_secret.map(lambda s: (f"creds:{s}.", s)),
        session_token.map(lambda s: (s, s)),
        session_token.map(lambda s: (f"aws_session_token={s}", s)),
        session_token.map(lambda s: (f'"SessionToken": "{s}"', s)),
        github.map(lambda s: (s, s)),
        slack.map(lambda s: (s, s)),
        openai.map(lambda s: (s, s)),
        hugging_face.map(lambda s: (s, s)),
        jwt.map(lambda s: (s, s)),
        st.text(ALNUM + "-._~+/", min_size=20, max_size=80).map(lambda s: (f"Authorization: Bearer {s}", s)),
        st.text(ALNUM + "-._~+/", min_size=20, max_size=80).map(lambda s: (f'-H "Authorization: Basic {s}"', s)),
        st.text(ALNUM + "-._~+/", min_size=20, max_size=80).map(lambda s: (f"using bearer {s}", s)),
        st.tuples(
            st.sampled_from(["https", "postgresql", "redis", "mongodb+srv"]), st.text(ALNUM, min_size=1, max_size=12), url_password
        ).map(lambda t: (f"{t[0]}://{t[1]}:{t[2]}@db.internal:5432/x", t[2])),
        st.tuples(
            st.sampled_from(
                ["password", "DB_PASSWORD", "token", "HF_TOKEN", "client_secret", "api_key", "WANDB_API_KEY", "apikey", "passwd"]
            ),
            st.sampled_from(["{k}={v}", "{k}: {v}", '"{k}": "{v}"', "{k}='{v}'", "--{k}={v}"]),
            password,
        ).map(lambda t: (t[1].format(k=t[0], v=t[2]), t[2])),
        st.tuples(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]), st.lists(_chars(B64, 64), min_size=1, max_size=8)).map(
            lambda t: (f"-----BEGIN {t[0]}PRIVATE KEY-----\n" + "\n".join(t[1]) + f"\n-----END {t[0]}PRIVATE KEY-----", "\n".join(t[1]))
        ),
    )


LONG = 12  # no substring of a secret this long survives (shorter ones are common words and numbers)


def _leaks(secret: str, output: str, allowed: str) -> list[str]:
    """The substrings of ``secret`` of LONG characters in ``output`` that were not in the text around it."""
    pieces = {secret[i : i + LONG] for i in range(max(len(secret) - LONG + 1, 1))}
    return sorted(p for p in pieces if p in output and p not in allowed)


@settings(max_examples=400, deadline=None)
@given(shape=_shapes(), before=surroundings, after=surroundings)
def test_a_secret_of_any_shape_anywhere_in_a_text_is_gone_from_it(shape: tuple[str, str], before: str, after: str) -> None:
    # Given a text that carries a secret of a well-known shape among anything
    carrier, secret = shape
    text = f"{before} {carrier} {after}"
    # When it is redacted
    out = redact(text)
    # Then neither the secret nor a long piece of it is left (beyond what the text around it says anyway)
    assert secret not in out or secret in before + after
    assert _leaks(secret, out, before + after + "[REDACTED:") == []
    assert "[REDACTED:" in out


@settings(max_examples=300, deadline=None)
@given(shape=_shapes(), before=surroundings, after=surroundings, limit=st.integers(min_value=0, max_value=600))
def test_a_secret_is_gone_from_the_text_cut_to_its_bound(shape: tuple[str, str], before: str, after: str, limit: int) -> None:
    # Given a text with a secret, cut at any length (a cut made first could keep the secret's tail)
    carrier, secret = shape
    text = f"{before} {carrier} {after}"
    for keep in ("start", "end"):
        # When it is redacted within the bound
        out = redact_within(text, limit, keep)  # type: ignore[arg-type]
        # Then it fits, and no long piece of the secret is in it
        assert len(out.encode()) <= limit
        assert _leaks(secret, out, before + after + "[REDACTED:" + CUT_MARKER) == []


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.builds(lambda s, t: f"{t} {s[0]} {t}", _shapes(), st.text(max_size=60))))
def test_redaction_is_idempotent(text: str) -> None:
    # Given any text, with or without a secret, once redacted
    once = redact(text)
    # When it is redacted again
    # Then nothing more changes
    assert redact(once) == once


# Text as hung jobs print it: words, numbers, paths, losses, NCCL's watchdog, stack frames.
benign = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "step 2050 loss 1.6950 lr 3.0e-04 tokens/s 412553",
                "max_tokens: 2048",
                "num_tokens=4096",
                "[rank3] waiting in all_reduce (ProcessGroupNCCL, SeqNum=88123, OpType=ALLREDUCE, NumelIn=262144000)",
                "    all_reduce (torch/distributed/distributed_c10d.py:2050)",
                "DataLoader worker 3: still reading /fsx/data/shard-00731.bin after 240 s",
                'Thread 4100 (idle): "MainThread"',
                "commit 3f786850e387550fdab836ed7e6dc881de23001b",
                "s3://llm-train-checkpoints/llama-70b-pretrain/step-2000",
                "https://github.com/pytorch/pytorch/issues/12345",
                "NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/IPC",
                "Authorized: yes",
            ]
        ),
        st.text(alphabet=string.ascii_lowercase + string.digits + " .,:()[]/-_", max_size=60),
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(text=benign)
def test_a_text_without_secrets_is_unchanged(text: str) -> None:
    # Given a log with no secret in it (all lower case runs, numbers, hex digests, paths, NCCL's lines)
    # When it is redacted
    # Then it is as it was
    assert redact(text) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=3000), limit=st.integers(min_value=0, max_value=4096))
def test_a_text_redacted_within_a_bound_is_never_longer_in_bytes(text: str, limit: int) -> None:
    # Given any text and a bound; When it is redacted within it; Then its UTF-8 fits the bound
    assert len(redact_within(text, limit, "end").encode()) <= limit
    assert len(redact_within(text, limit, "start").encode()) <= limit


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key=[REDACTED:aws-secret-key]"),
        ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key-id]"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "Authorization: [REDACTED:authorization]"),
        ("https://bob:hunter2@db.example.com/x", "https://[REDACTED:url-credentials]@db.example.com/x"),
        ('{"password": "s3cr3t!!"}', '{"password": "[REDACTED:password]"}'),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[REDACTED:private-key]"),
    ],
)
def test_the_marker_says_what_was_removed(text: str, marker: str) -> None:
    assert redact(text) == marker


def test_a_private_key_cut_before_its_end_goes_to_the_end_of_the_text() -> None:
    # Given a log tail cut inside a key block (its BEGIN kept, its END not)
    text = "loading key\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
    # When it is redacted; Then the block goes to the end
    assert redact(text) == "loading key\n[REDACTED:private-key]"


def test_a_private_key_whose_start_was_cut_goes_from_the_start_of_the_text() -> None:
    text = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\nstep 2050"
    assert redact(text) == "[REDACTED:private-key]\nstep 2050"


def test_a_hex_digest_of_forty_characters_is_not_taken_for_a_secret_key() -> None:
    assert redact("sha1 3F786850E387550FDAB836ED7E6DC881DE23001B") == "sha1 3F786850E387550FDAB836ED7E6DC881DE23001B"


def test_cut_bytes_never_splits_a_character() -> None:
    assert cut_bytes("é" * 10, 5, "start") == "éé"
    assert cut_bytes("é" * 40, len(CUT_MARKER) + 5, "end") == CUT_MARKER + "éé"


# --- the evidence as a whole --------------------------------------------------------------------------
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_the_evidence_of_an_agent_older_than_redaction_is_redacted_and_its_cut_line_dropped() -> None:
    # Given an answer whose stack text was cut inside a secret (its tail kept, no longer its shape)
    cut = LEGACY_CUT + SECRET[12:] + "\nThread 4100 (idle)\n    all_reduce (c10d.py:2050)\n"
    said = HangEvidenceResult.model_construct(
        job_id="1001",
        job_text=f"JobId=1001 Command=train.py --key {SECRET}",
        nodes=[NodeStacks(node="ip-10-2-0-7", outcome="captured", text=cut)],
    )
    # When it is read (the state a function reads, the ledger's item)
    kept = HangEvidenceResult.model_validate_json(said.model_dump_json())
    # Then no piece of the secret is left in it
    dumped = kept.model_dump_json()
    assert SECRET[12:] not in dumped
    assert SECRET not in dumped
    assert "all_reduce" in kept.nodes[0].text


@settings(max_examples=30, deadline=None)
@given(char=st.sampled_from(['"', "\\", "\n", "é", "\U0001f600", "\x01", "a"]))
def test_the_whole_evidence_stays_within_its_bound_as_stored(char: str) -> None:
    # Given the largest evidence an answer may hold, of the characters that cost most stored (JSON)
    kept = HangEvidenceResult(
        job_id="1001",
        job_text=char * JOB_TEXT_LIMIT,
        nodes=[
            NodeStacks(node=f"ip-10-2-0-{i}", outcome="captured", text=char * STACKS_TEXT_LIMIT, signature="f" * 16)
            for i in range(MAX_EVIDENCE_NODES)
        ],
    )
    # When it is made (any answer is)
    # Then each text is within its bound in bytes, and the item as the ledger stores it within the incident's
    assert all(len(n.text.encode()) <= NODE_EVIDENCE_BYTES for n in kept.nodes)
    assert len(kept.job_text.encode()) <= JOB_TEXT_BYTES
    assert len(kept.model_dump_json().encode()) <= INCIDENT_EVIDENCE_BYTES


def test_evidence_without_secrets_is_kept_as_it_was_said() -> None:
    evidence = HangEvidenceResult(
        job_id="1001", job_text="JobId=1001 JobState=RUNNING", nodes=[NodeStacks(node="ip-10-2-0-7", outcome="captured", text="all_reduce")]
    )
    assert (evidence.job_text, evidence.nodes[0].text) == ("JobId=1001 JobState=RUNNING", "all_reduce")
