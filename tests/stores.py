"""Small real stores for tests: hand-written PGN ingested (and labelled) in a temp dir."""

from pathlib import Path

from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.store.store import Store


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


def depth1_dataset_store(folder: Path, source: Path, stockfish: str, games: int = 16) -> Store:
    """The first games of a real archive, every distinct position labelled at depth 1 (fast), and
    sabatelli_3class built from them (players over 1500; a fifth of the games each for val and test)."""
    from pipeline.datasets.datasets import SplitConfig, build_dataset
    from pipeline.labels.uci import Limit

    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", first_games(source, games, folder / "src.pgn"))
    with EnginePool(stockfish, workers=1) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 1)))
    split = SplitConfig(val_fraction=0.2, test_fraction=0.2)
    stats = build_dataset(store, "sabatelli_3class", {"label_value": 1, "min_elo": 1500}, split=split)
    assert all(stats.rows.values()), stats.rows
    return store


_LUBECK_CHECKPOINTS: dict[tuple[Path, Path], Path] = {}


def lubeck_checkpoint(tmp_path_factory, source: Path) -> Path:
    """The checkpoint of Lubeck's W/D/L network (preset `lubeck`, bitmap768 input, lubeck_wdl:
    game results, no labels) trained one epoch on the first 16 games of a real archive, in a
    store of its own under the session's temp folder.

    Trained once a test session (the lubeck_grid asset's tests and the explorer's use the same
    network), so nothing may write into its store or over the checkpoint: copy it first."""
    from pipeline.datasets.datasets import SplitConfig, build_dataset
    from training.train import TrainConfig, train

    key = (tmp_path_factory.getbasetemp(), Path(source))
    if key not in _LUBECK_CHECKPOINTS:
        tmp = tmp_path_factory.mktemp("lubeck_network")
        store = Store(tmp / "store").ensure()
        add_pgn(store, tmp, "games.pgn", first_games(source, 16, tmp / "src.pgn"))
        build_dataset(store, "lubeck_wdl", {}, split=SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2))
        config = TrainConfig(
            store=str(store.root),
            dataset="lubeck_wdl",
            model="lubeck",
            encoder="bitmap768",
            epochs=1,
            out=str(tmp / "run"),
        )
        _LUBECK_CHECKPOINTS[key] = Path(train(config).checkpoint)
    return _LUBECK_CHECKPOINTS[key]


def first_games(source: Path, n: int, dest: Path) -> str:
    """The first n games of a real archive as PGN text (written to dest too)."""
    from pipeline.ingest.archive import iter_raw_games

    texts = []
    for i, g in enumerate(iter_raw_games(source)):
        if i == n:
            break
        texts.append(g.text)
    text = "\n\n".join(texts) + "\n"
    dest.write_text(text)
    return text


def materialize_archive(instance, store: Store, key: str, **kw):
    """The ingest multi-asset of one archive partition, through Dagster, in instance."""
    import dagster as dg

    from assets.ingest import archive_tables
    from assets.partitions import archives_partitions
    from assets.resources import StoreResource

    instance.add_dynamic_partitions(archives_partitions.name, [key])
    return dg.materialize(
        [archive_tables],
        partition_key=key,
        instance=instance,
        resources={"store": StoreResource(root=str(store.root))},
        **kw,
    )
