"""The path type of an S3 store: `ObjectPath` (bucket and key), and `StorePath`, a local `Path` or one.

Store code joins and names paths the same way on both backends (`store.root / "games"`); the
functions of pipeline/store/storage.py read and write either kind.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True, order=True)
class ObjectPath:
    """A key (or key prefix) in an S3 bucket: `store.root / "games"` works as for a Path.

    It has no __fspath__: code that would open it as a local file fails at once (TypeError)
    instead of writing a local folder named "s3:"."""

    bucket: str
    key: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", "/".join(p for p in self.key.split("/") if p))

    def __truediv__(self, part: str | os.PathLike) -> ObjectPath:
        part = str(part)
        return ObjectPath(self.bucket, f"{self.key}/{part}" if self.key else part)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    @property
    def path(self) -> str:
        """bucket/key, as s3fs and pyarrow name objects."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if self.key else ""

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.bucket, self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        out, p = [], self
        while p.key:
            p = p.parent
            out.append(p)
        return out

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        if other.bucket != self.bucket or not (other.key == "" or self.key.startswith(other.key + "/")):
            raise ValueError(f"{self} is not under {other}")
        return PurePosixPath(self.key[len(other.key) :].lstrip("/"))

    def as_posix(self) -> str:
        return str(self)


StorePath = Path | ObjectPath
