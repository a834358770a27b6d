"""The key-sorted index of each archive's positions (position_index/archive=<key>/data.parquet).

positions are kept in game order (their planes compress to 3.6 bytes a position that way; sorted
by key they take 16.7), so a `position_key = ...` filter over them reads every row group of every
file. The index holds each position's key and its row in its archive's positions file, sorted by
key in row groups of INDEX_ROW_GROUP rows: a key lookup reads, per archive, the row groups whose
min/max key range holds the key, then only the positions row groups holding those rows
(`file_row_number`). Ingest writes it beside the positions file (same partition, same lock, the
same all-or-nothing commit), so adding an archive stays incremental; ensure_position_index builds
it for partitions written before it existed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.store import storage
from pipeline.store.schemas import POSITION_INDEX_SCHEMA
from pipeline.store.store import DATA_FILE, Store
from pipeline.store.store_files import AtomicParquetWriter

TABLE = "position_index"
_PARTITION = re.compile(r"archive=([^/]+)/" + re.escape(DATA_FILE) + "$")
INDEX_ROW_GROUP = 8192
"""Index rows per row group by default (IngestConfig.index_row_group): one lookup reads about
one such row group per archive (64 KiB of keys)."""
WRITE_OPTIONS = {
    "compression": "zstd",
    "compression_level": 1,
    "use_dictionary": False,
    # sorted keys: deltas take 5.7 bytes a key against 7.1 plain (shared data, 902,648 positions)
    "column_encoding": {"position_key": "DELTA_BINARY_PACKED"},
}


def index_table(keys: pa.Array | pa.ChunkedArray) -> pa.Table:
    """(position_key, row) of a positions file's key column, sorted by key (then row)."""
    rows = pa.array(range(len(keys)), pa.uint32())
    table = pa.Table.from_arrays(
        [pa.chunked_array(keys) if isinstance(keys, pa.Array) else keys, rows], schema=POSITION_INDEX_SCHEMA
    )
    return table.sort_by([("position_key", "ascending"), ("row", "ascending")])


def index_writer(store: Store, key: str) -> AtomicParquetWriter:
    return AtomicParquetWriter(store.partition_file(TABLE, key), POSITION_INDEX_SCHEMA, WRITE_OPTIONS)


def write_index(writer: AtomicParquetWriter, keys: pa.ChunkedArray, row_group: int = INDEX_ROW_GROUP) -> None:
    table = index_table(keys)
    for start in range(0, table.num_rows, row_group):
        writer.write(table.slice(start, row_group))


def _partition_keys(store: Store, table: str) -> set[str]:
    """Archive keys with a data file in `table`."""
    folder = store.root / table
    if store.remote:
        names = [str(o["Key"]) for o in storage.list_objects(folder)]
    else:
        names = [str(p) for p in Path(folder).glob(f"archive=*/{DATA_FILE}")]
    return {m.group(1) for m in map(_PARTITION.search, names) if m}


def missing_partitions(store: Store) -> list[str]:
    """Archive keys with a positions file and no index (written before the index existed)."""
    return sorted(_partition_keys(store, "positions") - _partition_keys(store, TABLE))


def ensure_position_index(store: Store, row_group: int = INDEX_ROW_GROUP) -> list[str]:
    """Build the index of every positions partition that lacks one (stores written before it);
    returns their keys. Each is read from the positions file's key column and written atomically
    under the partition's lock, so a concurrent ingest of the same archive is waited for."""
    built = []
    for key in missing_partitions(store):
        with store.partition_lock(key):
            positions = store.partition_file("positions", key)
            if storage.exists(store.partition_file(TABLE, key)) or not storage.exists(positions):
                continue
            fs, path = storage.read_filesystem(positions)
            keys = pq.read_table(path, columns=["position_key"], filesystem=fs).column("position_key")
            writer = index_writer(store, key)
            try:
                write_index(writer, keys, row_group)
                writer.close()
            except BaseException as e:
                writer.abort(e)
                raise
            writer.commit()
            built.append(key)
    return built
