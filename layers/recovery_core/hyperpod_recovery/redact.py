"""Secrets out of the evidence before it is kept or sent.

A hung job's last log lines, its stack dumps, its Kubernetes events and HyperPod's hang events are
written by the job, and a training script may print a key it was given. Each well-known secret shape
is replaced by a marker naming what was removed (``[REDACTED:aws-secret-key]``), never a prefix of it.

Redaction is by shape, so it is best-effort (docs/security.md): a secret with no known shape and no
telling key name (``password=``...) is not found. Two trade-offs are chosen, not forced:
- an AWS secret access key printed alone (no ``aws_secret_access_key=`` before it) is any run of
  exactly 40 base64 characters with both an upper- and a lower-case letter: a hex digest (a git commit,
  a SHA-1) is never taken, a 40-character CamelCase word or a path of only letters, digits and ``/``
  is (its loss is a few characters of evidence; a key's is a credential);
- a ``token=`` / ``token:`` pair is a secret, ``tokens=`` is not (``max_tokens: 2048`` stays).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

MARKER = "[REDACTED:{}]"
# A redacted text's cut end; an agent older than redaction marked its own cuts LEGACY_CUT (agent stacks.py).
CUT_MARKER = "[...earlier lines cut...]\n"
LEGACY_CUT = "[...cut...]\n"
_NOT_A_MARKER = r"(?!\[REDACTED:)"

# PEM private keys, whole (BEGIN ... END, or BEGIN to the end of a text that was cut there).
_PEM = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)")
# An END with no BEGIN left before it: the text was cut inside the block; all before it goes.
_PEM_TAIL = re.compile(r"\A[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
# scheme://user:password@host: the user and password go, the scheme and host stay.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,31}://)" + _NOT_A_MARKER + r"[^\s/@:\"'<>]+:[^\s/@\"'<>]*@")
# An Authorization header (HTTP, or as a key of a JSON or YAML document): its whole value.
_AUTHORIZATION = re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)" + _NOT_A_MARKER + r"[^\s\"'][^\r\n\"']*")
_BEARER = re.compile(r"(?i)\b(bearer\s+)" + _NOT_A_MARKER + r"[A-Za-z0-9\-._~+/]{16,}=*")
# Keys whose value is an AWS credential, in the spellings of the CLI's config, its environment and the SDKs' JSON.
_AWS_SECRET_PAIR = re.compile(
    r"(?i)((?:aws_?)?secret_?access_?key|aws_?secret_?key)([\"']?\s*[:=]\s*[\"']?)" + _NOT_A_MARKER + r"[A-Za-z0-9/+=]{16,}"
)
_AWS_SESSION_PAIR = re.compile(
    r"(?i)((?:aws_?)?session_?token|x-amz-security-token|security_?token)([\"']?\s*[:=]\s*[\"']?)" + _NOT_A_MARKER + r"[A-Za-z0-9/+=%]{16,}"
)
# A key whose name ends in one of these words (``db_password``, ``HF_TOKEN``, ``client_secret``,
# ``WANDB_API_KEY``): its value, quoted (JSON) or not: unquoted, up to a space or a quote (a secret may
# hold any of ``,;&}``, so what follows them on the same word goes too).
_PAIR = re.compile(
    r"(?i)(password|passwd|token|secret|api[_-]?key|apikey|private[_-]?key|access[_-]?key)([\"']?\s*[:=]\s*)" + _NOT_A_MARKER +
    r"(\"(?:[^\"\\\r\n]|\\.){1,1024}\"|'[^'\r\n]{1,1024}'|[^\s\"']{1,1024})"
)  # fmt: skip
_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])")
# An STS session token alone: its documented shape is opaque, but every one starts with one of these
# (base64 of its version header); the rest of the base64 run goes with it.
_AWS_SESSION_TOKEN = re.compile(r"(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz)[A-Za-z0-9/+=]{16,}")
_GITHUB = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})")
_SLACK = re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")
_API_KEY = re.compile(r"\b(?:sk|rk)[-_](?:live_|test_|proj-|ant-)?[A-Za-z0-9_-]{20,}")
_HUGGING_FACE = re.compile(r"\bhf_[A-Za-z0-9]{30,}")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_AWS_SECRET_ALONE = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _marker(name: str) -> str:
    return MARKER.format(name)


def _keep_key(name: str) -> Callable[[re.Match[str]], str]:
    return lambda m: "".join(g or "" for g in m.groups()[:2]) + _marker(name)


def _quoted_like(value: str, marker: str) -> str:
    """The marker in the quotes the value had (a JSON document stays one)."""
    return f"{value[0]}{marker}{value[0]}" if value[0] in "\"'" else marker


def _mixed_case(m: re.Match[str]) -> str:
    run = m.group(0)
    return _marker("aws-secret-key") if any(c.isupper() for c in run) and any(c.islower() for c in run) else run


# In this order: a block or a pair first (its key names what it is), then the shapes alone.
_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_PEM, _marker("private-key")),
    (_PEM_TAIL, _marker("private-key")),
    (_URL_CREDENTIALS, lambda m: f"{m.group(1)}{_marker('url-credentials')}@"),
    (_AUTHORIZATION, lambda m: m.group(1) + _marker("authorization")),
    (_BEARER, lambda m: m.group(1) + _marker("bearer-token")),
    (_AWS_SECRET_PAIR, _keep_key("aws-secret-key")),
    (_AWS_SESSION_PAIR, _keep_key("aws-session-token")),
    (_PAIR, lambda m: m.group(1) + m.group(2) + _quoted_like(m.group(3), _marker(m.group(1).lower().replace("_", "-")))),
    (_AWS_KEY_ID, _marker("aws-access-key-id")),
    (_AWS_SESSION_TOKEN, _marker("aws-session-token")),
    (_GITHUB, _marker("github-token")),
    (_SLACK, _marker("slack-token")),
    (_HUGGING_FACE, _marker("hf-token")),
    (_API_KEY, _marker("api-key")),
    (_JWT, _marker("jwt")),
    (_AWS_SECRET_ALONE, _mixed_case),
)


def redact(text: str) -> str:
    """``text`` with every well-known secret shape replaced by a marker naming it. Idempotent; a
    text without one is returned unchanged."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def cut_bytes(text: str, limit: int, keep: Literal["start", "end"]) -> str:
    """The start or the end of ``text`` within ``limit`` bytes of UTF-8 (as it is stored), never
    splitting a character; a cut end is marked."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    if keep == "start":
        return raw[:limit].decode(errors="ignore")
    marker = CUT_MARKER.encode()
    if limit <= len(marker):
        return raw[len(raw) - limit :].decode(errors="ignore")
    return CUT_MARKER + raw[len(raw) - (limit - len(marker)) :].decode(errors="ignore")


def redact_within(text: str, limit: int, keep: Literal["start", "end"]) -> str:
    """``text`` redacted, THEN cut to ``limit`` bytes: a cut made first could leave a secret's tail
    that no longer has its shape."""
    return cut_bytes(redact(text), limit, keep)


def after_cut(text: str) -> str:
    """A text whose start an agent older than redaction cut (its marker: LEGACY_CUT) begins mid-line:
    that partial line may hold a secret's tail, which has no shape left to be found, so it goes."""
    if not text.startswith(LEGACY_CUT):
        return text
    rest = text[len(LEGACY_CUT) :]
    return CUT_MARKER + (rest.split("\n", 1)[1] if "\n" in rest else "")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """Control characters (but newline and tab) as spaces: each would take six bytes stored (JSON's \\u00XX)."""
    return _CONTROL.sub(" ", text)
