"""Streaming batches from dataset Parquet files with bounded memory.

Row groups are read one at a time (in a seeded random order per epoch), their rows go into a
shuffle buffer of at most `shuffle_buffer` rows, and batches are drawn from the buffer at
random. Only the packed columns travel (96 bytes of planes, a few flags, the target); the
encoder unpacks bits on the training device. The same seed and epoch always give the same
batches, which is what makes a resumed run equal an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from training.encoders import Batch

COLUMNS = ("planes", "side_to_move", "castling", "target")


@dataclass(frozen=True)
class LoaderConfig:
    batch_size: int = 1024
    """Positions per batch."""
    shuffle_buffer: int = 262_144
    """Rows held for shuffling; memory is about 110 bytes a row, whatever the file size."""
    shuffle: bool = True
    """False reads rows in file order (evaluation)."""
    drop_last: bool = False
    """Drop the last, smaller batch of an epoch."""


class ParquetBatches:
    """Batches of one split file; iterate with epoch(n)."""

    def __init__(
        self, path: Path, config: LoaderConfig = LoaderConfig(), seed: int = 0, limit: int = 0, target: str = "target"
    ):
        """`target`: the column delivered as the batches' target (another than `target`: rows
        where it is null are left out, e.g. the positions of unfinished games for a result)."""
        self.path = Path(path)
        self.config = config
        self.seed = seed
        self.limit = limit
        meta = pq.read_metadata(self.path)
        self.row_groups = meta.num_row_groups
        self.rows = min(meta.num_rows, limit) if limit else meta.num_rows
        self.max_buffered = 0
        """Most rows held at once during the last epoch (memory is bounded by this)."""
        names = set(pq.read_schema(self.path).names)
        if target not in names:
            raise ValueError(f"{self.path} has no column {target!r} to learn; its columns: {', '.join(sorted(names))}")
        self.target = target
        self.columns = [c if c != "target" else target for c in COLUMNS] + (["mirrored"] if "mirrored" in names else [])

    def __len__(self) -> int:
        """Batches per epoch."""
        b = self.config.batch_size
        return self.rows // b if self.config.drop_last else -(-self.rows // b)

    def _groups(self, rng: np.random.Generator) -> Iterator[dict]:
        order = rng.permutation(self.row_groups) if self.config.shuffle else np.arange(self.row_groups)
        left = self.rows
        with pq.ParquetFile(self.path) as f:
            for g in order:
                if left <= 0:
                    return
                t = f.read_row_group(int(g), columns=self.columns)
                if self.target != "target":
                    t = t.filter(pc.is_valid(t.column(self.target))).rename_columns(
                        ["target" if c == self.target else c for c in t.column_names]
                    )
                if t.num_rows > left:
                    t = t.slice(0, left)
                left -= t.num_rows
                yield _columns(t)

    def epoch(self, n: int = 0) -> Iterator[Batch]:
        """The batches of epoch n (deterministic for the loader's seed and n).

        Shuffling: row groups come in a random order; once the buffer holds
        `shuffle_buffer` rows it is permuted and all but half of it goes out as batches,
        the kept half mixing with the next row groups."""
        rng = np.random.default_rng([self.seed, n])
        b = self.config.batch_size
        cap = self.config.shuffle_buffer
        buf: dict | None = None
        for cols in self._groups(rng):
            buf = cols if buf is None else {k: np.concatenate([buf[k], cols[k]]) for k in buf}
            size = len(buf["target"])
            self.max_buffered = max(self.max_buffered, size)
            if not self.config.shuffle:
                cut = size - size % b
            elif size >= cap:
                perm = rng.permutation(size)
                buf = {k: v[perm] for k, v in buf.items()}
                cut = (size - cap // 2) // b * b
            else:
                continue
            yield from self._slices(buf, 0, cut, b)
            buf = {k: v[cut:] for k, v in buf.items()}
        if buf is not None and len(buf["target"]):
            size = len(buf["target"])
            if self.config.shuffle:
                perm = rng.permutation(size)
                buf = {k: v[perm] for k, v in buf.items()}
            end = size - size % b if self.config.drop_last else size
            yield from self._slices(buf, 0, end, b)

    @staticmethod
    def _slices(buf: dict, start: int, end: int, b: int) -> Iterator[Batch]:
        for i in range(start, end, b):
            yield _batch({k: v[i : min(i + b, end)] for k, v in buf.items()})


def _columns(t) -> dict:
    planes = t.column("planes").combine_chunks()
    if planes.type != pa.binary(96):
        planes = planes.cast(pa.binary(96))
    raw = np.frombuffer(planes.buffers()[1], dtype=np.uint8)[planes.offset * 96 : (planes.offset + len(planes)) * 96]
    out = {
        "planes": raw.reshape(-1, 96).copy(),
        "white_to_move": (t.column("side_to_move").to_numpy(zero_copy_only=False) == "w"),
        "castling": t.column("castling").to_numpy().astype(np.uint8),
        "target": t.column("target").to_numpy().astype(np.float32),
    }
    out["mirrored"] = (
        t.column("mirrored").to_numpy(zero_copy_only=False).astype(bool)
        if "mirrored" in t.column_names
        else np.zeros(t.num_rows, dtype=bool)
    )
    return out


def _batch(cols: dict) -> Batch:
    return Batch(
        torch.from_numpy(cols["planes"]),
        torch.from_numpy(cols["white_to_move"]),
        torch.from_numpy(cols["castling"]),
        torch.from_numpy(cols["mirrored"]),
        torch.from_numpy(cols["target"]),
    )
