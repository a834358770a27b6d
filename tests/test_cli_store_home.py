"""Where the CLI's store is: a store it creates is named on stderr, once (issue 14, item 6); --home
before or after the command (issue 36)."""

import pytest

from cli import main


def test_a_new_store_is_named_once_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    main(["sql", "SELECT 1 AS n"])
    err = capsys.readouterr().err
    assert err == (
        f"chess-pipeline: created a new store at {tmp_path.resolve() / 'store'} "
        "(set CHESS_PIPELINE_HOME or --home to use another)\n"
    )
    assert (tmp_path / "store" / "archives").is_dir()
    main(["sql", "SELECT 1 AS n"])  # the same store again: nothing to say
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(tmp_path / "home"))
    main(["sql", "SELECT 1 AS n"])
    assert f"created a new store at {tmp_path / 'home'} " in capsys.readouterr().err
    main(["--home", str(tmp_path / "other"), "sql", "SELECT 1 AS n"])
    assert f"created a new store at {tmp_path / 'other'} " in capsys.readouterr().err


# ---- --home after the command, on every command (issue 36) ---------------------------------------

TWO_GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
    '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n'
)


def _commands() -> dict[str, object]:
    """Every subcommand of the parser, by name, with its parser."""
    import argparse

    from cli import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_takes_home_after_it_and_says_so_in_its_help(capsys):
    commands = _commands()
    assert {"ingest", "label", "datasets", "train", "evaluate", "demo", "sql", "ui", "explore"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0
        out = capsys.readouterr().out
        assert "--home HOME" in out, f"`{name} --help` does not show --home:\n{out}"


def test_home_after_the_command_is_the_store_ingest_writes_and_sql_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    pgn = tmp_path / "two.pgn"
    pgn.write_text(TWO_GAMES)
    home = tmp_path / "after"
    main(["ingest", str(pgn), "--home", str(home)])
    assert (home / "games" / "archive=two.pgn" / "data.parquet").is_file()
    assert not (tmp_path / "store").exists()  # not the default store
    capsys.readouterr()
    main(["sql", "SELECT count(*) AS n FROM games", "--home", str(home), "--format", "csv"])
    assert capsys.readouterr().out.split() == ['"n"', "2"]
    # Given on both sides, the one after the command wins (as --help says).
    main(["--home", str(tmp_path / "before"), "sql", "SELECT count(*) AS n FROM games", "--home", str(home)])
    assert "2" in capsys.readouterr().out
    assert not (tmp_path / "before").exists()
    main(["--home", str(home), "sql", "SELECT count(*) AS n FROM games", "--format", "csv"])  # before: as ever
    assert capsys.readouterr().out.split() == ['"n"', "2"]
    assert not (tmp_path / "store").exists()
