"""S3 for checkpoints: the reads discovery makes (one SDK call per method, so request counts are
honest) and the conditional writes the checkpoint writer makes. The logic lives in
domain/checkpoints/discovery.py (discovery) and hyperpod_recovery.checkpointing.commit (commit)."""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import CheckpointStoreUnavailable, CheckpointUnreadable, CheckpointWriteConflict
from hyperpod_recovery.ports import LIST_PAGE_MAX, Listing

_MISSING = ("NoSuchKey", "404", "NotFound")
# 412: the If-Match/If-None-Match condition failed; 409: a concurrent conditional write won.
_CONFLICT = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")
_EMPTY_OBJECT: dict[str, Any] = {}  # sentinel: a ranged GET of a zero-byte object


class S3CheckpointStore:
    s3 = LazyClient("s3")

    def __init__(self, s3: Any = None) -> None:
        self._s3 = s3

    # --- reads (ports.CheckpointReader) -------------------------------------------------------
    def get(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        found = self.get_with_etag(bucket, key, max_bytes)
        return None if found is None else found[0]

    def get_with_etag(self, bucket: str, key: str, max_bytes: int) -> tuple[bytes, str] | None:
        where = f"s3://{bucket}/{key}"
        response = self._call(where, self.s3.get_object, Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes - 1}", _empty_ok=True)
        if response is _EMPTY_OBJECT:  # S3 answers 416 InvalidRange to any range of an empty object
            response = self._call(where, self.s3.get_object, Bucket=bucket, Key=key)
        return None if response is None else (response["Body"].read(), response["ETag"])

    def size(self, bucket: str, key: str) -> int | None:
        response = self._call(f"s3://{bucket}/{key}", self.s3.head_object, Bucket=bucket, Key=key)
        return None if response is None else int(response["ContentLength"])

    def list(
        self,
        bucket: str,
        prefix: str,
        *,
        delimiter: str | None = None,
        start_after: str | None = None,
        token: str | None = None,
        max_keys: int = LIST_PAGE_MAX,
    ) -> Listing:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if delimiter:
            kwargs["Delimiter"] = delimiter
        if token:
            kwargs["ContinuationToken"] = token
        elif start_after:
            kwargs["StartAfter"] = start_after
        page = self._call(f"s3://{bucket}/{prefix}", self.s3.list_objects_v2, **kwargs) or {}
        return Listing(
            objects=[(item["Key"], int(item["Size"])) for item in page.get("Contents", [])],
            folders=[p["Prefix"] for p in page.get("CommonPrefixes", [])],
            truncated=bool(page.get("IsTruncated")),
            next_token=page.get("NextContinuationToken"),
        )

    # --- writes (ports.CheckpointWriter) ------------------------------------------------------
    def put(self, bucket: str, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> None:
        """PutObject; ``if_match`` = compare-and-swap on the ETag, ``if_none_match`` = create only."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": body, "ContentType": "application/json"}
        if if_match:
            kwargs["IfMatch"] = if_match
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        try:
            self.s3.put_object(**kwargs)
        except ClientError as exc:
            code = error_code(exc)
            if code in _CONFLICT or (if_match and code in _MISSING):  # If-Match on a key deleted meanwhile
                raise CheckpointWriteConflict(f"s3://{bucket}/{key}: {code}") from exc
            raise self._translate(exc, f"s3://{bucket}/{key}") from exc
        except BotoCoreError as exc:
            raise CheckpointStoreUnavailable(f"s3://{bucket}/{key}: {exc}") from exc

    def sha256(self, bucket: str, key: str) -> str | None:
        """``sha256:<hex>`` of the whole object, streamed; None when it does not exist."""
        where = f"s3://{bucket}/{key}"
        response = self._call(where, self.s3.get_object, Bucket=bucket, Key=key)
        if response is None:
            return None
        digest = hashlib.sha256()
        try:
            for chunk in iter(lambda: response["Body"].read(8 * 1024 * 1024), b""):
                digest.update(chunk)
        except BotoCoreError as exc:
            raise CheckpointStoreUnavailable(f"{where}: {exc}") from exc
        return f"sha256:{digest.hexdigest()}"

    def _call(self, where: str, method: Any, _empty_ok: bool = False, **kwargs: Any) -> dict[str, Any] | None:
        """One SDK call; None when the key does not exist, errors.py classes for everything else."""
        try:
            return method(**kwargs)  # type: ignore[no-any-return]
        except ClientError as exc:
            if error_code(exc) in _MISSING:
                return None
            if _empty_ok and error_code(exc) == "InvalidRange":
                return _EMPTY_OBJECT
            raise self._translate(exc, where) from exc
        except BotoCoreError as exc:
            raise CheckpointStoreUnavailable(f"{where}: {exc}") from exc

    @staticmethod
    def _translate(exc: ClientError, where: str) -> Exception:
        message = f"{where}: {error_code(exc)}: {exc}"
        return CheckpointStoreUnavailable(message) if is_transient(exc) else CheckpointUnreadable(message)
