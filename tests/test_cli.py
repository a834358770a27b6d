"""The command line, end to end: demo (self-play sample), ingest, sql formats."""

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from cli import main


def sum_removed(out: str, name: str) -> int:
    """Rows the leakage guard removed from a dataset, as the CLI printed them."""
    import re

    line = next(ln for ln in out.splitlines() if ln.startswith(f"{name}:"))
    removed = re.search(r"leakage guard removed train ([\d,]+), val ([\d,]+), test ([\d,]+)", line)
    return sum(int(x.replace(",", "")) for x in removed.groups())


MINI_STS = (
    'rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - bm e4; id "mini.001"; c0 "e4=10, d4=9, Nf3=8";\n'
    '6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - bm Ra8#; id "mini.002"; c0 "Ra8#=10, Re1=1";\n'
)
"""A suite of two STS-shaped positions (points in c0), for the demo to link and score."""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


def test_demo_makes_a_selfplay_archive_and_runs_the_graph(home, capsys, stockfish):
    # A data folder without the real archives: the self-play sample, said so. A folder of suites
    # (by default ../shared/data/epd, STS and Kaufman's): linked into the store and scored.
    suites = home.parent / "suites-src"
    suites.mkdir()
    (suites / "mini_sts.epd").write_text(MINI_STS)
    argv = ["--home", str(home), "demo", "--games", "4", "--data", str(home.parent / "no-archives")]
    main([*argv, "--suites", str(suites)])
    out = capsys.readouterr().out
    assert f"linking 1 suite(s) from {suites}" in out
    assert (home / "suites" / "mini_sts.epd").resolve() == (suites / "mini_sts.epd").resolve()
    assert "no-archives has no ficsgamesdb_2024" in out and "self-play sample" in out
    assert out.rstrip().splitlines()[-2].startswith("demo result: the 3-class network scores ")
    assert "archive_summary" not in out  # prints the table, not the view name
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        [(games, rejected, plies, positions)] = con.sql(
            "SELECT games, rejected, plies, positions FROM archive_summary"
        ).fetchall()
        assert (games, rejected) == (4, 0) and positions == plies + games
        assert con.sql("SELECT DISTINCT source FROM games").fetchall() == [("selfplay",)]
        # ... and labelled every distinct position at depth 8.
        [(unlabelled, labels)] = con.sql(
            "SELECT count(*) FILTER (WHERE score IS NULL), count(DISTINCT fen) FROM labelled_positions"
        ).fetchall()
        assert unlabelled == 0 and labels > 100
        # ... and built every dataset (self-play games are engine games: in Sabatelli's sets).
        datasets = dict(con.sql("SELECT dataset, count(*) FROM datasets GROUP BY 1").fetchall())
        assert datasets["sabatelli_3class"] == con.sql("SELECT count(*) FROM positions").fetchall()[0][0] - sum_removed(
            out, "sabatelli_3class"
        )
    assert "coverage 100.00%" in out
    # ... and trained the demo's network (cli.demo.DEMO_MODEL), its metrics in the store.
    assert "mlp_counts_3class: test accuracy" in out
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        assert (
            con.sql(
                "SELECT count(*) FROM model_metrics WHERE model = 'mlp_counts_3class' "
                "AND metric = 'accuracy' AND split = 'test'"
            ).fetchall()[0][0]
            == 1
        )
    # ... and evaluated it: matches (the quick run's 4 openings, both colours: 8 games each) and Elo.
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        scores = dict(
            con.sql(
                "SELECT suite, n FROM evaluation_results WHERE model = 'mlp_counts_3class' AND metric = 'score'"
            ).fetchall()
        )
        assert scores["random"] == 8 and scores["stockfish skill 0 depth 6"] == 8
        # ... and the suites: STS points of the 1-ply player on both positions of the linked suite.
        scored = dict(
            con.sql(
                "SELECT metric, n FROM evaluation_results WHERE model = 'mlp_counts_3class' AND suite = 'mini_sts'"
            ).fetchall()
        )
        assert scored["points_1ply"] == 2, scored
        assert (
            con.sql(
                "SELECT count(*) FROM match_games WHERE white LIKE 'mlp_counts_3class%' "
                "OR black LIKE 'mlp_counts_3class%'"
            ).fetchall()[0][0]
            >= 24
        )
    assert (home / "reports" / "evaluation" / "mlp_counts_3class.md").exists()
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
    pgn.write_text(
        '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
        '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n'
    )
    main(["--home", str(home), "ingest", str(pgn)])
    main(["--home", str(home), "label", "--limit", "5"])
    assert "5 labelled" in capsys.readouterr().out
    main(["--home", str(home), "label"])
    out = capsys.readouterr().out
    assert "8 labelled" in out and "coverage 100.00% of 13 distinct positions" in out  # 18 rows, 5 shared
    main(["--home", str(home), "label", "--depth", "9", "--relabel", "--limit", "3", "--order", "most_used"])
    capsys.readouterr()
    main(
        [
            "--home",
            str(home),
            "sql",
            "SELECT limit_value, count(*) AS n FROM labels GROUP BY 1 ORDER BY 1",
            "--format",
            "json",
        ]
    )
    assert json.loads(capsys.readouterr().out) == [{"limit_value": 8, "n": 13}, {"limit_value": 9, "n": 3}]
    # --keep-hash is a setting of its own: all 13 positions again, in their own folder.
    main(["--home", str(home), "label", "--keep-hash", "--workers", "1"])
    assert "13 labelled" in capsys.readouterr().out
    assert {p.name for p in (home / "labels").iterdir() if p.name.startswith("stockfish")} == {
        "stockfish-15.1_depth-8",
        "stockfish-15.1_depth-9",
        "stockfish-15.1_depth-8_hash-kept",
    }


