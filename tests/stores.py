"""Small real stores for tests: hand-written PGN ingested (and labelled) in a temp dir."""

from pathlib import Path

from pipeline.engine import EnginePool
from pipeline.ingest import IngestConfig, ingest_archive
from pipeline.labels import LabelRun, label_store
from pipeline.store import Store


def add_pgn(store: Store, folder: Path, name: str, text: str) -> str:
    """Write text as an archive, add it to the store and ingest it; returns its key."""
    path = folder / name
    path.write_text(text)
    key = store.add_archive(path)
    ingest_archive(store, key, path, IngestConfig(workers=1))
    return key


def labelled_store(folder: Path, text: str, stockfish: str) -> Store:
    """A store holding one archive, every distinct position labelled at depth 8."""
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", text)
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun())
    return store
