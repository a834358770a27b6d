"""The ingest asset on hostile archives written by the tests (issue 13, items 15 and 16)."""

import gzip
import logging

import dagster as dg
import pyarrow.parquet as pq

from pipeline.ingest.archive import MAX_GAME_BYTES
from pipeline.store.store import Store
from tests.pipeline.test_hostile_archives import BOM, _game, _unclosed_archive
from tests.stores import materialize_archive


def _games_metadata(result):
    return next(
        m.metadata
        for m in result.asset_materializations_for_node("archive_tables")
        if m.asset_key == dg.AssetKey("games")
    )


def test_games_lost_in_an_unclosed_comment_are_logged_and_fail_the_reconciliation_as_a_warning(instance, tmp_path):
    text, facts = _unclosed_archive()
    path = tmp_path / "unclosed.pgn"
    path.write_text(text)
    store = Store(tmp_path / "store").ensure()
    result = materialize_archive(instance, store, store.add_archive(path))
    assert result.success
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "reconciles_with_file"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    meta = {k: v.value for k, v in check.metadata.items()}
    assert meta["games_in_unclosed_comments"] == 2
    assert meta["games"] + meta["rejected"] == meta["games_in_file (python-chess)"] == 3
    table = _games_metadata(result)["archive_warnings"].value
    assert f"| {facts['open']} |" in table and f"line {facts['close']}" in table
    logged = [e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING]
    assert any(f"line {facts['open']}: a '{{' comment" in m and "not closed" in m for m in logged), logged


def test_an_archive_with_a_byte_order_mark_reconciles(instance, tmp_path):
    path = tmp_path / "bom.pgn"
    path.write_bytes(BOM + "".join(_game(i) + "\n" for i in range(3)).encode())
    store = Store(tmp_path / "store").ensure()
    result = materialize_archive(instance, store, store.add_archive(path))
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "reconciles_with_file"]
    meta = {k: v.value for k, v in check.metadata.items()}
    assert check.passed and (meta["games"], meta["rejected"]) == (3, 0), meta
    assert "archive_warnings" not in _games_metadata(result)


def test_a_truncated_bz2_fails_the_run_with_the_one_clear_line_the_cli_prints(instance, tmp_path):
    import bz2

    from cli import failure_message

    blob = bz2.compress("".join(_game(i) + "\n" for i in range(3000)).encode())
    path = tmp_path / "cut.pgn.bz2"
    path.write_bytes(blob[: len(blob) // 2])
    store = Store(tmp_path / "store").ensure()
    result = materialize_archive(instance, store, store.add_archive(path), raise_on_error=False)
    assert not result.success
    message = failure_message(result)
    assert message.startswith("cut.pgn.bz2: bzip2 stream is truncated") and "download or copy it again" in message
    assert "Error" not in message and "\n" not in message  # neither EOFError nor the ArchiveError class path


def test_an_over_long_game_is_rejected_and_the_archive_reconciles(instance, tmp_path):
    comment = b"x" * (MAX_GAME_BYTES + 1)
    path = tmp_path / "long.pgn.gz"
    path.write_bytes(
        gzip.compress(_game(0).encode() + b"\n" + _game(1, movetext="1. e4 {").encode()[:-1] + comment + b"} *\n\n")
    )
    store = Store(tmp_path / "store").ensure()
    key = store.add_archive(path)
    result = materialize_archive(instance, store, key)
    assert result.success
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "reconciles_with_file"]
    meta = {k: v.value for k, v in check.metadata.items()}
    assert check.passed and (meta["games"], meta["rejected"], meta["games_in_file (python-chess)"]) == (1, 1, 2)
    [row] = pq.read_table(store.partition_file("rejected_games", key)).to_pylist()
    assert row["reason_code"] == "too_long" and f"{MAX_GAME_BYTES:,} bytes" in row["reason"]
