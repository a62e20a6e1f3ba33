"""Where a job's checkpoints are: an ``s3://`` prefix whose bucket name S3 could hold.

S3's naming rules for general purpose buckets
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3 to 63 characters;
lowercase letters, digits, periods and hyphens; a letter or digit first and last; no two adjacent
periods; not formatted as an IP address. A name that breaks one of them names no bucket, so a
command given it is refused before any request, naming the rule. The reserved prefixes and
suffixes (``xn--``, ``-s3alias``, ``--x-s3``, ...) are left alone: they keep names from being
*created*, and access point aliases and directory buckets, which a job may well read and write
through, carry exactly those suffixes.
"""

from __future__ import annotations

import re
import string

BUCKET_MIN_CHARS, BUCKET_MAX_CHARS = 3, 63
_BUCKET_CHARS = frozenset(string.ascii_lowercase + string.digits + ".-")
_IP_ADDRESS = re.compile(r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$")


def bucket_name_problem(bucket: str) -> str | None:
    """Which of S3's bucket naming rules ``bucket`` breaks, or None when it could name a bucket."""
    if not BUCKET_MIN_CHARS <= len(bucket) <= BUCKET_MAX_CHARS:
        return f"is {len(bucket)} characters: S3 bucket names are {BUCKET_MIN_CHARS} to {BUCKET_MAX_CHARS} characters long"
    others = sorted(set(bucket) - _BUCKET_CHARS)
    if others:
        shown = ", ".join(repr(c) for c in others[:5])
        return f"holds {shown}: S3 bucket names hold only lowercase letters, digits, '.' and '-'"
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        return "does not begin and end with a letter or digit, as S3 bucket names do"
    if ".." in bucket:
        return "holds two adjacent periods, which S3 bucket names never do"
    if _IP_ADDRESS.match(bucket):
        return "is formatted as an IP address, which S3 bucket names never are"
    return None


def check_bucket_of(uri: str) -> None:
    """Raise ValueError naming the rule when ``uri`` is an ``s3://`` URI whose bucket name S3 refuses.

    Anything that is not an ``s3://`` URI at all is left to the URI parser, which says so."""
    if not uri.startswith("s3://"):
        return
    bucket = uri.removeprefix("s3://").partition("/")[0]
    problem = bucket_name_problem(bucket)
    if problem:
        raise ValueError(f"{uri!r}: the bucket name {bucket!r} {problem}")
