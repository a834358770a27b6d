"""`chess-pipeline ingest` under faults and hostile input (issue 13 items 5, 11, 14)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.delenv("CHESS_PIPELINE_HOME", raising=False)
    return tmp_path / "store"


def _count(home, capsys, sql="SELECT count(*) AS n FROM games"):
    capsys.readouterr()
    main(["--home", str(home), "sql", sql, "--format", "json"])
    return json.loads(capsys.readouterr().out)[0]["n"]


def test_one_failed_archive_hides_no_summary_and_the_views_are_refreshed(home, capsys, fics_search, tmp_path):
    data = fics_search.read_bytes()
    bad = tmp_path / "broken.pgn.zst"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(SystemExit) as e:
        main(["--home", str(home), "ingest", str(bad), str(fics_search)])
    assert e.value.code == 1
    out, err = capsys.readouterr()
    assert f"{fics_search.name}: 606 games, 0 rejected" in out
    assert "archive broken.pgn.zst failed" in err
    assert _count(home, capsys) == 606  # the views (refreshed) show the good archive


def test_ingest_copy_twice_is_one_archive(home, capsys, fics_search, tmp_path):
    main(["--home", str(home), "ingest", "--copy", str(fics_search)])
    main(["--home", str(home), "ingest", "--copy", str(fics_search)])
    same = tmp_path / "same-bytes.pgn.zst"
    same.write_bytes(fics_search.read_bytes())
    main(["--home", str(home), "ingest", str(same)])
    assert sorted(p.name for p in (home / "archives").iterdir()) == [fics_search.name]
    assert _count(home, capsys) == 606
    assert _count(home, capsys, "SELECT count(DISTINCT archive) AS n FROM games") == 1


def test_ingest_of_a_link_named_pgn_to_another_name(home, capsys, tmp_path):
    data = tmp_path / "download.txt"
    data.write_text('[Event "e"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 *\n')
    link = tmp_path / "x.pgn"
    link.symlink_to(data)
    main(["--home", str(home), "ingest", str(link)])
    assert "x.pgn: 1 games, 0 rejected, 4 positions" in capsys.readouterr().out


# Disk full (item 11): a real, small file system -----------------------------------------


@pytest.fixture
def small_fs(tmp_path, request):
    """A 2 MiB tmpfs (needs root and mount; skipped elsewhere): room for the store's and the
    Dagster instance's files (about 0.8 MB), not for the 2.3 MB of positions of fics_2022.
    Parametrised indirectly with another size where a test needs more room."""
    size = getattr(request, "param", "2m")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); the disk-full tests need root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _cli(*args, dagster_home):
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    env.pop("CHESS_PIPELINE_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "cli", *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


def _leftovers(root: Path) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.name.endswith(".tmp") or p.name.endswith(".parquet") and p.name != "_schema.parquet"
    ]


def _fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def test_parquet_writes_on_a_full_disk(small_fs, fics_2022, tmp_path):
    """The store and the Dagster instance on a file system too small for the partition."""
    home, dagster_home = small_fs / "store", small_fs / "store" / "dagster"
    r = _cli("--home", home, "ingest", fics_2022, dagster_home=dagster_home)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert f"no space left on {small_fs}" in last and "Traceback" not in r.stderr, r.stderr
    assert _leftovers(home) == []  # nothing half written
    subprocess.run(["mount", "-o", "remount,size=32m", str(small_fs)], check=True)
    r = _cli("--home", home, "ingest", fics_2022, dagster_home=dagster_home)
    assert r.returncode == 0, r.stderr
    assert f"{fics_2022.name}: 2229 games, 0 rejected" in r.stdout


# 3 MiB: the instance on this disk holds the CLI's 1 MiB reserve (cli.runtime.RESERVE_BYTES)
# beside the store and the instance, and the last ingest must fit once the filler is gone.
@pytest.mark.parametrize("small_fs", ["3m"], indirect=True)
def test_copy_and_instance_on_a_full_disk(small_fs, fics_search, tmp_path):
    home, dagster_home = small_fs / "store", tmp_path / "dagster"
    assert _cli("--home", home, "sql", "SELECT 1", dagster_home=dagster_home).returncode == 0
    filler = _fill(small_fs)
    # ingest --copy onto the full disk (the instance elsewhere) ...
    r = _cli("--home", home, "ingest", "--copy", fics_search, dagster_home=dagster_home)
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert f"no space left on {small_fs}" in r.stderr
    assert list((home / "archives").iterdir()) == []
    # ... and the Dagster instance on the full disk.
    r = _cli("--home", home, "ingest", fics_search, dagster_home=small_fs / "dagster")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert f"no space left on {small_fs}" in r.stderr
    assert _leftovers(home) == []
    filler.unlink()
    r = _cli("--home", home, "ingest", "--copy", fics_search, dagster_home=small_fs / "dagster")
    assert r.returncode == 0, r.stderr
    assert f"{fics_search.name}: 606 games" in r.stdout
    assert [p.name for p in (home / "archives").iterdir()] == [fics_search.name]


def test_games_lost_in_an_unclosed_comment_are_a_note_on_the_command_line(home, capsys, tmp_path):
    from tests.pipeline.test_hostile_archives import _unclosed_archive

    text, facts = _unclosed_archive()
    path = tmp_path / "unclosed.pgn"
    path.write_text(text)
    main(["--home", str(home), "ingest", str(path)])  # the archive is ingested: no SystemExit
    out, err = capsys.readouterr()
    assert "unclosed.pgn: 3 games" in out
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "2 game(s) lost inside an unclosed { comment" in notes[0]
