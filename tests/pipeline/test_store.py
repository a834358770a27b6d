from pathlib import Path

import pytest

from pipeline.store.store import Store
from pipeline.store.store_archives import partition_key


@pytest.mark.parametrize(
    "rel",
    [
        "games.pgn.zst",
        "a b.pgn",
        "a_b.pgn",
        "../../etc/passwd.pgn",
        "x/../../y.pgn",
        "dir/sub/f.pgn",
        "dir__sub__f.pgn",
        "ünïcode.pgn",
        "a,b|c[d].pgn",
        "...pgn",
        "a...b.pgn",
        "x" * 300 + ".pgn",
    ],
)
def test_partition_keys_are_safe(rel):
    key = partition_key(rel)
    assert key and len(key) <= 140
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in key)
    assert "/" not in key and ".." not in key and not key.startswith(".")


def test_partition_keys_do_not_clash():
    names = [
        "a b.pgn",
        "a_b.pgn",
        "a?b.pgn",
        "dir/sub/f.pgn",
        "dir__sub__f.pgn",
        "dir/sub__f.pgn",
        "g.pgn",
        "g.pgn.zst",
        "G.pgn",
    ]
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

    from pipeline.store.store_files import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "t" / "data.parquet") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "t" / "data.parquet").stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["data.parquet"]


# Archives are identified by content as well as name (issue 13, item 5) ------------------

PGN = '[Event "e"]\n[Result "*"]\n\n1. e4 e5 *\n'


def test_the_same_content_added_again_is_the_same_archive(tmp_path):
    store = Store(tmp_path / "store").ensure()
    src = tmp_path / "in" / "big.pgn"
    src.parent.mkdir()
    src.write_text(PGN)
    key = store.add_archive(src, copy=True)
    # `ingest --copy` twice, and the same bytes under another name, link or copy.
    assert store.add_archive(src, copy=True) == key
    other = tmp_path / "in" / "renamed.pgn"
    other.write_text(PGN)
    assert store.add_archive(other) == key
    assert store.add_archive(other, copy=True) == key
    assert sorted(p.name for p in store.archives_dir.iterdir()) == ["big.pgn"]
    # A copy dropped straight into the archives folder is no new partition either.
    (store.archives_dir / "again.pgn").write_text(PGN)
    scan = store.scan_archives()
    assert list(scan.archives) == [key]
    assert scan.duplicates == {store.archives_dir / "again.pgn": key}
    # A changed file under the same name is the same partition, changed.
    before = scan.hashes[key]
    (store.archives_dir / "big.pgn").write_text(PGN + "\n" + PGN)
    scan = store.scan_archives()
    assert key in scan.archives and scan.hashes[key] != before
    # ... and then the dropped copy (the old content) is an archive of its own.
    assert sorted(scan.archives) == ["again.pgn", key]


def test_a_renamed_archive_keeps_its_partition(tmp_path):
    store = Store(tmp_path / "store").ensure()
    (store.archives_dir / "a.pgn").write_text(PGN)
    [key] = store.find_archives()
    (store.archives_dir / "a.pgn").rename(store.archives_dir / "b.pgn")
    assert store.find_archives() == {key: store.archives_dir / "b.pgn"}


