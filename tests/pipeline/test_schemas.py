"""One home for the store's tables: pipeline/store/schemas.py, docs/STORE.md kept equal to it,
the writers of the result tables in pipeline/, and no import cycle among the library modules."""

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import chess
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.play.search import RandomPlayer
from pipeline.store import schemas
from pipeline.store.duck import SCHEMA_FILE, create_views, ensure_schema_files, memory_connection
from pipeline.store.schemas import TABLES, Column, document_problems, render_document
from pipeline.store.store import Store

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "STORE.md"


def _doc() -> str:
    return DOCUMENT.read_text(encoding="utf-8")


def test_store_document_has_every_column_of_every_table_and_no_other():
    assert document_problems(_doc()) == [], "run: .venv/bin/python -m pipeline.store.schemas docs/STORE.md"
    doc = _doc()
    for table in TABLES.values():  # independent of the renderer: each column's line, by name and type
        for col in table.columns:
            assert f"| `{col.name}` | `{col.type}` |" in doc, f"{table.name}.{col.name}"


def test_a_column_added_to_a_schema_without_its_line_fails(monkeypatch):
    games = TABLES["games"]
    grown = dataclasses.replace(games, columns=games.columns + (Column("annotator", pa.string(), "Annotator tag"),))
    monkeypatch.setitem(TABLES, "games", grown)
    assert document_problems(_doc()) == ["column blocks differ from pipeline/store/schemas.py"]
    assert "| `annotator` | `string` | `VARCHAR` | Annotator tag |" in render_document(_doc())


def test_a_line_without_its_column_fails():
    doc = _doc()
    line = next(x for x in doc.splitlines() if x.startswith("| `eco` |"))
    assert document_problems(doc.replace(line + "\n", "")) == ["column blocks differ from pipeline/store/schemas.py"]
    extra = doc.replace(line + "\n", line + "\n| `opening` | `string` | `VARCHAR` | Opening tag |\n")
    assert document_problems(extra) == ["column blocks differ from pipeline/store/schemas.py"]


def test_a_table_without_its_block_or_an_unknown_block_fails():
    doc = _doc()
    start = doc.index("<!-- columns: match_games -->")
    end = doc.index("<!-- /columns -->", start) + len("<!-- /columns -->")
    assert document_problems(doc[:start] + doc[end:]) == ["no column block for table match_games"]
    assert document_problems(doc + "\n<!-- columns: match_moves -->\n<!-- /columns -->\n") == [
        "column block for unknown table match_moves"
    ]


def test_every_column_has_a_one_line_meaning_and_tables_their_files():
    for table in TABLES.values():
        assert table.meaning and table.files.startswith(f"{table.name}/"), table.name
        names = [c.name for c in table.columns]
        assert len(names) == len(set(names)), table.name
        for c in table.columns:
            assert c.meaning.strip() and "\n" not in c.meaning, f"{table.name}.{c.name}"


def test_schemas_carry_no_metadata_so_files_keep_their_bytes():
    # Field or schema metadata would be embedded in every Parquet file written with it.
    for table in TABLES.values():
        assert table.schema.metadata is None, table.name
        assert all(f.metadata is None for f in table.schema), table.name


def test_the_store_folders_bind_to_the_schemas(tmp_path):
    store = Store(tmp_path / "store").ensure()
    ensure_schema_files(store)
    for name, table in TABLES.items():
        assert pq.read_schema(store.root / name / SCHEMA_FILE).equals(table.schema), name
    create_views(store)
    with memory_connection(store) as con:
        for name, table in TABLES.items():
            got = [row[0] for row in con.sql(f"DESCRIBE {name}").fetchall()]
            assert got == table.schema.names, name


def test_the_readme_and_store_docstring_point_at_the_document():
    from pipeline.store import store

    assert "docs/STORE.md" in store.__doc__ and "ARCHITECTURE.md" not in store.__doc__
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The store") : readme.index("\n## ", readme.index("## The store") + 1)]
    assert "docs/STORE.md" in section


# --- the writers of the result tables live in pipeline/ --------------------------------


class _Named(RandomPlayer):
    def __init__(self, name: str, seed: int):
        super().__init__(seed)
        self.name = name


