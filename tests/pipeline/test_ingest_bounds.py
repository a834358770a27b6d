"""Ingest in bounded memory and readable text (issue 36): an over-long game or comment is
rejected without being held, runs of blank lines are skipped at disk speed, Windows-1252 and
UTF-16 archives decode, lower-case piece letters get a reason, killed writers' temporary files go.

The big inputs are generated streaming into tmp_path (gzip makes them small) and ingested in a
subprocess under an address-space limit a few hundred MB above what its imports take."""

import fcntl
import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
import zlib

import pyarrow.parquet as pq
import pytest

from pipeline.ingest.archive import MAX_GAME_BYTES, ArchiveError, iter_raw_games
from pipeline.ingest.ingest import IngestConfig, count_games_python_chess, ingest_archive
from pipeline.store.store import Store
from tests.pipeline.test_hostile_archives import _game, _tables

MB = 1 << 20
HEADROOM = 300 * MB
"""Address space the child may add to what its imports take: far below the inputs' sizes."""

_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    import pyarrow.parquet as pq
    from pipeline.ingest.archive import ArchiveError
    from pipeline.ingest.ingest import IngestConfig, ingest_archive
    from pipeline.store.store import Store

    def vm() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

    limit = vm() + int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    store = Store(Path(sys.argv[1])).ensure()
    key = store.add_archive(Path(sys.argv[2]))
    try:
        stats = ingest_archive(store, key, Path(sys.argv[2]), IngestConfig(workers=1))
    except ArchiveError as e:
        print(json.dumps({"error": str(e)}))
        sys.exit(0)
    games = pq.read_table(store.partition_file("games", key)).to_pylist()
    rejected = pq.read_table(store.partition_file("rejected_games", key)).to_pylist()
    print(json.dumps({
        "games": [(g["game_index"], g["event"], g["ply_count"]) for g in games],
        "rejected": [(r["game_index"], r["reason_code"], r["reason"], r["excerpt"][:200]) for r in rejected],
    }))
    """
)


def _ingest_limited(tmp_path, path, seconds: float) -> dict:
    """Ingest path in a child under RLIMIT_AS (imports + HEADROOM); its JSON answer."""
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "store"), str(path), str(HEADROOM)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    assert out.returncode == 0, out.stderr[-3000:]
    assert took < seconds, f"{took:.1f}s"
    return json.loads(out.stdout)


def _write_gz(path, parts) -> None:
    """A gzip file of the byte strings parts yields (written as they come, level 1)."""
    with gzip.open(path, "wb", compresslevel=1) as f:
        for part in parts:
            f.write(part)


def test_a_200_mb_comment_is_rejected_as_too_long_in_bounded_memory(tmp_path):
    def parts():
        yield _game(0).encode() + b"\n"
        yield _game(1, movetext="1. e4 {").encode()[:-1]
        chunk = b"x" * MB
        for _ in range(200):
            yield chunk
        yield b"} e5 *\n\n"
        yield _game(2).encode()

    path = tmp_path / "comment.pgn.gz"
    _write_gz(path, parts())
    assert path.stat().st_size < 2 * MB
    got = _ingest_limited(tmp_path, path, seconds=30)
    assert got["games"] == [[0, "game 0", 4], [2, "game 2", 4]]
    [(index, code, reason, excerpt)] = got["rejected"]
    assert (index, code) == (1, "too_long")
    assert f"over the bound of {MAX_GAME_BYTES:,} bytes" in reason and "MAX_GAME_BYTES" in reason
    # game 0 is lines 1-7 and a blank line; game 1 has five tags, a blank line, then "1. e4 {"
    assert "a '{' comment opened at line 15 is still open" in reason, reason
    assert excerpt.startswith('[Event "game 1"]')
    # python-chess counts the same three games (reading the comment in bounded pieces)
    assert count_games_python_chess(path) == 3


@pytest.fixture(scope="module")
def gigabyte_of_newlines(tmp_path_factory) -> bytes:
    """1 GiB of blank lines as one gzip member (a few MB)."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = b"\n" * (8 * MB)
    data = b"".join(comp.compress(block) for _ in range(128)) + comp.flush()
    assert len(data) < 8 * MB
    return data


@pytest.mark.slow  # a gigabyte decompressed and read: about 5 s each
def test_a_gigabyte_of_blank_lines_between_games_is_skipped_fast_in_bounded_memory(tmp_path, gigabyte_of_newlines):
    path = tmp_path / "blank.pgn.gz"
    # Three gzip members, read as one stream: a game, 1 GiB of newlines, a game.
    path.write_bytes(gzip.compress(_game(0).encode()) + gigabyte_of_newlines + gzip.compress(_game(1).encode()))
    got = _ingest_limited(tmp_path, path, seconds=30)
    assert got == {"games": [[0, "game 0", 4], [1, "game 1", 4]], "rejected": []}


@pytest.mark.slow  # a gigabyte decompressed and read: about 5 s each
def test_a_gigabyte_of_blank_lines_alone_is_no_games_found_in_seconds(tmp_path, gigabyte_of_newlines):
    path = tmp_path / "blank.pgn.gz"
    path.write_bytes(gigabyte_of_newlines)
    got = _ingest_limited(tmp_path, path, seconds=30)
    assert got == {"error": "blank.pgn.gz: no games found; is it a PGN file?"}


