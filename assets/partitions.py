"""Partitions of the asset graph, and how a launcher splits a partition range into runs.

- archives: one dynamic partition per archive file (keys from pipeline.store.store_archives.partition_key).
- shards: one static partition per position-key shard of the labels (pipeline.labels.setting.SHARDS,
  "00".."15"); a labels partition is one step that labels one shard. Why 16: a partition is one
  shard lock and one pending-positions query, so an embedded run over all partitions makes one
  query per partition (3.6 s for 16, 9.6 s for 64 on a 169k-position store here), and a step
  takes every core of its machine (one engine per core), so 16 partitions keep 16 machines busy
  at once (256 to 1,024 cores of 16- to 64-core machines). Raising SHARDS raises both.
"""

from collections.abc import Sequence

import dagster as dg

from pipeline.labels.setting import SHARDS

# One partition per archive file; keys come from pipeline.store.store_archives.partition_key.
archives_partitions = dg.DynamicPartitionsDefinition(name="archives")
"""New archives dropped into the archives folder become partitions and runs."""


def shard_key(shard: int) -> str:
    """The labels partition of one shard: 0 -> "00"."""
    return f"{shard:02d}"


SHARD_KEYS: tuple[str, ...] = tuple(shard_key(s) for s in range(SHARDS))
shard_partitions = dg.StaticPartitionsDefinition(list(SHARD_KEYS))
"""The labels asset's partitions: one per position-key shard."""

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
"""Dagster's run tags for a run over a range of partitions (a single-run backfill's)."""


def shards_of(keys: Sequence[str]) -> tuple[int, ...]:
    """The shards of labels partition keys ("03" -> 3), in key order; an unknown key is an error
    naming the valid ones."""
    bad = [k for k in keys if k not in SHARD_KEYS]
    if bad:
        raise ValueError(f"labels partitions are {SHARD_KEYS[0]}..{SHARD_KEYS[-1]}, got {', '.join(bad)}")
    return tuple(int(k) for k in keys)


def range_tags(keys: Sequence[str]) -> dict[str, str]:
    """Run tags for one run over the partitions from keys[0] to keys[-1] (in partition order)."""
    return {RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]}


ALL_SHARDS_TAGS = range_tags(SHARD_KEYS)
"""Run tags for one run over every labels partition (what `chess-pipeline label` starts)."""


def partition_runs(policy: dg.BackfillPolicy | None, keys: Sequence[str] = SHARD_KEYS) -> list[list[str]]:
    """`keys` (consecutive, in partition order) split into runs as a backfill with this policy
    splits them: all in one run (single_run, or no policy), else runs of at most
    max_partitions_per_run partitions."""
    per_run = policy.max_partitions_per_run if policy is not None else None
    if not per_run:
        return [list(keys)]
    return [list(keys[i : i + per_run]) for i in range(0, len(keys), per_run)]


def partition_request_args(keys: Sequence[str]) -> dict:
    """RunRequest arguments for a run over `keys`: the partition key for one, range tags for more."""
    return {"partition_key": keys[0]} if len(keys) == 1 else {"tags": range_tags(keys)}
