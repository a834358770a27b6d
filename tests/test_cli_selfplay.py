"""`chess-pipeline selfplay`: generations through Dagster, their games ingested, bad flags in one line."""

import duckdb
import pytest

from cli import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_selfplay_writes_generations_and_ingests_their_games(home, capsys):
    flags = ["--games", "3", "--depth", "1", "--max-plies", "24", "--curve-games", "2", "--workers", "1"]
    main(["--home", str(home), "selfplay", "--generations", "2", *flags])
    out = capsys.readouterr().out
    assert "| 1 | 3 |" in out and "| 2 | 3 |" in out and "positions searched/s" in out
    assert (home / "selfplay" / "td" / "gen-0002.pt").exists()
    with duckdb.connect(str(home / "chess.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT archive, source, count(*) FROM games GROUP BY ALL ORDER BY 1").fetchall()
    assert [(source, n) for _, source, n in rows] == [("selfplay", 3), ("selfplay", 3)]
    assert rows[0][0].startswith("selfplay__td__gen-0001.pgn")


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--learner", "tdleaf"], "invalid choice: 'tdleaf' (choose from 'td_leaf', 'td_lambda')"),
        (["--model", "cnn"], "invalid choice: 'cnn' (choose from 'linear', 'network', 'residual')"),
        (["--name", "../up"], "name '../up': use letters, digits"),
        (["--depth", "0"], "depth must be at least 1"),
        (["--clock-ends", "drawn"], "invalid choice: 'drawn' (choose from 'draw', 'unfinished')"),
        (
            ["--generations", "0", "--krk", "--clock-ends", "x"],
            "invalid choice: 'x' (choose from 'draw', 'unfinished')",
        ),
    ],
)
def test_bad_selfplay_settings_are_one_line(home, capsys, flags, expected):
    with pytest.raises(SystemExit) as e:
        main(["--home", str(home), "selfplay", *flags])
    err = capsys.readouterr().err + str(e.value.code)
    assert expected in err and "Traceback" not in err
    assert not (home / "selfplay").exists()


def test_krk_flag_runs_the_krvk_check_and_prints_its_curve(home, capsys):
    """--krk materialises td_krk: a generation of KRvK self-play, then the check from the mate in 3
    (here a 1-ply defender and a loose ply bound, so the run is short)."""
    flags = ["--krk-max-generations", "1", "--games", "2", "--depth", "1", "--workers", "1"]
    flags += ["--krk-defender-depth", "1", "--krk-mate-plies", "9", "--krk-lead-plies", "12"]
    main(["--home", str(home), "selfplay", "--generations", "0", "--krk", *flags])
    out = capsys.readouterr().out
    assert "| generation | self-play results | self-play mate rate |" in out
    assert "| 0 | (untrained) |" in out and "1. " in out  # the check's moves from the position
    assert "KRvK (8/7k/8/5K2/8/8/8/4R3 w - - 0 1; a mate within 9 plies" in out
    assert "mates after 0 generation(s)" in out or "| 1 | {" in out
    assert "; a mate within 12 plies, the same search and defender: " in out
    assert not list((home / "selfplay").glob("*/gen-*.pt"))  # the check writes no line of its own


def test_bad_krk_settings_are_one_line(home, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--home", str(home), "selfplay", "--generations", "0", "--krk", "--games", "0"])
    err = capsys.readouterr().err + str(e.value.code)
    assert "games must be at least 1" in err and "Traceback" not in err


def test_krk_settings_without_krk_are_refused(home, capsys):
    """A --krk-* flag without --krk would be ignored: it is refused in one line, before any game."""
    with pytest.raises(SystemExit) as e:
        main(["--home", str(home), "selfplay", "--generations", "0", "--evaluate", "--krk-lead-plies", "5"])
    err = capsys.readouterr().err + str(e.value.code)
    assert "chess-pipeline selfplay: --krk-lead-plies needs --krk" in err and "Traceback" not in err
    assert not home.exists()


def test_the_selfplay_flags_set_the_krk_checks_selfplay_over_its_own_defaults():
    """KRKCheck holds a TDConfig: with --krk the TDConfig flags given set the check's self-play
    too; those left out take the check's defaults (krk_selfplay), not the line's, and a flag given
    at the line's default (--clock-ends draw) still counts as given."""
    from cli.app import build_parser
    from cli.selfplay import settings

    args = build_parser().parse_args(
        ["selfplay", "--krk", "--games", "3", "--clock-ends", "draw", "--krk-mate-plies", "7"]
    )
    cfg, check = settings(args)
    assert (cfg.games, cfg.clock_ends, cfg.random_plies, cfg.start) == (3, "draw", 4, "standard")
    assert (check.td.games, check.td.clock_ends, check.td.random_plies, check.td.start) == (3, "draw", 0, "krk")
    assert check.mate_plies == 7 and check.td.depth == cfg.depth == 2
    _, check = settings(build_parser().parse_args(["selfplay", "--krk"]))
    assert (check.td.games, check.td.clock_ends, check.td.random_plies) == (40, "unfinished", 0)
    cfg, check = settings(build_parser().parse_args(["selfplay"]))
    assert check is None and (cfg.games, cfg.clock_ends, cfg.random_plies) == (20, "draw", 4)
