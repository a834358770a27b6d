"""Labels carried between stores (pipeline/labels/exchange.py): real Stockfish labels of the first
games of a real FICS archive, exported from one store and imported into another that ingested the
same games. The round trip gives the same file bytes; a file that is not what an export wrote, or
whose labels the store cannot take, is refused whole, leaving the store's labels as they were."""

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline.datasets.datasets import SplitConfig, build_dataset
from pipeline.labels.exchange import EXPORT_KEY, ExchangeError, export_labels, import_labels
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun, Setting
from pipeline.labels.shards import count_pending, shard_lock
from pipeline.labels.uci import Limit
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games

GAMES = 6
SETTINGS = (Limit("depth", 1), Limit("static"))
DATASET = ("sabatelli_3class", {"label_value": 1, "min_elo": 1500})
SPLIT = SplitConfig(val_fraction=0.2, test_fraction=0.2)


def fresh_store(folder: Path, text: str) -> Store:
    """A store holding the games of `text` (as games.pgn, so its game ids are the source's) and no label."""
    folder.mkdir(parents=True, exist_ok=True)
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", text)
    return store


@pytest.fixture(scope="module")
def source(tmp_path_factory, fics_2022, stockfish):
    """(games text, labelled store, its export file): depth-1 and static labels of the first
    GAMES games of a real archive, and the dataset DATASET built from them."""
    tmp = tmp_path_factory.mktemp("labels_source")
    text = first_games(fics_2022, GAMES, tmp / "src.pgn")
    store = fresh_store(tmp, text)
    with EnginePool(stockfish, workers=2) as pool:
        for limit in SETTINGS:
            label_store(store, pool, LabelRun(limit=limit))
    build_dataset(store, *DATASET, split=SPLIT)
    export_labels(store, tmp / "labels.parquet")
    return text, store, tmp / "labels.parquet"


def labels_of(store: Store) -> pa.Table:
    with memory_connection(store) as con:
        return con.sql("SELECT * FROM labels ORDER BY ALL").to_arrow_table()


def label_parts(store: Store) -> list[Path]:
    return sorted((store.root / "labels").glob("*/part-*.parquet"))


def tampered(src: Path, dest: Path, change) -> Path:
    """The export `src` with its table changed by `change(table) -> table`, metadata kept."""
    table = pq.read_table(src)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), dest)
    return dest


