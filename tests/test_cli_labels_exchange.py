"""`chess-pipeline labels export FILE` / `labels import FILE` as a user runs them: the round trip
through the command line, `label` finding nothing left to label afterwards, and every refusal
one line on stderr with a non-zero exit, never a traceback (pipeline/labels/exchange.py has the
checks themselves: tests/pipeline/test_labels_exchange.py)."""

import io
import subprocess
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli.app import main
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "chess-pipeline labels import: "


@pytest.fixture(scope="module")
def source(tmp_path_factory, fics_2022, stockfish):
    """(games text, the export file of a store holding depth-1 labels of the first 4 games of a real archive)."""
    tmp = tmp_path_factory.mktemp("labels_cli")
    text = first_games(fics_2022, 4, tmp / "src.pgn")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", text)
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 1)))
    assert cli("--home", str(store.root), "labels", "export", str(tmp / "labels.parquet"))[0] == 0
    return text, tmp / "labels.parquet"


def cli(*argv) -> tuple[int, str, str]:
    """main(argv) in this process as the console script ends it: (exit status, stdout, stderr);
    an exception main lets through is a traceback in stderr."""
    out, err = io.StringIO(), io.StringIO()
    code, tb = 0, ""
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as e:
            code = e.code
        except Exception as e:
            code, tb = 1, "".join(traceback.format_exception(e))
    text = err.getvalue() + tb
    if isinstance(code, str):
        code, text = 1, text + code + "\n"
    return code, out.getvalue(), text


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


def games_store(home: Path, text: str) -> Store:
    store = Store(home).ensure()
    add_pgn(store, home.parent, "games.pgn", text)
    return store


def test_export_import_export_round_trips_and_label_then_has_nothing_to_do(source, home, tmp_path):
    text, exported = source
    games_store(home, text)
    code, out, err = cli("labels", "import", str(exported), "--home", str(home))
    assert (code, err) == (0, ""), err
    labels = pq.read_metadata(exported).num_rows
    assert out.startswith(f"labels import: {labels:,} labels in {exported}, {labels:,} new to the store, 0 it had")
    code, out, _ = cli("--home", str(home), "labels", "import", str(exported))
    assert code == 0 and f", 0 new to the store, {labels:,} it had already" in out
    assert cli("--home", str(home), "labels", "export", str(tmp_path / "again.parquet"))[0] == 0
    assert (tmp_path / "again.parquet").read_bytes() == exported.read_bytes()

    code, out, err = cli("--home", str(home), "label", "--depth", "1", "--workers", "1")
    assert code == 0, err
    assert out.startswith("labels (Stockfish 15.1, depth 1, "), out
    assert ": 0 labelled, 0 failed" in out and "coverage 100.00%" in out, out


def _set(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _rewrite(change):
    def write(exported: Path, dest: Path) -> None:
        table = pq.read_table(exported)
        pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), dest)

    return write


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda src, dest: dest.write_bytes(src.read_bytes()[:-100]), "not a whole Parquet file"),
        (lambda src, dest: dest.write_text("not parquet\n"), "not a whole Parquet file"),
        (lambda src, dest: None, "no such file"),
        (_rewrite(lambda t: _set(t, "engine", 0, "Stockfish 16")), "a label of a setting the file does not declare"),
        (_rewrite(lambda t: _set(t, "limit_value", 0, 8)), "a label of a setting the file does not declare"),
        (
            _rewrite(lambda t: _set(_set(t, "cp", 2, -40000), "score", 2, -40000)),
            "a label that fails the store's validation",
        ),
        (_rewrite(lambda t: _set(t, "position_key", 1, 12345)), "a label of a position this store does not have"),
    ],
    ids=["truncated", "text", "missing", "engine", "limit", "score", "position"],
)
def test_a_file_the_store_cannot_take_is_one_line_and_exit_1(source, home, tmp_path, make, says):
    text, exported = source
    games_store(home, text)
    bad = tmp_path / "bad.parquet"
    make(exported, bad)
    code, out, err = cli("--home", str(home), "labels", "import", str(bad))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith(PREFIX) and says in err, err
    assert "Traceback" not in err and "nothing was imported" in err
    assert list((home / "labels").glob("*/part-*.parquet")) == []


def test_the_console_command_exits_1_with_one_line(source, home, tmp_path):
    # As a user's shell sees it: its own process, its exit status, its stderr.
    _, exported = source
    bad = tmp_path / "cut.parquet"
    bad.write_bytes(exported.read_bytes()[: len(exported.read_bytes()) // 3])
    r = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(home), "labels", "import", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(tmp_path / "dagster"), "HOME": str(tmp_path)},
    )
    lines = [line for line in r.stderr.splitlines() if not line.startswith("chess-pipeline: created a new store")]
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(PREFIX), r.stderr
    assert "not a whole Parquet file" in lines[0]
