"""Read-only S3 access for checkpoint discovery (domain/checkpoints.py holds the logic)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.adapters.aws import LazyClient, error_code, is_transient
from hyperpod_recovery.errors import CheckpointStoreUnavailable, CheckpointUnreadable


class S3CheckpointReader:
    s3 = LazyClient("s3")

    def __init__(self, s3: Any = None) -> None:
        self._s3 = s3

    def list_folders(self, bucket: str, prefix: str) -> list[str]:
        folders: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        while True:
            page = self._call(self.s3.list_objects_v2, **kwargs)
            folders += [p["Prefix"][len(prefix) :] for p in page.get("CommonPrefixes", [])]
            if not page.get("IsTruncated"):
                return folders
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def read(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        try:
            response = self.s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{max_bytes - 1}")
            return response["Body"].read()  # type: ignore[no-any-return]
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._translate(exc) from exc
        except BotoCoreError as exc:
            raise CheckpointStoreUnavailable(f"s3://{bucket}/{key}: {exc}") from exc

    def sizes(self, bucket: str, prefix: str) -> dict[str, int]:
        sizes: dict[str, int] = {}
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            page = self._call(self.s3.list_objects_v2, **kwargs)
            for item in page.get("Contents", []):
                sizes[item["Key"][len(prefix) :]] = item["Size"]
            if not page.get("IsTruncated"):
                return sizes
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def _call(self, method: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(**kwargs)  # type: ignore[no-any-return]
        except ClientError as exc:
            raise self._translate(exc) from exc
        except BotoCoreError as exc:
            raise CheckpointStoreUnavailable(f"s3 {kwargs.get('Bucket')}: {exc}") from exc

    @staticmethod
    def _translate(exc: ClientError) -> Exception:
        message = f"{error_code(exc)}: {exc}"
        return CheckpointStoreUnavailable(message) if is_transient(exc) else CheckpointUnreadable(message)