def test_evaluate_names_what_is_missing(home):
    with pytest.raises(SystemExit, match="no model nosuch"):
        main(["--home", str(home), "evaluate", "nosuch"])
    with pytest.raises(SystemExit, match="not trained yet: mlp_bitmap_3class"):
        main(["--home", str(home), "evaluate", "mlp_bitmap_3class"])
    with pytest.raises(SystemExit, match="not trained yet: any model"):
        main(["--home", str(home), "evaluate"])
    with pytest.raises(
        SystemExit, match=r"^chess-pipeline evaluate: --workers must be 0 or more \(0: one per core\), got -1$"
    ):
        main(["--home", str(home), "evaluate", "--workers", "-1", "--only", "matches"])


# ---- reading the right store, and only reading it (issue 13, items 7 and 8) ----------------


def _pgn(path, n: int, first: int = 0):
    """n distinct short games (openings from a fixed list, so contents differ by `first`)."""
    moves = ["e4 e5", "d4 d5", "c4 c5", "Nf3 Nf6", "g3 g6", "b3 b6", "f4 f5", "Nc3 Nc6", "a3 a6", "h3 h6"]
    path.write_text("".join(f'[Event "g{i}"]\n[Result "*"]\n\n1. {moves[i]} *\n\n' for i in range(first, first + n)))
    return path


