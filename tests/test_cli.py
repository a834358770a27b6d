"""The command line, end to end: demo (self-play sample), ingest, sql formats."""

import csv
import io
import json

import duckdb
import pytest

from assets.cli import main


def sum_removed(out: str, name: str) -> int:
    """Rows the leakage guard removed from a dataset, as the CLI printed them."""
    import re

    line = next(ln for ln in out.splitlines() if ln.startswith(f"{name}:"))
    removed = re.search(r"leakage guard removed train ([\d,]+), val ([\d,]+), test ([\d,]+)", line)
    return sum(int(x.replace(",", "")) for x in removed.groups())


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


def test_demo_makes_a_selfplay_archive_and_runs_the_graph(home, capsys, stockfish):
    main(["--home", str(home), "demo", "--games", "4"])
    out = capsys.readouterr().out
    assert "archive_summary" not in out  # prints the table, not the view name
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        [(games, rejected, plies, positions)] = con.sql(
            "SELECT games, rejected, plies, positions FROM archive_summary").fetchall()
        assert (games, rejected) == (4, 0) and positions == plies + games
        assert con.sql("SELECT DISTINCT source FROM games").fetchall() == [("selfplay",)]
        # ... and labelled every distinct position at depth 8.
        [(unlabelled, labels)] = con.sql(
            "SELECT count(*) FILTER (WHERE score IS NULL), count(DISTINCT fen) FROM labelled_positions").fetchall()
        assert unlabelled == 0 and labels > 100
        # ... and built every dataset (self-play games are engine games: in Sabatelli's sets).
        datasets = dict(con.sql("SELECT dataset, count(*) FROM datasets GROUP BY 1").fetchall())
        assert datasets["sabatelli_3class"] == con.sql(
            "SELECT count(*) FROM positions").fetchall()[0][0] - sum_removed(out, "sabatelli_3class")
    assert "coverage 100.00%" in out
    # ... and trained the 3-class MLP, its metrics in the store.
    assert "mlp_bitmap_3class: test accuracy" in out
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM model_metrics WHERE model = 'mlp_bitmap_3class' "
                       "AND metric = 'accuracy' AND split = 'test'").fetchall()[0][0] == 1
    # ... and evaluated it: matches (the quick run's 4 openings, both colours: 8 games each) and Elo.
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        scores = dict(con.sql("SELECT suite, n FROM evaluation_results WHERE model = 'mlp_bitmap_3class' "
                              "AND metric = 'score'").fetchall())
        assert scores["random"] == 8 and scores["stockfish skill 0 depth 6"] == 8
        assert con.sql("SELECT count(*) FROM match_games WHERE white LIKE 'mlp_bitmap_3class%' "
                       "OR black LIKE 'mlp_bitmap_3class%'").fetchall()[0][0] >= 24
    assert (home / "reports" / "evaluation" / "mlp_bitmap_3class.md").exists()
    # The runs are in the persistent instance, so the UI shows them.
    import dagster as dg

    with dg.DagsterInstance.get() as inst:
        assert len(inst.get_runs()) >= 2


def test_ingest_and_sql_formats(home, capsys, fics_search):
    main(["--home", str(home), "ingest", str(fics_search)])
    capsys.readouterr()
    main(["--home", str(home), "sql", "SELECT count(*) AS n, sum(ply_count + 1) AS p FROM games", "--format", "csv"])
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["n", "p"] and int(rows[1][0]) == 606
    main(["--home", str(home), "sql", "SELECT count(*) AS n FROM positions", "--format", "json"])
    assert json.loads(capsys.readouterr().out) == [{"n": int(rows[1][1])}]
    main(["--home", str(home), "report", "reject_reasons"])
    capsys.readouterr()
    with pytest.raises(SystemExit, match="sql"):
        main(["--home", str(home), "sql", "SELECT * FROM no_such_table"])


def test_label_limit_bounds_a_run_and_the_next_run_finishes(home, capsys, tmp_path, stockfish):
    pgn = tmp_path / "two.pgn"
    pgn.write_text('[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
                   '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n')
    main(["--home", str(home), "ingest", str(pgn)])
    main(["--home", str(home), "label", "--limit", "5"])
    assert "5 labelled" in capsys.readouterr().out
    main(["--home", str(home), "label"])
    out = capsys.readouterr().out
    assert "8 labelled" in out and "coverage 100.00% of 13 distinct positions" in out  # 18 rows, 5 shared
    main(["--home", str(home), "label", "--depth", "9", "--relabel", "--limit", "3", "--order", "most_used"])
    capsys.readouterr()
    main(["--home", str(home), "sql", "SELECT limit_value, count(*) AS n FROM labels GROUP BY 1 ORDER BY 1",
          "--format", "json"])
    assert json.loads(capsys.readouterr().out) == [{"limit_value": 8, "n": 13}, {"limit_value": 9, "n": 3}]


def test_evaluate_names_what_is_missing(home):
    with pytest.raises(SystemExit, match="no model nosuch"):
        main(["--home", str(home), "evaluate", "nosuch"])
    with pytest.raises(SystemExit, match="not trained yet: mlp_bitmap_3class"):
        main(["--home", str(home), "evaluate", "mlp_bitmap_3class"])
    with pytest.raises(SystemExit, match="not trained yet: any model"):
        main(["--home", str(home), "evaluate"])
