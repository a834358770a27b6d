"""The DuckDB file: readers stay open while runs write Parquet and the views are rebuilt."""

import subprocess
import sys
from pathlib import Path

import chess
import pytest

from pipeline.ingest.encoding import fen_from_row
from pipeline.store.duck import connect, create_views, query
from pipeline.store.store import Store
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import add_pgn

ROOT = Path(__file__).resolve().parents[2]
READER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
for line in sys.stdin:
    print(con.sql("SELECT count(*) FROM games").fetchall()[0][0], flush=True)
"""


def test_open_readers_see_no_lock_errors_while_runs_write(tmp_path):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", RATED_GAMES)
    create_views(store)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store.duckdb_path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "4"
        # While that process holds the file: write a new partition, rebuild the views, read.
        add_pgn(store, tmp_path, "b.pgn", _games(3))  # other content: the same bytes again are one archive
        create_views(store)
        with connect(store) as con:
            assert con.sql("SELECT count(*) FROM games").fetchall()[0][0] == 7
        assert query(store, "SELECT count(*) AS n FROM positions").column("n")[0].as_py() > 0
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "7"  # the views are globs: new files show up
    finally:
        reader.stdin.close()
        reader.wait(timeout=30)
    assert reader.returncode == 0


def test_macros_agree_with_python(tmp_path):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", RATED_GAMES)
    with connect(store) as con:
        rows = con.sql(
            "SELECT planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number, "
            "fen(planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number), "
            "material(planes), game_phase(planes, fullmove_number) FROM positions"
        ).fetchall()
    assert len(rows) == 15 + 15 + 17 + 11  # g1 twice (14 plies), g2 (16), g3 (10): plies + 1 each
    for *cols, fen, material, phase in rows:
        assert fen == fen_from_row(*cols)
        board = chess.Board(fen)
        values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
        expected = sum(
            v * (len(board.pieces(t, chess.WHITE)) - len(board.pieces(t, chess.BLACK))) for t, v in values.items()
        )
        assert material == expected
        assert phase in ("opening", "middlegame", "endgame")


def _games(n: int) -> str:
    """n distinct one-move games."""
    moves = ["e4", "d4", "c4", "Nf3", "g3", "b3", "f4", "Nc3"]
    return "".join(f'[Event "g{i}"]\n[Result "*"]\n\n1. {moves[i]} *\n\n' for i in range(n))


def test_store_paths_with_glob_characters_read_only_their_own_store(tmp_path):
    """`store[2]` unescaped is a glob for `store2`, `store*` one for every store beside it."""
    counts = {"store1": 1, "store2": 2, "store[2]": 3, "store*": 4, "st?re2": 5}
    stores = {}
    for name, n in counts.items():
        stores[name] = Store(tmp_path / name).ensure()
        add_pgn(stores[name], tmp_path, f"{n}.pgn", _games(n))
    # In-memory sessions (runs, `chess-pipeline sql`) read each store alone, `?` included.
    for name, store in stores.items():
        assert query(store, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == counts[name], name
    # DuckDB cannot keep a database file under a path with `?` (it takes the rest for options):
    # refused in one line rather than failing inside DuckDB.
    with pytest.raises(ValueError, match="path with '\\?'"):
        create_views(stores.pop("st?re2"))
    for _name, store in stores.items():
        create_views(store)
    for name, store in stores.items():
        assert query(store, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == counts[name], name
        with connect(store) as con:  # the store's own DuckDB file, as `duckdb -readonly` opens it
            assert con.sql("SELECT count(*) FROM games").fetchall()[0][0] == counts[name], name
            assert con.sql("SELECT count(*) FROM positions").fetchall()[0][0] == 2 * counts[name], name


def test_a_copied_duckdb_file_refuses_to_read_the_original_store(tmp_path):
    import shutil

    import duckdb

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", _games(2))
    create_views(store)
    shutil.copytree(store.root, tmp_path / "snapshot", symlinks=True)
    add_pgn(store, tmp_path, "b.pgn", _games(3))  # the original changes after the copy
    with duckdb.connect(str(tmp_path / "snapshot" / "chess.duckdb"), read_only=True) as con:
        with pytest.raises(duckdb.Error, match="copied or moved"):
            con.sql("SELECT count(*) FROM games").fetchall()
        with pytest.raises(duckdb.Error, match="copied or moved"):
            con.sql("SELECT count(*) FROM labels").fetchall()  # no rows at all: still refused
    with duckdb.connect(str(store.duckdb_path), read_only=True) as con:  # the original reads itself
        assert con.sql("SELECT count(*) FROM games").fetchall()[0][0] == 5
    # connect() rebuilds the copy's file for the copy: its own 2 games.
    with connect(Store(tmp_path / "snapshot")) as con:
        assert con.sql("SELECT count(*) FROM games").fetchall()[0][0] == 2


def test_a_duckdb_file_built_from_older_views_is_rebuilt_before_it_is_read(tmp_path):
    """A store from an older version of the project keeps its chess.duckdb: the views the
    code reads now (a macro a query calls, say) must be there, so the file is built again."""
    import duckdb

    from pipeline.store.duck import read_only_connection, views_version

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", _games(2))
    create_views(store)
    with duckdb.connect(str(store.duckdb_path)) as con:  # as an older version left it
        con.execute("DROP MACRO TABLE shard_distinct_positions")
        con.execute("CREATE OR REPLACE MACRO chess_views_version() AS 'older'")
    con = read_only_connection(store)
    assert con.sql("SELECT chess_views_version()").fetchall()[0][0] == views_version()
    assert con.sql("SELECT count(*) FROM shard_distinct_positions([0, 1, 2, 3], 4)").fetchall()[0][0] > 0


def test_two_read_only_connections_in_one_process_both_answer(tmp_path):
    """DuckDB shares one database instance per file within a process, and the first read-only
    connection locks that instance's configuration: a second one opened while the first is open
    must still answer, with the progress bar off (it would print into `sql` output) and the
    configuration locked, and must keep answering after the first is closed."""
    import duckdb

    from pipeline.store.duck import read_only_connection

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", RATED_GAMES)
    create_views(store)
    first = read_only_connection(store)
    second = read_only_connection(store)
    for con in (first, second):
        assert con.sql("SELECT count(*) FROM games").fetchall() == [(4,)]
        assert con.sql("SELECT current_setting('enable_progress_bar')").fetchall() == [(False,)]
        with pytest.raises(duckdb.Error, match="configuration has been locked"):
            con.execute("SET threads = 1")
    first.close()
    assert second.sql("SELECT count(*) FROM games").fetchall() == [(4,)]
    with read_only_connection(store) as third:  # opened after the first was closed
        assert third.sql("SELECT count(*) FROM positions").fetchall()[0][0] > 0
    second.close()
    assert query(store, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == 4


EXTENSION_QUERY = """
import sys
from pathlib import Path
from pipeline.store import duck
from pipeline.store.store import Store

store = Store(Path(sys.argv[1])).ensure()
for con in (duck.read_only_connection(store), duck.memory_connection(store), duck.connect(store)):
    try:
        con.sql("SELECT * FROM iceberg_scan('x')").fetchall()
    except Exception as e:
        print(type(e).__name__, str(e).splitlines()[0])
"""


def test_no_store_connection_downloads_an_extension(tmp_path):
    # DuckDB installs and loads a known extension a query names (iceberg_scan) by itself: a
    # download attempt writing under ~/.duckdb. The store's connections turn that off, so the
    # query fails on the missing function and nothing is written outside the store.
    out = subprocess.run(
        [sys.executable, "-c", EXTENSION_QUERY, str(tmp_path / "store")],
        cwd=ROOT,
        env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("CatalogException") and "iceberg_scan" in line for line in lines), (
        lines
    )
    assert not (tmp_path / "home" / ".duckdb").exists()