def test_a_game_of_many_short_lines_past_the_bound_is_rejected_and_counted(tmp_path):
    line = b"{ " + b"a" * 70 + b" }\n"
    n = MAX_GAME_BYTES // len(line) + 10
    path = tmp_path / "long.pgn"
    path.write_bytes(_game(0).encode() + b"\n" + _game(1).encode()[:-3] + line * n + b"*\n\n" + _game(2).encode())
    games, rejected, _ = _tables(path)
    assert games.column("game_index").to_pylist() == [0, 2]
    assert rejected.column("reason_code").to_pylist() == ["too_long"]
    [reason] = rejected.column("reason").to_pylist()
    size = len(_game(1).encode()[:-3]) + len(line) * n + len(b"*\n")
    assert f"the game at line 9 of the archive is {size:,} bytes long" in reason, reason
    assert "comment" not in reason.split(":")[0]  # no comment was open at the bound
    assert count_games_python_chess(path) == 3


def test_a_long_game_under_the_bound_is_kept_whole(tmp_path):
    moves = "1. e4 e5 " + "{ " + "c" * (MAX_GAME_BYTES // 2) + " } 2. Nf3 *"
    path = tmp_path / "long_ok.pgn"
    path.write_text(_game(0, movetext=moves))
    games, rejected, _ = _tables(path)
    assert games.column("ply_count").to_pylist() == [3] and rejected.num_rows == 0


# ---- text encodings ---------------------------------------------------------------------------


def test_windows_1252_names_keep_the_euro_sign_and_curly_quotes(tmp_path):
    path = tmp_path / "cp1252.pgn"
    # 0x80 euro, 0x93/0x94 curly quotes, 0x96 en dash; 0x81 is undefined in cp1252 (Latin-1 then).
    path.write_bytes(_game(0, white="Caf\x80 \x93Bob\x94 \x96 x\x81").encode("latin-1"))
    games, _, _ = _tables(path)
    assert games.column("white").to_pylist() == ["Caf\u20ac \u201cBob\u201d \u2013 x\x81"]


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_archives_read_as_their_utf8_text(tmp_path, codec):
    text = "".join(_game(i, white="Jos\u00e9 \u20ac") + "\n" for i in range(5)) + _game(5, movetext="1. e4 nn *")
    utf8 = tmp_path / "utf8.pgn"
    utf8.write_text(text, encoding="utf-8")
    path = tmp_path / f"{codec}.pgn.gz"
    bom = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff"}.get(codec, b"")  # "utf-16" writes its own
    path.write_bytes(gzip.compress(bom + text.encode(codec)))
    expected = [t.to_pylist() for t in _tables(utf8)[:2]]
    assert [t.to_pylist() for t in _tables(path)[:2]] == expected
    assert len(expected[0]) == 5 and len(expected[1]) == 1
    assert count_games_python_chess(path) == count_games_python_chess(utf8) == 6


def test_utf16_without_a_byte_order_mark_is_still_refused_as_binary(tmp_path):
    path = tmp_path / "nobom.pgn"
    path.write_bytes(_game(0).encode("utf-16-le"))
    with pytest.raises(ArchiveError, match="not a PGN text file"):
        list(iter_raw_games(path))


# ---- lower-case piece letters -----------------------------------------------------------------


@pytest.mark.parametrize(
    "movetext, reason, ply",
    [
        (
            "1. e4 e5 2. nf3 Nc6 *",
            "move 'nf3' at ply 3: piece letters must be upper case (N, B, R, Q, K); write 'Nf3'",
            2,
        ),
        ("1. e4 e5 2. Nf3 qxd5+ *", "move 'qxd5+' at ply 4: piece letters must be upper case", 3),
        ("1. e4 nn 2. Nf3 *", "unrecognised text 'nn' at ply 2 of the movetext", 1),
    ],
)
def test_lower_case_piece_letters_are_rejected_saying_what_is_wrong(tmp_path, movetext, reason, ply):
    path = tmp_path / "lower.pgn"
    path.write_text(_game(0) + "\n" + _game(1, movetext=movetext))
    games, rejected, _ = _tables(path)
    assert games.num_rows == 1
    [row] = rejected.to_pylist()
    assert row["reason_code"] == "unparsable_move" and row["reason"].startswith(reason), row["reason"]
    assert row["ply"] == ply


# ---- temporary files of killed writers --------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pipeline.ingest.ingest import SCHEMAS
    from pipeline.store.store import Store
    from pipeline.store.store_files import AtomicParquetWriter
    store = Store(Path(sys.argv[1]))
    w = AtomicParquetWriter(store.partition_file("positions", sys.argv[2]), SCHEMAS["positions"])
    print("writing", flush=True)
    time.sleep(60)
    """
)


def _writer(store: Store, key: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(store.root), key], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    return p


def test_a_killed_writers_temp_file_in_another_partition_goes_a_live_writers_stays(tmp_path):
    store = Store(tmp_path / "store").ensure()
    killed, live = _writer(store, "killed"), _writer(store, "live")
    try:
        killed.kill()  # kill -9 while it writes
        killed.wait()
        tmps = {k: list(store.partition_dir("positions", k).glob(".*.tmp")) for k in ("killed", "live")}
        assert [len(v) for v in tmps.values()] == [1, 1]
        old = time.time() - 3600  # both older than any writer's start-up window
        for [p] in tmps.values():
            os.utime(p, (old, old))
        path = tmp_path / "other.pgn"
        path.write_text(_game(0))
        key = store.add_archive(path)
        ingest_archive(store, key, path, IngestConfig(workers=1))
        assert not tmps["killed"][0].exists()
        assert tmps["live"][0].exists()
        with open(tmps["live"][0], "rb") as f, pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its writer still holds it
    finally:
        live.kill()
        live.wait()
    assert pq.read_metadata(store.partition_file("games", key)).num_rows == 1