def set_row(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def test_export_import_export_gives_the_same_bytes_and_the_store_the_same_labels(source, tmp_path):
    text, store, exported = source
    before = labels_of(store)
    settings = {r["engine"] for r in before.to_pylist()}
    assert settings == {"Stockfish 15.1"} and {r["limit_kind"] for r in before.to_pylist()} == {"depth", "static"}
    other = fresh_store(tmp_path / "b", text)
    stats = import_labels(other, exported)
    assert sum(stats.added.values()) == before.num_rows == stats.labels
    assert labels_of(other).equals(before)  # every column, labelled_at and run_id included
    export_labels(other, tmp_path / "again.parquet")
    assert (tmp_path / "again.parquet").read_bytes() == exported.read_bytes()
    meta = pq.read_schema(exported).metadata[EXPORT_KEY]
    assert b'"engine": "Stockfish 15.1"' in meta and b'"limit_kind": "static"' in meta


def test_importing_twice_adds_nothing_the_second_time(source, tmp_path):
    text, store, exported = source
    other = fresh_store(tmp_path / "b", text)
    import_labels(other, exported)
    parts = label_parts(other)
    again = import_labels(other, exported)
    assert sum(again.added.values()) == 0 and again.labels == labels_of(store).num_rows
    assert label_parts(other) == parts
    assert labels_of(other).equals(labels_of(store))


def test_imported_labels_are_not_labelled_again_and_make_the_same_dataset(source, tmp_path, stockfish):
    text, store, exported = source
    other = fresh_store(tmp_path / "b", text)
    import_labels(other, exported)
    with memory_connection(store) as con:
        static_failures = con.sql("SELECT count(*) FROM label_failures WHERE limit_kind = 'static'").fetchall()[0][0]
    with EnginePool(stockfish, workers=1) as pool:
        with memory_connection(other) as con:
            assert count_pending(con, Setting.of(pool, Limit("depth", 1)), LabelRun(limit=Limit("depth", 1))) == 0
            # Failures are not carried: the static setting's are the positions in check, tried again.
            static = Setting.of(pool, Limit("static"))
            assert count_pending(con, static, LabelRun(limit=Limit("static"))) == static_failures > 0
        run = label_store(other, pool, LabelRun(limit=Limit("depth", 1)))
    assert (run.labelled, run.failed, run.parts_written) == (0, 0, 0)

    stats = build_dataset(other, *DATASET, split=SPLIT)
    assert all(stats.rows.values()), stats.rows
    for split in ("train", "val", "test"):
        ours, theirs = (pq.read_table(s.root / "datasets" / DATASET[0] / f"{split}.parquet") for s in (other, store))
        assert ours.drop_columns(["materialised_at"]).equals(theirs.drop_columns(["materialised_at"])), split


def test_a_label_of_a_position_the_store_lacks_refuses_the_whole_file(source, tmp_path):
    text, store, exported = source
    fewer = first_games_of(text, GAMES // 2)
    other = fresh_store(tmp_path / "b", fewer)
    with pytest.raises(ExchangeError) as e:
        import_labels(other, exported)
    message = str(e.value)
    assert "a label of a position this store does not have" in message and "chess-pipeline ingest" in message
    assert "\n" not in message and "nothing was imported" in message
    assert label_parts(other) == []  # the labels of the games it has were not written either


def first_games_of(text: str, n: int) -> str:
    games = text.split("\n\n[Event ")
    return "\n\n[Event ".join(games[:n]) + "\n"


@pytest.mark.parametrize(
    "change, says",
    [
        (
            lambda t: set_row(t, "engine", 3, "Stockfish 16"),
            "Stockfish 16, depth 1): the file declares only Stockfish 15.1, depth 1; Stockfish 15.1, static",
        ),
        (
            lambda t: t.set_column(
                t.schema.get_field_index("limit_value"),
                "limit_value",
                pc.if_else(pc.equal(t.column("limit_kind"), "depth"), 2, t.column("limit_value")).cast(pa.int32()),
            ),
            "Stockfish 15.1, depth 2) and ",
        ),
        (lambda t: set_row(t, "limit_kind", 0, "time"), "not a label setting: limit kind must be one of"),
        (lambda t: t.slice(1), "it declares"),
        (lambda t: set_row(set_row(t, "cp", 5, 99999), "score", 5, 99999), "cp 99999 out of range (|cp| < 30000)"),
        (lambda t: set_row(t, "score", 5, t.column("score")[5].as_py() + 1), "is not what cp"),
        (lambda t: set_row(t, "best_move", 7, "a1a1"), "best move"),
        (lambda t: set_row(t, "fen", 9, t.column("fen")[10].as_py()), "its FEN is not its position's"),
        (lambda t: pa.concat_tables([t, t.slice(4, 1)]), "it declares"),
        (lambda t: t.drop_columns(["pv"]), "no column 'pv'"),
    ],
    ids=[
        "engine",
        "limit",
        "limit-kind",
        "row-removed",
        "cp-range",
        "score",
        "best-move",
        "fen",
        "row-repeated",
        "column-dropped",
    ],
)
def test_a_tampered_file_is_refused_in_one_line_and_nothing_is_written(source, tmp_path, change, says):
    text, _, exported = source
    bad = tampered(exported, tmp_path / "bad.parquet", change)
    other = fresh_store(tmp_path / "b", text)
    with pytest.raises(ExchangeError) as e:
        import_labels(other, bad)
    assert says in str(e.value) and "\n" not in str(e.value) and "nothing was imported" in str(e.value)
    assert label_parts(other) == []


@pytest.mark.parametrize(
    "content, says",
    [
        (lambda b: b[: len(b) // 2], "not a whole Parquet file"),
        (lambda b: b"position_key,cp\n1,20\n", "not a whole Parquet file"),
        (lambda b: b"", "not a whole Parquet file"),
    ],
    ids=["truncated", "csv", "empty"],
)
def test_a_file_that_is_not_a_whole_export_is_refused(source, tmp_path, content, says):
    text, _, exported = source
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(content(exported.read_bytes()))
    other = fresh_store(tmp_path / "b", text)
    with pytest.raises(ExchangeError, match=says):
        import_labels(other, bad)
    assert label_parts(other) == []


def test_a_parquet_file_without_the_export_metadata_is_refused(source, tmp_path):
    text, _, exported = source
    bad = tmp_path / "plain.parquet"
    pq.write_table(pq.read_table(exported).replace_schema_metadata(None), bad)
    with pytest.raises(ExchangeError, match="not a labels export"):
        import_labels(fresh_store(tmp_path / "b", text), bad)


def test_a_label_that_differs_from_the_stores_own_of_that_setting_is_refused(source, tmp_path):
    # A reproducible label is the same wherever it is made: one that differs from the store's
    # label of the same position and setting was made with another setting than it says.
    text, store, exported = source
    other = fresh_store(tmp_path / "b", text)
    import_labels(other, exported)
    before = label_parts(other)
    table = pq.read_table(exported)
    row = next(
        i
        for i, (k, cp) in enumerate(zip(table["limit_kind"].to_pylist(), table["cp"].to_pylist()))
        if k == "depth" and cp is not None
    )
    cp = table["cp"][row].as_py()
    shifted = tampered(
        exported, tmp_path / "shifted.parquet", lambda t: set_row(set_row(t, "cp", row, cp + 7), "score", row, cp + 7)
    )
    with pytest.raises(ExchangeError) as e:
        import_labels(other, shifted)
    assert f"cp {cp} in the store, {cp + 7} in the file" in str(e.value)
    assert label_parts(other) == before

    hashed = tampered(exported, tmp_path / "hash.parquet", lambda t: set_row(t, "hash_mb", row, 64))
    with pytest.raises(ExchangeError, match="other engine options than this store's labels") as e:
        import_labels(other, hashed)
    assert "hash 64 MB" in str(e.value)
    assert label_parts(other) == before


def test_a_shard_being_labelled_refuses_the_import(source, tmp_path):
    text, store, exported = source
    other = fresh_store(tmp_path / "b", text)
    setting = Setting("Stockfish 15.1", Limit("depth", 1))
    with shard_lock(other, setting, 3) as held:
        assert held
        with pytest.raises(ExchangeError, match="shard 03 of Stockfish 15.1, depth 1 is being labelled"):
            import_labels(other, exported)
    assert label_parts(other) == []
    import_labels(other, exported)  # once the run has finished
    assert labels_of(other).num_rows == labels_of(store).num_rows


def test_a_store_without_labels_has_nothing_to_export(source, tmp_path):
    text, _, _ = source
    with pytest.raises(ExchangeError, match="holds no labels: nothing to export"):
        export_labels(fresh_store(tmp_path / "b", text), tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_a_part_that_cannot_be_written_leaves_none_of_the_files_labels(source, tmp_path):
    # All or nothing across the settings of one file: the depth-1 part is written (under its
    # temporary name) before the static one fails, and is not renamed into place.
    text, store, exported = source
    other = fresh_store(tmp_path / "b", text)
    static = Setting("Stockfish 15.1", Limit("static"))
    blocker = other.root / "labels" / static.slug
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the static setting's folder goes\n")
    with pytest.raises(OSError):
        import_labels(other, exported)
    assert label_parts(other) == []
    assert sorted(p.name for p in (other.root / "labels").rglob("*") if p.is_file() and p.suffix != ".lock") == [
        "_schema.parquet",
        static.slug,
    ]
    blocker.unlink()
    import_labels(other, exported)
    assert labels_of(other).equals(labels_of(store))