def _tree_digest(root) -> dict:
    """Every file, link and folder under root: content hash, link target or 'dir'."""
    import hashlib

    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + str(p.readlink())
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _json_rows(capsys, *argv):
    main([*argv, "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_a_copied_store_queried_through_the_cli_sees_its_own_rows(home, capsys, tmp_path):
    import shutil

    main(["--home", str(home), "ingest", str(_pgn(tmp_path / "a.pgn", 3))])
    shutil.copytree(home, tmp_path / "snapshot", symlinks=True)  # as `cp -a store snapshot`
    main(["--home", str(home), "ingest", str(_pgn(tmp_path / "b.pgn", 4, first=3))])  # the original changes
    capsys.readouterr()
    snapshot = str(tmp_path / "snapshot")
    assert _json_rows(capsys, "--home", snapshot, "sql", "SELECT count(*) AS n FROM games") == [{"n": 3}]
    assert _json_rows(capsys, "--home", str(home), "sql", "SELECT count(*) AS n FROM games") == [{"n": 7}]
    # ... and the copy's own DuckDB file now reads the copy, as `duckdb -readonly` would open it.
    with duckdb.connect(str(tmp_path / "snapshot" / "chess.duckdb"), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM games").fetchall() == [(3,)]


WRITES = [
    "COPY (SELECT * FROM games LIMIT 1) TO '{part}/data.parquet' (FORMAT parquet)",
    "copy games to '{store}/games.csv'",
    "  /* a comment */ COPY games TO '{store}/x.parquet'",
    "COPY games FROM '{store}/games.csv'",
    "EXPORT DATABASE '{store}/export'",
    "IMPORT DATABASE '{store}/export'",
    "ATTACH '{store}/other.duckdb' AS other",
    "DETACH other",
    "COPY FROM DATABASE memory TO other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE t AS SELECT 1",
    "CREATE OR REPLACE VIEW games AS SELECT 1",
    "CREATE MACRO m() AS 1",
    "CREATE TEMP TABLE t AS SELECT 1",
    "INSERT INTO games SELECT * FROM games",
    "DELETE FROM games",
    "UPDATE games SET white = 'x'",
    "TRUNCATE games",
    "DROP VIEW games",
    "ALTER VIEW games RENAME TO g",
    "SET threads = 1",
    "RESET threads",
    "SET VARIABLE x = 1",
    "USE memory",
    "CALL checkpoint()",
    "CHECKPOINT",
    "VACUUM",
    "PREPARE p AS SELECT 1",
    "BEGIN",
    "PIVOT (WITH d AS (DELETE FROM games RETURNING *) SELECT * FROM d) ON result",
    "SELECT 1; COPY games TO '{store}/y.csv'",
    "SELECT count(*) FROM games; DROP VIEW games",
    "EXPLAIN ANALYZE COPY games TO '{store}/e.csv'",
    "EXPLAIN (ANALYZE) COPY games TO '{store}/e2.csv'",
    "PRAGMA enable_profiling",
    "PRAGMA profiling_output = '{store}/profile.json'",
    "SELECT * FROM enable_logging(storage = 'file', storage_path = '{store}/logs')",
    "WITH d AS (DELETE FROM games RETURNING *) SELECT count(*) FROM d",
    "SELECT * FROM query('COPY games TO ''{store}/q.csv''')",
]


@pytest.fixture(scope="module")
def three_games(tmp_path_factory):
    """A store of 3 short games ingested once through the CLI (its own DAGSTER_HOME), shared by
    the tests below that only read it (`sql`, `report`): one ingest, not one per test."""
    tmp = tmp_path_factory.mktemp("three_games")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(tmp / "dagster"))
        mp.delenv("CHESS_PIPELINE_HOME", raising=False)
        main(["--home", str(tmp / "store"), "ingest", str(_pgn(tmp / "a.pgn", 3))])
    return tmp / "store"


def test_sql_refuses_every_write_and_the_store_stays_byte_identical(home, capsys, three_games):
    home = three_games
    [part] = (home / "games").glob("archive=*")
    before = _tree_digest(home)
    for statement in WRITES:
        sql = statement.format(store=home, part=part)
        with pytest.raises(SystemExit) as refused:
            main(["--home", str(home), "sql", sql])
        message = str(refused.value)
        assert message.startswith("chess-pipeline sql: ") and "\n" not in message, sql
        assert "refused" in message or "statements given" in message, (sql, message)
    capsys.readouterr()
    assert _json_rows(capsys, "--home", str(home), "sql", "SELECT count(*) AS n FROM games") == [{"n": 3}]
    main(["--home", str(home), "report", "reject_reasons"])
    assert _tree_digest(home) == before


README_QUERIES = [
    "SELECT source, count(*) AS games, avg(ply_count) AS plies FROM games GROUP BY source",
    "SELECT * FROM archive_summary",
    "SELECT (white_elo + black_elo) // 400 * 200 AS band, outcome, count(*) FROM games WHERE white_elo IS NOT NULL "
    "GROUP BY ALL ORDER BY ALL",
    "SELECT position_key, count(DISTINCT game_id) AS games FROM positions WHERE ply >= 10 GROUP BY 1 ORDER BY 2 DESC "
    "LIMIT 10",
    "SELECT archive, white, black, result, result_movetext, result_board FROM games WHERE result_mismatch",
    "SELECT ply, round(avg(score) FILTER (WHERE mate IS NULL)) AS mean_cp, count(*) AS positions FROM "
    "labelled_positions WHERE result = '1-0' AND ply <= 60 GROUP BY ply ORDER BY ply",
    "SELECT fen, best_move, move_uci, count(*) AS times FROM labelled_positions WHERE move_uci <> best_move "
    "AND abs(score) < 300 GROUP BY ALL ORDER BY times DESC LIMIT 10",
    "SELECT fen(planes, side_to_move, castling, ep_square, 0, 1), material(planes) FROM positions LIMIT 5",
    "SELECT dataset, split, target, count(*) FROM datasets GROUP BY ALL ORDER BY ALL",
    "WITH g AS (SELECT * FROM games) SELECT count(*) AS n FROM g",
    "FROM games SELECT count(*)",
    "DESCRIBE games",
    "SHOW TABLES",
    "SUMMARIZE games",
    "EXPLAIN SELECT count(*) FROM positions",
    "EXPLAIN ANALYZE SELECT count(*) FROM positions",
    "PRAGMA table_info('games')",
    "VALUES (1, 'a')",
    "PIVOT games ON result USING count(*)",
]


def test_sql_still_reads_what_the_readme_shows_and_reports_run(home, capsys, three_games):
    from importlib import resources

    home = three_games
    capsys.readouterr()
    for sql in README_QUERIES:
        main(["--home", str(home), "sql", sql, "--format", "json"])
        json.loads(capsys.readouterr().out)
    assert _json_rows(capsys, "--home", str(home), "sql", "SELECT sum(games)::INTEGER AS n FROM archive_summary") == [
        {"n": 3}
    ]
    reports = [
        p.name.removesuffix(".sql")
        for p in resources.files("sql").joinpath("reports").iterdir()
        if p.name.endswith(".sql")
    ]
    assert len(reports) >= 4
    for name in reports:
        main(["--home", str(home), "report", name, "--format", "json"])
        json.loads(capsys.readouterr().out)


# ---- runs say what started them (issue 12, item 11) -----------------------------------------


def test_cli_runs_carry_the_command_and_assets_as_tags(home, capsys, tmp_path):
    import dagster as dg

    main(["--home", str(home), "ingest", str(_pgn(tmp_path / "a.pgn", 2))])
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert len(runs) == 1
        tags = runs[0].tags
    assert tags["chess-pipeline/command"] == "ingest"
    assert set(tags["chess-pipeline/assets"].split(", ")) == {"games", "positions", "position_book", "rejected_games"}
    assert tags["dagster/partition"] == "a.pgn"


# ---- one line for every error, the traceback on request (issue 12, item 4) -------------------

CLI = Path(sys.executable).parent / "chess-pipeline"


def _cli(tmp_path, *argv, env: dict | None = None) -> subprocess.Popen:
    """The installed console script, as a user runs it (started, not waited for: communicate())."""
    base = {k: v for k, v in os.environ.items() if k not in ("CHESS_PIPELINE_HOME", "CHESS_PIPELINE_DEBUG")}
    base["DAGSTER_HOME"] = str(tmp_path / "dagster")
    return subprocess.Popen(
        [str(CLI), *argv],
        env={**base, **(env or {})},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _in_process(capsys, *argv) -> tuple[int, str, str]:
    """main(argv) in this process, ending as the console script ends: (exit status, stdout,
    stderr). A SystemExit with a message is printed by the interpreter (status 1); a warning
    shows as Python's default filters show it on a terminal; an exception main lets through
    (--debug) as the interpreter's traceback (status 1)."""
    import traceback
    import warnings

    capsys.readouterr()
    tb = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        try:
            main(list(argv))
        except SystemExit as e:
            code = e.code
        except Exception as e:
            code, tb = 1, "".join(traceback.format_exception(e))
        else:
            code = 0
    out, err = capsys.readouterr()
    err += "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    if isinstance(code, str):
        code, err = 1, err + code + "\n"
    return code or 0, out, err + tb


def _stderr_in_process(capsys, *argv) -> str:
    """The stderr of a command that must fail (_in_process)."""
    code, _, err = _in_process(capsys, *argv)
    assert code != 0, (argv, err)
    return err


@pytest.mark.slow  # 2 CLI processes (run at once); the `label` case starts the engine
def test_errors_end_in_one_line_and_debug_shows_the_traceback(tmp_path, capsys, monkeypatch):
    home = tmp_path / "store"
    (home / "archives").mkdir(parents=True)  # an existing store (a new one is named on stderr first)
    (tmp_path / "notes.txt").write_text("not chess\n")
    (tmp_path / "afile").write_text("x")
    # Two cases in real processes of the console script, at once: a failure inside a Dagster run
    # (Dagster's own log lines keep no stack trace, the cause ends it), and the traceback asked
    # for by the environment. Each has a store and an instance of its own: they run beside the rest.
    procs = []
    for name, argv, env in (
        ("run", ["label", "--depth", "-3"], {}),
        ("debug", ["sql", "SELECT * FROM no_such_table"], {"CHESS_PIPELINE_DEBUG": "1"}),
    ):
        (tmp_path / name / "store" / "archives").mkdir(parents=True)
        env = {**env, "DAGSTER_HOME": str(tmp_path / name / "dagster")}
        procs.append(_cli(tmp_path, "--home", str(tmp_path / name / "store"), *argv, env=env))
    try:
        # Every other case in this process, through the same main (as the script's environment).
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
        monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
        monkeypatch.delenv("CHESS_PIPELINE_DEBUG", raising=False)
        monkeypatch.chdir(tmp_path)
        cases = [
            (["ingest", str(tmp_path / "notes.txt")], "not an archive name"),
            (["ingest", str(tmp_path / "missing.pgn")], "missing.pgn"),
            (["sql", "SELECT * FROM no_such_table"], "no_such_table"),
            (["sql", "SELECT FROM WHERE"], "syntax error"),
            (["sql", "COPY games TO 'x.csv'"], "refused"),
            (["report", "no_such_report"], "no report"),
            (["evaluate", "nosuch"], "no model nosuch"),
            (["reproduce", "mlp_search_regression"], "mlp_search_regression is not part of the reproduction"),
            (["label", "--depth", "x"], "invalid int value: 'x' (see `chess-pipeline label --help`)"),
            (["label", "--shard-lease", "5"], "--shard-lease must be at least 10 seconds (default 120), got 5"),
            (["nosuch"], "invalid choice: 'nosuch'"),
        ]
        for argv, expect in cases:
            err = _stderr_in_process(capsys, "--home", str(home), *argv)
            lines = err.strip().splitlines()
            assert "Traceback" not in err, (argv, err)
            assert len(lines) == 1 and lines[0].startswith("chess-pipeline") and expect in lines[0].lower(), (argv, err)
        err = _stderr_in_process(capsys, "--home", str(tmp_path / "afile"), "sql", "SELECT 1")  # the store is a file
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        err = _stderr_in_process(capsys, "--debug", "--home", str(home), "sql", "SELECT * FROM no_such_table")
        assert "Traceback" in err and "no_such_table" in err, err
        in_run, debug = (p.communicate(timeout=300)[1] for p in procs)
    finally:
        for p in procs:  # on a failure above: no CLI process outlives the test
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert procs[0].returncode != 0 and "Traceback" not in in_run and "Stack Trace" not in in_run, in_run
    assert in_run.strip().splitlines()[-1].startswith("chess-pipeline") and "-3" in in_run, in_run
    assert procs[1].returncode != 0 and "Traceback" in debug and "no_such_table" in debug, debug


# ---- `chess-pipeline ui` without the venv on PATH (issue 12, item 1) ----------------------------


TWO_GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
    '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n'
)
TWO_GAMES_DISTINCT = 13  # 18 position rows, the first five shared


def _two_game_store(home, tmp_path, capsys):
    pgn = tmp_path / "two.pgn"
    pgn.write_text(TWO_GAMES)
    main(["--home", str(home), "ingest", str(pgn)])
    capsys.readouterr()


def _run_log(instance, run) -> list[str]:
    return [e.user_message for e in instance.all_logs(run.run_id) if e.user_message]


def test_label_limit_progress_counts_the_positions_asked_for(home, capsys, tmp_path, stockfish):
    """`label --limit 5` with 13 pending: the bar and the run's log say "of 5", not "of 13"."""
    import dagster as dg

    _two_game_store(home, tmp_path, capsys)
    main(["--home", str(home), "label", "--limit", "5", "--workers", "1"])
    assert "5 labelled" in capsys.readouterr().out
    with dg.DagsterInstance.get() as instance:
        run = instance.get_runs(limit=1)[0]
        totals = [m for m in _run_log(instance, run) if " positions done (" in m or " positions labelled, " in m]
    assert totals and totals[-1].startswith("5 of 5 positions done"), totals


HANGING_ENGINE = """#!{python}
# Stockfish, except that the position {board} hangs it: its commands and everything after
# them (`stop` and `quit` included) are swallowed, and it never prints `bestmove`.
import subprocess, sys, threading
child = subprocess.Popen([{stockfish!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
def pump():
    for line in iter(child.stdout.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
threading.Thread(target=pump, daemon=True).start()
hung = False
for line in sys.stdin.buffer:
    hung = hung or line.startswith(b"position fen {board} ")
    if not hung:
        child.stdin.write(line)
        child.stdin.flush()
child.stdin.close()
child.wait()
"""


def test_a_setting_a_resource_refuses_fails_the_command_in_one_line_with_its_reason(home, stockfish, capsys):
    """--workers -1: the engine pool (a resource of the run) refuses it as the run starts; the
    command says why, not 'run failed', and labels nothing."""
    for argv in (["label", "--workers", "-1"], ["datasets", "sabatelli_regression_search", "--workers", "-1"]):
        with pytest.raises(SystemExit) as e:
            main(["--home", str(home), *argv])
        assert str(e.value).endswith("failed: ValueError: workers is 0 (one per usable core) or a number of processes, "
                                     "got -1"), (argv, str(e.value))  # fmt: skip
    assert not list((home / "labels").glob("*/*.parquet")) and not (home / "datasets").exists()


def test_a_hung_position_costs_seconds_and_is_recorded(home, capsys, tmp_path, stockfish, monkeypatch):
    """An engine that hangs on one position (ignores `stop`): the measured timeout gives it up in
    seconds (60 s x 3 tries before), the position goes to label_failures, the rest is labelled;
    --timeout and --retries set both."""
    import sys

    board = "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w"  # after 1. e4 e5, in both games
    wrapper = tmp_path / "hanging-stockfish"
    wrapper.write_text(HANGING_ENGINE.format(python=sys.executable, stockfish=stockfish, board=board))
    wrapper.chmod(0o755)
    _two_game_store(home, tmp_path, capsys)
    monkeypatch.setenv("STOCKFISH_PATH", str(wrapper))
    start = time.monotonic()
    main(["--home", str(home), "label", "--workers", "1"])
    took = time.monotonic() - start
    out = capsys.readouterr().out
    assert f"{TWO_GAMES_DISTINCT - 1} labelled, 1 failed" in out
    assert took < 60, f"one hung position took {took:.0f}s"
    query = "SELECT fen, reason, attempts FROM label_failures ORDER BY failed_at"
    main(["--home", str(home), "sql", query, "--format", "json"])
    (failure,) = json.loads(capsys.readouterr().out)
    assert failure["fen"].startswith(board + " ") and "hung" in failure["reason"] and failure["attempts"] == 3

    start = time.monotonic()
    main(["--home", str(home), "label", "--workers", "1", "--retry-failed", "--timeout", "0.5", "--retries", "0"])
    assert time.monotonic() - start < 30
    assert "0 labelled, 1 failed" in capsys.readouterr().out
    main(["--home", str(home), "sql", query, "--format", "json"])
    again = json.loads(capsys.readouterr().out)[-1]
    assert again["attempts"] == 1 and "within 0.5s" in again["reason"]


def test_a_broken_label_from_an_older_version_is_a_note_not_a_failure_of_every_run(home, capsys, tmp_path, stockfish):
    """A label out of range in the store (written before labels were validated): scores_in_range
    does not pass, and the CLI says so in one note line, but the run, which wrote only valid
    labels, exits 0 (as an ERROR it failed every later run, and nothing could remove the row).
    An unfinished coverage (WARN) after a bounded run is a note too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _two_game_store(home, tmp_path, capsys)
    main(["--home", str(home), "label", "--limit", "2", "--workers", "1"])
    out = capsys.readouterr().out
    assert "note: check coverage of labels did not pass" in out
    part = sorted((home / "labels").glob("*/part-*.parquet"))[0]
    table = pq.read_table(part)
    row = table.slice(0, 1).to_pylist()[0]
    row.update(position_key=row["position_key"] ^ 1, cp=99999, mate=None, score=99999, run_id="older")
    pq.write_table(pa.Table.from_pylist([row], schema=table.schema), part.with_name("part-bad.parquet"))
    main(["--home", str(home), "label", "--limit", "2", "--workers", "1"])
    out = capsys.readouterr().out
    assert "2 labelled" in out
    notes = [line for line in out.splitlines() if "scores_in_range" in line]
    assert len(notes) == 1 and notes[0].startswith("note: check scores_in_range of labels did not pass: 1 label(s)")
    assert "none by this run" in notes[0]


def test_ingest_says_when_the_store_does_not_reconcile_with_the_file(home, capsys, tmp_path):
    """Bare CR line ends: the reader sees one game where python-chess counts two, so
    reconciles_with_file fails; the CLI prints the summary, then one line naming the check, and
    exits non-zero."""
    pgn = tmp_path / "old-mac.pgn"
    pgn.write_bytes(b'[Event "a"]\r[Result "*"]\r\r1. e4 e5 *\r\r[Event "b"]\r[Result "*"]\r\r1. d4 d5 *\r')
    with pytest.raises(SystemExit):
        main(["--home", str(home), "ingest", str(pgn)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "reconciles_with_file" in ln]
    assert len(lines) == 1 and lines[0].startswith(
        "chess-pipeline: archive old-mac.pgn failed: check reconciles_with_file of games did not pass"
    )
    assert "python-chess counts 2 games" in lines[0]


def run_cli(home, *args):
    """The command as a user runs it (its own process): (exit status, stdout, stderr)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "CHESS_PIPELINE_HOME"}
    r = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(home), *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return r.returncode, r.stdout, r.stderr


def _home_in_process(capsys, home, *args) -> tuple[int, str, str]:
    """run_cli's (exit status, stdout, stderr), the command run in this process (_in_process)."""
    return _in_process(capsys, "--home", str(home), *args)


def test_datasets_and_train_name_missing_labels_in_one_line_and_label_flags_choose_them(
    home, tmp_path, capsys, stockfish
):
    from tests.fixtures_pgn import RATED_GAMES

    pgn = tmp_path / "rated.pgn"
    pgn.write_text(RATED_GAMES)
    main(["--home", str(home), "ingest", str(pgn)])
    main(["--home", str(home), "label", "--depth", "6"])
    fix = (
        "no depth-8 labels for its 47 candidate positions; the store has labels for depth 6 (47 of them): "
        "run `chess-pipeline label --depth 8`, or build from those with "
        "`chess-pipeline datasets sabatelli_3class --depth 6`"
    )
    rc, out, err = _home_in_process(capsys, home, "datasets", "sabatelli_3class")
    assert rc == 1 and out == "" and err == f"chess-pipeline datasets: sabatelli_3class has no rows: {fix}\n"
    rc, out, err = _home_in_process(capsys, home, "train")
    assert (
        rc == 1
        and out == ""
        and err == (f"chess-pipeline train: mlp_bitmap_3class cannot train: sabatelli_3class has no rows: {fix}\n")
    )
    # --depth 6 builds it from the depth-6 labels: every row, each target from its label.
    rc, out, err = _home_in_process(
        capsys,
        home,
        "datasets",
        "sabatelli_3class",
        "--depth",
        "6",
        "--val-fraction",
        "0",
        "--test-fraction",
        "0",
    )
    assert rc == 0 and "sabatelli_3class: train 47, val 0, test 0" in out
    assert "label coverage 100.00% of 47 candidate positions" in out
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        rows = con.sql(
            "SELECT d.target, l.score, d.side_to_move FROM datasets d JOIN labels l "
            "USING (position_key, side_to_move) WHERE d.dataset = 'sabatelli_3class'"
        ).fetchall()
        assert con.sql("SELECT DISTINCT limit_value FROM labels").fetchall() == [(6,)]
    assert len(rows) == 47
    for target, score, stm in rows:
        s = -score if stm == "b" else score
        assert target == (0 if s < -150 else 2 if s > 150 else 1)
    # --min-elo moves the rating floor (both players over it), counted by hand from the games' headers:
    # 0 adds g3 (1900 / 2400, 10 plies: 11 positions); 2099 keeps g1 twice (2300 / 2200, 15 positions
    # each) and drops g2 (2100 / 2050).
    for floor, rows_wanted in (("0", 58), ("2099", 30)):
        rc, out, err = _home_in_process(
            capsys, home, "datasets", "sabatelli_3class", "--depth", "6", "--min-elo", floor,
            "--val-fraction", "0", "--test-fraction", "0",
        )  # fmt: skip
        assert rc == 0 and f"sabatelli_3class: train {rows_wanted}, val 0, test 0" in out, (floor, out, err)
    # Bad flags: one line each.
    rc, _, err = _home_in_process(capsys, home, "datasets", "deepchess", "--depth", "6")
    assert rc == 1 and err.count("\n") == 1
    assert err.startswith("chess-pipeline datasets: deepchess takes no label setting")
    rc, _, err = _home_in_process(capsys, home, "datasets", "deepchess", "lubeck_wdl", "--min-elo", "1000")
    assert rc == 1 and err.startswith("chess-pipeline datasets: deepchess, lubeck_wdl have no rating floor")
    assert err.count("\n") == 1 and "--min-elo is for sabatelli_3class" in err
    rc, _, err = _home_in_process(capsys, home, "datasets", "sabatelli_3class", "--min-elo", "-1")
    assert rc == 1 and err == "chess-pipeline datasets: --min-elo must be 0 (every game) or more, got -1\n"
    rc, _, err = _home_in_process(capsys, home, "datasets", "sabatelli_3class", "--depth", "0")
    assert rc == 1 and err == "chess-pipeline datasets: --depth: depth limit must be at least 1, got 0\n"


@pytest.mark.slow  # an ingest through Dagster, then the command
def test_a_set_no_game_qualifies_for_is_not_100_percent_covered(home, tmp_path, capsys):
    pgn = tmp_path / "club.pgn"
    pgn.write_text(
        '[Event "c"]\n[WhiteElo "1500"]\n[BlackElo "1600"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 '
        "3. Bc4 Nf6 4. Qxf7# 1-0\n"
    )
    main(["--home", str(home), "ingest", str(pgn)])
    rc, out, err = _home_in_process(capsys, home, "datasets", "sabatelli_3class")
    assert rc == 1 and out == "" and "100.00%" not in err
    assert err == (
        "chess-pipeline datasets: sabatelli_3class has no rows: none of the store's 1 games gives "
        "positions of games whose players are both rated over 2000, or of engine games (min_elo 0 would "
        "keep 8 positions: set min_elo lower in the run config)\n"
    )


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_csv_holds_every_column_and_a_closed_pipe_ends_quietly(home, capsys, tmp_path):
    """Planes (bytes) come out as hex and extra_headers (a map) as JSON, where Arrow's CSV
    writer refused both; `... | head` ends the command without a word (exit 141, as SIGPIPE)."""
    import csv
    import io
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pipeline.ingest.encoding import fen_from_row

    pgn = tmp_path / "annotated.pgn"
    pgn.write_text('[Event "x"]\n[Annotator "me, with a comma"]\n[Result "*"]\n\n1. e4 e5 *\n')
    main(["--home", str(home), "ingest", str(pgn)])
    capsys.readouterr()
    main(["--home", str(home), "sql", "SELECT * FROM positions ORDER BY ply", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3 and all(len(r["planes"]) == 192 for r in rows)
    last = rows[-1]
    fen = fen_from_row(
        bytes.fromhex(last["planes"]),
        last["side_to_move"],
        int(last["castling"]),
        int(last["ep_square"]) if last["ep_square"] else None,
        int(last["halfmove_clock"]),
        int(last["fullmove_number"]),
    )
    assert fen == "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2"
    main(["--home", str(home), "sql", "SELECT extra_headers FROM games", "--format", "csv"])
    [row] = csv.DictReader(io.StringIO(capsys.readouterr().out))
    assert json.loads(row["extra_headers"]) == {"Annotator": "me, with a comma"}
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "CHESS_PIPELINE_HOME"}
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "--home",
            str(home),
            "sql",
            "SELECT * FROM range(200000)",
            "--format",
            "csv",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    cli.stdout.readline()
    cli.stdout.close()  # the reader goes away, as `head -1` does
    _, err = cli.communicate(timeout=120)
    assert cli.returncode == 141 and err.decode().strip() == ""


def test_the_shard_lease_flag_reaches_the_labels_run_config():
    """`label --shard-lease S` is the labels asset's shard_lease_ttl_s (an S3 store's lease time);
    without it, LabelRun's default."""
    from cli.app import build_parser
    from cli.label import config_from_args
    from pipeline.labels.setting import SHARD_LEASE_TTL_S

    parser = build_parser()
    config, _ = config_from_args(parser.parse_args(["label", "--shard-lease", "30"]))
    assert config.shard_lease_ttl_s == 30.0
    config, _ = config_from_args(parser.parse_args(["label"]))
    assert config.shard_lease_ttl_s == SHARD_LEASE_TTL_S


def test_debug_flag_is_the_one_switch_the_runtime_reads(three_games, capsys, monkeypatch):
    # --debug sets CHESS_PIPELINE_DEBUG while its command runs, so the runtime's filters (Dagster's
    # own event-log write errors kept off stderr) and the run's processes see it too; afterwards
    # the variable is as it was (an in-process call must not turn later commands' errors into
    # tracebacks).
    import cli.app as app
    from cli.runtime import debugging

    seen = []
    monkeypatch.setattr(app, "set_command", lambda command: seen.append((command, debugging())))
    monkeypatch.setenv("CHESS_PIPELINE_DEBUG", "0")  # off (and put back as it was after the test)
    main(["--home", str(three_games), "sql", "SELECT 1 AS one"])
    main(["--debug", "--home", str(three_games), "sql", "SELECT 1 AS one"])
    assert seen == [("sql", False), ("sql", True)]
    assert os.environ["CHESS_PIPELINE_DEBUG"] == "0"
    monkeypatch.delenv("CHESS_PIPELINE_DEBUG")
    main(["--debug", "--home", str(three_games), "sql", "SELECT 1 AS one"])
    assert seen[-1] == ("sql", True) and "CHESS_PIPELINE_DEBUG" not in os.environ
