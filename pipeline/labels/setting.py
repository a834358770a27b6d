"""What a label setting is and where its labels live: Setting (engine name + version, limit,
hash mode), a labelling run's choices (LabelRun), the SHARDS shards of the store by position_key
(the labels asset's partitions) and a setting's folders under the store root.

A distinct position is (position_key, planes, side_to_move, castling, ep_square): the Zobrist key
plus the full position it stands for, so a key collision can never share a label. Clocks are not
part of it: each distinct position is searched once, from a FEN with halfmove clock 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.store.store import Store

SHARDS = 16
SHARD_LEASE_TTL_S = 120.0
"""An S3 store's shard lease time by default (LabelRun.shard_lease_ttl_s): renewed every third
of this while held; a killed holder's shard is free again this long after its last renewal."""
SHARD_LEASE_MIN_TTL_S = 10.0
"""The shortest shard lease time a run may choose: its renewal (a PUT every third of it) must
reach the object store well within it, even on a loaded machine."""
Order = Literal["first_seen", "oldest", "most_used"]
ORDERS: tuple[str, ...] = get_args(Order)


@dataclass(frozen=True)
class Setting:
    """What produced a label: the engine's `id name`, the search limit, and whether the
    engine's hash was cleared before each position (column `hash_cleared`).

    hash_cleared (the default) gives reproducible labels: the same FEN, engine and limit
    give the same label whatever the order or the number of engines. The hash-kept mode
    (hash_cleared=False, EnginePool(clear_hash=False)) is faster, but a label depends on
    what its engine searched before; it is a setting of its own (slug suffix `_hash-kept`,
    its own folders, locks and pending positions) and never counts as the other's label.
    Static evaluations do not use the hash: they are always the reproducible setting."""

    engine: str
    limit: Limit
    hash_cleared: bool = True

    def __post_init__(self):
        if self.limit.kind == "static":
            object.__setattr__(self, "hash_cleared", True)

    @classmethod
    def of(cls, pool: EnginePool, limit: Limit) -> Setting:
        """The setting a pool's labels under `limit` belong to."""
        return cls(pool.name, limit, pool.clear_hash)

    @property
    def slug(self) -> str:
        name = re.sub(r"[^a-z0-9.]+", "-", self.engine.lower()).strip("-") or "engine"
        return f"{name}_{self.limit.slug}" + ("" if self.hash_cleared else "_hash-kept")

    def params(self) -> dict:
        """The setting as the bound parameters of sql/queries/*label*.sql. A row matches the
        mode when its hash_cleared equals it, or is NULL (failures recorded before the
        column existed), or the limit is static."""
        return {
            "engine": self.engine,
            "limit_kind": self.limit.kind,
            "limit_value": self.limit.value,
            "hash_cleared": self.hash_cleared,
        }

    def __str__(self) -> str:
        return f"{self.engine}, {self.limit}" + ("" if self.hash_cleared else ", hash kept")


@dataclass(frozen=True)
class LabelRun:
    """One labelling run's choices (engine settings live on the pool)."""

    limit: Limit = Limit()
    relabel: bool = False
    """False: label positions with no label for this setting. True: re-label positions
    whose labels all fall short of it (shallower, or by another engine version)."""
    order: Order = "first_seen"
    """Re-labelling order: oldest (newest label oldest first) or most_used."""
    max_positions: int = 0
    """Stop handing out positions after this many (0: no bound)."""
    max_seconds: float = 0.0
    """Stop handing out positions after this long (0: no bound)."""
    retry_failed: bool = False
    """Try positions again that earlier runs recorded as failed for this setting."""
    shards: tuple[int, ...] = tuple(range(SHARDS))
    archives: tuple[str, ...] = ()
    """Only positions that occur in these archive partitions (by key); empty: the whole store."""
    flush_positions: int = 5000
    flush_seconds: float = 60.0
    run_id: str = ""
    shard_lease_ttl_s: float = SHARD_LEASE_TTL_S
    """S3 store only: seconds a shard's lease lasts without renewal (renewed every third of it
    while held); a killed run's shards are free again this long after its last renewal. At
    least 10 (SHARD_LEASE_MIN_TTL_S)."""

    def __post_init__(self):
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        ttl = self.shard_lease_ttl_s
        if not (isinstance(ttl, int | float) and math.isfinite(ttl) and ttl >= SHARD_LEASE_MIN_TTL_S):
            raise ValueError(
                f"shard_lease_ttl_s must be a number of seconds, at least {SHARD_LEASE_MIN_TTL_S:g} "
                f"(default {SHARD_LEASE_TTL_S:g}), got {ttl!r}"
            )
        bad = [s for s in self.shards if not 0 <= s < SHARDS]
        if bad:
            raise ValueError(f"shards must be in 0..{SHARDS - 1}, got {bad}")


def labels_dir(store: Store, setting: Setting) -> Path:
    return store.root / "labels" / setting.slug


def failures_dir(store: Store, setting: Setting) -> Path:
    return store.root / "label_failures" / setting.slug
