import pytest

from pipeline.store import Store, partition_key


@pytest.mark.parametrize("rel", [
    "games.pgn.zst", "a b.pgn", "a_b.pgn", "../../etc/passwd.pgn", "x/../../y.pgn", "dir/sub/f.pgn",
    "dir__sub__f.pgn", "ünïcode.pgn", "a,b|c[d].pgn", "...pgn", "a...b.pgn", "x" * 300 + ".pgn",
])
def test_partition_keys_are_safe(rel):
    key = partition_key(rel)
    assert key and len(key) <= 140
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in key)
    assert "/" not in key and ".." not in key and not key.startswith(".")


def test_partition_keys_do_not_clash():
    names = ["a b.pgn", "a_b.pgn", "a?b.pgn", "dir/sub/f.pgn", "dir__sub__f.pgn", "dir/sub__f.pgn",
             "g.pgn", "g.pgn.zst", "G.pgn"]
    keys = [partition_key(n) for n in names]
    assert len(set(keys)) == len(keys)
    assert partition_key("games.pgn.zst") == "games.pgn.zst"  # safe names stay readable


def test_add_archive_links_once_and_numbers_same_name_files(tmp_path):
    store = Store(tmp_path / "store").ensure()
    a = tmp_path / "one" / "x.pgn"
    b = tmp_path / "two" / "x.pgn"
    for p, t in ((a, "1"), (b, "2")):
        p.parent.mkdir()
        p.write_text(t)
    ka = store.add_archive(a)
    assert store.add_archive(a) == ka
    kb = store.add_archive(b)
    assert ka != kb
    found = store.find_archives()
    assert found[ka].read_text() == "1" and found[kb].read_text() == "2"


def test_atomic_files_get_the_mode_open_would_give_not_mkstemps_0600(tmp_path):
    import os
    import stat

    from pipeline.store import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "t" / "data.parquet") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "t" / "data.parquet").stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["data.parquet"]
