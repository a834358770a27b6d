"""Stores for the explorer's tests: real archives from ../shared/data ingested into a temp store."""

from pathlib import Path

import pytest

from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store import duck
from pipeline.store.store import Store

ARCHIVES = ("ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst", "lichess_ju-key_2017-01-07.pgn")
"""A FICS month (games over 2000) and a lichess player's games: rated and unrated, several sources."""


@pytest.fixture(scope="session")
def explorer_store(tmp_path_factory, shared_data) -> Store:
    """Two real archives ingested, the DuckDB views built (as `ingest` leaves a store)."""
    store = Store(tmp_path_factory.mktemp("explorer") / "store").ensure()
    for name in ARCHIVES:
        path = Path(shared_data) / "pgn" / name
        ingest_archive(store, store.add_archive(path), path, IngestConfig(workers=1))
    duck.create_views(store)
    return store