def test_result_table_writers_write_the_schemas_and_the_views_read_them(tmp_path):
    from pipeline.play.evaluation import write_model_metrics, write_results
    from pipeline.play.matches import MatchResult, play_game, write_games

    store = Store(tmp_path / "store").ensure()
    metrics = write_model_metrics(
        store, "mlp_bitmap_3class", "sabatelli_3class", "run1", [("test", "accuracy", 0.75), ("train", "loss", 0.5)]
    )
    results = write_results(store, "eval_suites_x", "run1", [("x", "sts", "points_1ply", 120, 150, "of 1500")])
    match = MatchResult("vs random", "a", "b")
    for i, (w, b) in enumerate((("a", "b"), ("b", "a"))):
        match.games.append(
            play_game(_Named(w, i), _Named(b, i + 7), chess.Board(), max_plies=12, opening="op1", round_=f"1.{i + 1}")
        )
    pgn, n = write_games(store, "eval_matches_x", "run1", [match])
    assert metrics == store.root / "model_metrics" / "mlp_bitmap_3class" / "run1.parquet"
    assert results == store.root / "evaluation_results" / "eval_suites_x" / "run1.parquet"
    assert (pgn, n) == (store.root / "matches" / "eval_matches_x" / "run1.pgn", 2)
    games_file = store.root / "match_games" / "eval_matches_x" / "run1.parquet"
    for path, name in ((metrics, "model_metrics"), (results, "evaluation_results"), (games_file, "match_games")):
        assert pq.read_schema(path).equals(TABLES[name].schema), name
    # read back independently: the PGN python-chess parses, the rows through the DuckDB views
    with open(pgn, encoding="utf-8") as f:
        parsed = [chess.pgn.read_game(f) for _ in range(2)]
    create_views(store)
    with memory_connection(store) as con:
        assert con.sql("SELECT split, metric, value FROM model_metrics ORDER BY metric").fetchall() == [
            ("test", "accuracy", 0.75),
            ("train", "loss", 0.5),
        ]
        assert con.sql("SELECT model, suite, metric, value, n, detail, asset FROM evaluation_results").fetchall() == [
            ("x", "sts", "points_1ply", 120.0, 150, "of 1500", "eval_suites_x")
        ]
        rows = con.sql(
            "SELECT white, black, result, plies, opening, round, pgn_path FROM match_games ORDER BY round"
        ).fetchall()
    assert rows == [
        (
            g.headers["White"],
            g.headers["Black"],
            g.headers["Result"],
            int(g.headers["PlyCount"]),
            "op1",
            g.headers["Round"],
            str(pgn),
        )
        for g in parsed
    ]
    assert [r[:2] for r in rows] == [("a", "b"), ("b", "a")]


@pytest.mark.parametrize("module", ["assets/training.py", "assets/evaluation.py"])
def test_asset_modules_write_no_tables(module):
    """The assets call pipeline's writers and build metadata; they build no Arrow table."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m == "pyarrow" or m.startswith("pyarrow.")}, module


# --- no import cycle ----------------------------------------------------------------


def test_the_library_modules_import_each_other_without_a_cycle():
    from tests.test_layering import import_graph  # the one reader of the project's imports

    graph = import_graph(ROOT, ["pipeline", "training"])
    assert graph["pipeline.labels.labels"] >= {"pipeline.store.duck", "pipeline.store.schemas"}  # the walk sees imports
    cycles = []

    def walk(node: str, path: list[str], done: set[str]) -> None:
        for dep in sorted(graph.get(node, ())):
            if dep in path:
                cycles.append(" -> ".join(path[path.index(dep) :] + [dep]))
            elif dep not in done:
                done.add(dep)
                walk(dep, path + [dep], done)

    for module in sorted(graph):
        walk(module, [module], set())
    assert cycles == []


def test_importing_duck_imports_no_table_writer():
    code = (
        "import sys, pipeline.store.duck; pipeline.store.duck.table_schemas(); "
        "print(','.join(m for m in ('pipeline.datasets.datasets', 'pipeline.labels.labels', 'pipeline.ingest.games') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ""
    assert schemas.table_schemas().keys() == TABLES.keys()
