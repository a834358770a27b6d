"""Where the CLI's store is: a store it creates is named on stderr, once (issue 14, item 6)."""

from assets.cli import main


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