def test_a_killed_copy_leaves_no_archive_and_its_temp_file_goes_later(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    store = Store(tmp_path / "store").ensure()
    big = tmp_path / "big.pgn"
    with open(big, "wb") as f:  # large enough that the copy is caught in the middle
        f.write(PGN.encode() * (400_000_000 // len(PGN)))
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pipeline.store.store import Store; "
            "Store(__import__('pathlib').Path(sys.argv[1])).add_archive(sys.argv[2], copy=True)",
            str(store.root),
            str(big),
        ]
    )
    deadline = time.monotonic() + 60
    while not list(store.archives_dir.glob(".*.tmp")):
        assert child.poll() is None and time.monotonic() < deadline, "the copy ended before it could be killed"
        time.sleep(0.002)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    big.unlink()
    [tmp] = list(store.archives_dir.glob(".*.tmp"))
    assert store.find_archives() == {}  # no archive, so no partition, from the killed copy
    # The dead writer's temp file goes on the next add (once it is old enough to be sure no
    # writer is about to lock it); a live writer's temp file stays.
    from pipeline.store.store_files import atomic_path

    old = time.time() - 120
    os.utime(tmp, (old, old))
    with atomic_path(store.archives_dir / "live.pgn") as live:
        os.utime(live, (old, old))
        small = tmp_path / "small.pgn"
        small.write_text(PGN)
        store.add_archive(small, copy=True)
        assert sorted(store.archives_dir.glob(".*.tmp")) == [live]
    assert sorted(p.name for p in store.archives_dir.iterdir()) == ["live.pgn", "small.pgn"]


# Symlink loops (issue 13, item 6) -----------------------------------------------------


def test_symlink_loops_are_walked_once_and_each_file_counted_once(tmp_path):
    import json
    import subprocess
    import sys
    import time

    store = Store(tmp_path / "store").ensure()
    (store.archives_dir / "x.pgn").write_text(PGN)
    (store.archives_dir / "sub").mkdir()
    (store.archives_dir / "sub" / "y.pgn").write_text(PGN + "\n" + PGN)
    (store.archives_dir / "loop").symlink_to(".")
    (store.archives_dir / "sub" / "up").symlink_to("..")
    (store.archives_dir / "hard.pgn").hardlink_to(store.archives_dir / "x.pgn")
    start = time.monotonic()
    # In a child process with a timeout: a walk that follows the loops runs for minutes.
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, json; from pathlib import Path; from pipeline.store.store import Store; "
            "print(json.dumps(sorted(Store(Path(sys.argv[1])).find_archives())))",
            str(store.root),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # hard.pgn and x.pgn are one real file: it counts once, under the first name in order.
    assert json.loads(out.stdout) == sorted(["hard.pgn", partition_key("sub/y.pgn")])
    assert time.monotonic() - start < 20


# Names (issue 13, item 14) ----------------------------------------------------------


def test_copy_of_a_249_character_name(tmp_path):
    store = Store(tmp_path / "store").ensure()
    src = tmp_path / ("n" * 245 + ".pgn")
    src.write_text(PGN)
    key = store.add_archive(src, copy=True)
    assert store.find_archives() == {key: store.archives_dir / src.name}
    # A different file of the same long name gets a numbered name that still fits.
    other = tmp_path / "o" / src.name
    other.parent.mkdir()
    other.write_text(PGN + "\n" + PGN)
    key2 = store.add_archive(other, copy=True)
    assert key2 != key and len(store.find_archives()) == 2
    assert all(len(p.name.encode()) <= 255 for p in store.archives_dir.iterdir())


def test_a_link_named_pgn_to_a_file_with_another_name(tmp_path):
    store = Store(tmp_path / "store").ensure()
    data = tmp_path / "download.txt"
    data.write_text(PGN)
    link = tmp_path / "x.pgn"
    link.symlink_to(data)
    key = store.add_archive(link)
    assert key == "x.pgn" and store.archive_path(key).read_text() == PGN
    import pytest as _pytest

    from pipeline.store.store_archives import ArchiveNameError

    with _pytest.raises(ArchiveNameError, match="not an archive name"):
        store.add_archive(data)


def test_stale_progress_files_go_and_live_ones_stay(tmp_path):
    import os
    import subprocess
    import sys

    from pipeline.store.store import remove_stale_progress_files

    store = Store(tmp_path / "store").ensure()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    (store.root / "labels").mkdir()
    (store.root / "labels" / f".progress-{dead_pid}.json").write_text("{}")
    (store.root / "labels" / f".progress-{os.getpid()}.json").write_text("{}")
    assert remove_stale_progress_files(store) == 1
    assert [p.name for p in (store.root / "labels").iterdir()] == [f".progress-{os.getpid()}.json"]


def _add_copy(root: str, source: str, start) -> str:
    start.wait()
    return Store(Path(root)).add_archive(Path(source), copy=True)


def test_concurrent_copies_of_different_files_under_one_name_keep_every_file(tmp_path):
    """Six processes add six different `big.pgn` at once: six archives, each file's bytes
    kept (before the add lock, two could take one name and one copy replaced the other)."""
    import multiprocessing

    store = Store(tmp_path / "store").ensure()
    sources = []
    for i in range(6):
        (tmp_path / f"d{i}").mkdir()
        path = tmp_path / f"d{i}" / "big.pgn"
        path.write_text(f'[Event "copy {i}"]\n[Result "*"]\n\n1. e4 *\n' * 20000)
        sources.append(path)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Manager().Barrier(len(sources))
    # close + join, not the context manager's terminate(): terminate() kills idle workers with
    # SIGTERM, and where the test runner's parent ignores SIGTERM (inherited), it waits forever.
    pool = ctx.Pool(len(sources))
    try:
        keys = pool.starmap(_add_copy, [(str(store.root), str(p), start) for p in sources])
    finally:
        pool.close()
        pool.join()
    assert len(set(keys)) == len(sources)
    kept = {store.archive_path(k).read_bytes() for k in keys}
    assert kept == {p.read_bytes() for p in sources}


def test_a_scan_with_a_hashing_budget_leaves_new_files_for_the_next_scan(tmp_path):
    store = Store(tmp_path / "store").ensure()
    for i in range(3):
        (store.archives_dir / f"a{i}.pgn").write_text(f'[Event "{i}"]\n[Result "*"]\n\n1. e4 *\n')
    first = store.scan_archives(hash_budget_s=0)
    assert first.unhashed == 3 and first.archives == {}
    full = store.scan_archives()
    assert full.unhashed == 0 and sorted(full.archives) == ["a0.pgn", "a1.pgn", "a2.pgn"]
    cached = store.scan_archives(hash_budget_s=0)  # hashes already made are kept: nothing to hash
    assert cached.unhashed == 0 and cached.hashes == full.hashes
