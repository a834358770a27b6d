"""A store on S3, against a real S3-compatible server on loopback (moto's server mode, started
once for this module by deploy.servers.moto_s3): ingest, views, datasets and labels give what a
local store gives; uploads are atomic; leases exclude, expire and are taken over; a wrong
endpoint, credentials or bucket is one line naming the setting, with nothing written."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deploy.servers import free_port, moto_s3
from pipeline.store import storage, storage_leases, storage_paths
from pipeline.store.duck import QueryRefused, query
from pipeline.store.store import Store
from pipeline.store.store_files import AtomicParquetWriter, atomic_path

pytestmark = pytest.mark.slow  # a server of its own, and real archives

ROOT = Path(__file__).resolve().parents[2]
SMALL_ARCHIVE = "fics_standard_2015-12_rajpurkar_medium_test.pgn.zst"


@pytest.fixture(scope="module")
def endpoint():
    with moto_s3() as url:
        yield url


def _s3_env(monkeypatch, tmp_path: Path, url: str) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CHESS_PIPELINE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", url)
    monkeypatch.setenv("CHESS_PIPELINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))


@pytest.fixture
def bucket(endpoint, monkeypatch, tmp_path) -> str:
    """A new empty bucket on the module's server, the environment pointing at it."""
    _s3_env(monkeypatch, tmp_path, endpoint)
    name = f"t-{uuid.uuid4().hex[:16]}"
    storage.client().create_bucket(Bucket=name)
    return name


def keys(bucket: str, prefix: str = "") -> list[str]:
    return [o["Key"] for o in storage.list_objects(storage_paths.ObjectPath(bucket, prefix))]


# Ingest, views, datasets: the same as a local store ------------------------------------------


def test_an_archive_ingested_into_s3_gives_the_local_store_tables(bucket, shared_data, tmp_path):
    import dagster as dg

    from pipeline.datasets.datasets import SPLITS, build_dataset, dataset_dir
    from tests.stores import materialize_archive

    archive = shared_data / "pgn" / SMALL_ARCHIVE
    s3 = Store(f"s3://{bucket}/stores/main").ensure()
    local = Store(tmp_path / "local").ensure()
    for st in (s3, local):
        key = st.add_archive(archive, copy=True)
        assert st.add_archive(archive, copy=True) == key  # the same bytes are one archive
        result = materialize_archive(dg.DagsterInstance.ephemeral(), st, key)
        assert result.success
    # The archive and every table are objects under the prefix; nothing of DuckDB or Dagster is.
    names = keys(bucket, "stores/main")
    assert f"stores/main/archives/{SMALL_ARCHIVE}" in names
    for table in ("games", "rejected_games", "positions"):
        assert f"stores/main/{table}/archive={key}/data.parquet" in names
    assert not [n for n in names if "duckdb" in n or "dagster" in n or n.endswith(".tmp")]
    index = json.loads(storage.get(s3.index_path).data)
    assert index["keys"][key]["path"] == SMALL_ARCHIVE

    for table, order in (
        ("games", "game_id"),
        ("rejected_games", "game_index"),
        ("positions", "game_id, ply"),
    ):
        sql = f"SELECT * FROM {table} ORDER BY {order}"
        a, b = query(s3, sql), query(local, sql)
        assert a.num_rows == b.num_rows and (a.num_rows > 0 or table == "rejected_games"), table
        assert a.equals(b), table
    assert query(s3, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == 978
    assert s3.duckdb_path.is_file() and s3.local_dir in s3.duckdb_path.parents

    # A dataset (its target from the games: no engine needed) is the same rows on both stores.
    for st in (s3, local):
        stats = build_dataset(st, "lubeck_wdl")
        assert sum(stats.rows.values()) > 0 and set(stats.overlap.values()) == {0}
    for split in SPLITS:
        fs, where = storage.read_filesystem(dataset_dir(s3, "lubeck_wdl") / f"{split}.parquet")
        a = pq.read_table(where, filesystem=fs).drop_columns(["materialised_at"])
        b = pq.read_table(dataset_dir(local, "lubeck_wdl") / f"{split}.parquet").drop_columns(["materialised_at"])
        assert a.equals(b), split


def test_an_archive_in_parts_on_s3_is_its_local_parts_and_a_reingest_in_fewer_leaves_none_over(
    bucket, shared_data, tmp_path
):
    from pipeline.ingest.book import write_book
    from pipeline.ingest.ingest import TABLES, IngestConfig, ingest_archive

    archive = shared_data / "pgn" / SMALL_ARCHIVE
    s3 = Store(f"s3://{bucket}/stores/parts").ensure()
    local = Store(tmp_path / "local").ensure()
    small = IngestConfig(workers=1, chunk_games=100, batch_games=100, part_positions=20_000)
    for st in (s3, local):
        assert ingest_archive(st, "a", archive, small).parts >= 3
        write_book(st, "a")  # read from every part (downloaded, on S3)
    for table in (*TABLES, "position_book"):
        files = [storage.read_bytes(p) for p in s3.partition_files(table, "a")]
        assert files == [p.read_bytes() for p in local.partition_files(table, "a")], table
    ingest_archive(s3, "a", archive, IngestConfig(workers=1, chunk_games=100, batch_games=100))
    for table in TABLES:
        assert [p.name for p in s3.partition_files(table, "a")] == ["data.parquet"], table
    assert query(s3, "SELECT count(*) FROM positions").equals(query(local, "SELECT count(*) FROM positions"))


def test_views_read_new_partitions_by_glob_and_queries_cannot_write(bucket):
    from pipeline.ingest.games import GAMES_SCHEMA

    st = Store(f"s3://{bucket}/p").ensure()
    assert query(st, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == 0
    row = {name: None for name in GAMES_SCHEMA.names}
    table = pa.Table.from_pylist([{**row, "game_id": 7, "archive": "a", "game_index": 0}], schema=GAMES_SCHEMA)
    with _writer(st.partition_file("games", "a"), GAMES_SCHEMA) as w:
        w.write(table)
    # The DuckDB file was built before: its glob sees the new object (no listing cache).
    assert query(st, "SELECT game_id FROM games").column("game_id").to_pylist() == [7]
    with pytest.raises(QueryRefused):
        query(st, f"COPY (SELECT 1) TO 's3://{bucket}/p/games/archive=x/evil.parquet'")
    assert not [k for k in keys(bucket, "p") if "evil" in k]


class _writer:
    def __init__(self, dest, schema):
        self.w = AtomicParquetWriter(dest, schema)

    def __enter__(self):
        return self.w

    def __exit__(self, kind, e, tb):
        if e is None:
            self.w.commit()
        else:
            self.w.abort(e)


# Atomic uploads ------------------------------------------------------------------------------


def test_an_exception_while_writing_uploads_nothing(bucket):
    st = Store(f"s3://{bucket}/p").ensure()
    dest = st.root / "games" / "archive=a" / "data.parquet"
    with pytest.raises(RuntimeError, match="boom"), atomic_path(dest) as tmp:
        pq.write_table(pa.table({"x": [1, 2, 3]}), tmp)
        raise RuntimeError("boom")
    w = AtomicParquetWriter(dest, pa.schema([("x", pa.int64())]))
    w.write(pa.table({"x": [1]}))
    w.abort(RuntimeError("stopped"))
    assert keys(bucket) == []
    assert not list(storage.spool_dir().glob(".*.tmp"))  # nor a spool file left behind
    with atomic_path(dest) as tmp:
        pq.write_table(pa.table({"x": [1, 2, 3]}), tmp)
    fs, where = storage.read_filesystem(dest)
    assert pq.read_table(where, filesystem=fs).column("x").to_pylist() == [1, 2, 3]


UPLOADER = """
import sys, time
from pathlib import Path
from pipeline.store import storage
from pipeline.store.store_files import atomic_path
storage.MULTIPART_THRESHOLD = 5 << 20  # S3's smallest part, so a 24 MB file goes up in parts
dest = storage.parse_root(sys.argv[1])

def stall(**kwargs):
    print("completing", flush=True)  # every part is up: the parent kills us here
    time.sleep(600)

storage.client().meta.events.register("before-call.s3.CompleteMultipartUpload", stall)
with atomic_path(dest) as tmp:
    Path(tmp).write_bytes(bytes(range(256)) * (24 << 12))
"""


def test_an_upload_killed_before_it_completes_leaves_no_object(bucket):
    dest = f"s3://{bucket}/p/positions/archive=a/data.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-c", UPLOADER, dest], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = _readline(proc, 120)
        assert line == "completing", line
        uploads = storage.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        parts = storage.client().list_parts(Bucket=bucket, Key=uploads[0]["Key"], UploadId=uploads[0]["UploadId"])
        assert len(parts["Parts"]) == 5  # 24 MB in 5 MB parts, all up
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert keys(bucket) == []  # the whole object or nothing: nothing
    assert storage.head(storage.parse_root(dest)) is None
    # The killed writer's spool file is unlocked, so the next writer's sweep removes it.
    from pipeline.store.storage import remove_stale_tmp

    assert remove_stale_tmp(storage.spool_dir()) == 1


# Leases --------------------------------------------------------------------------------------


def test_of_contenders_for_a_lease_exactly_one_holds_it(bucket):
    st = Store(f"s3://{bucket}/p").ensure()

    def contend(name: str, barrier: threading.Barrier, held: list[bool], release: threading.Event) -> None:
        barrier.wait()
        with st.lease(name, ttl_s=30) as lease:
            held.append(bool(lease))
            release.wait(10)

    for round_ in range(3):
        barrier = threading.Barrier(4)
        held: list[bool] = []
        release = threading.Event()
        threads = [threading.Thread(target=contend, args=(f"shard-{round_}", barrier, held, release)) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(held) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        release.set()
        for t in threads:
            t.join()
        assert sorted(held) == [False, False, False, True]
    assert keys(bucket, "p/.leases") == []  # released: deleted


def test_a_local_lease_is_an_flock_with_the_same_interface(tmp_path):
    st = Store(tmp_path / "store").ensure()
    with st.lease("shard-1", ttl_s=5) as a:
        with st.lease("shard-1", ttl_s=5) as b:
            assert a and not b
        with st.lease("shard-2", ttl_s=5) as c:
            assert c
    with st.lease("shard-1", ttl_s=5) as d:
        assert d


HOLDER = """
import sys, time
from pipeline.store.store import Store
st = Store(sys.argv[1])
with st.lease("shard-7", ttl_s=float(sys.argv[2])) as lease:
    print("held" if lease else "busy", flush=True)
    while not lease.lost:
        time.sleep(0.05)
    print("lost", flush=True)
    time.sleep(600)
"""


def _readline(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    """The child's next stdout line, or '' when none comes within timeout."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().strip() if ready else ""


def _holder(root: str, ttl: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, root, str(ttl)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = _readline(proc)
    assert line == "held", line
    return proc


def _try(st: Store, name: str = "shard-7", ttl: float = 3.0) -> bool:
    with st.lease(name, ttl_s=ttl) as lease:
        return bool(lease)


def test_a_live_holder_keeps_its_lease_and_a_killed_one_loses_it_after_the_ttl(bucket):
    root = f"s3://{bucket}/p"
    st = Store(root).ensure()
    ttl = 3.0
    proc = _holder(root, ttl)
    try:
        # Renewed every ttl/3: still held well past its ttl.
        end = time.monotonic() + 2 * ttl
        while time.monotonic() < end:
            assert not _try(st)
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        killed = time.monotonic()
        assert not _try(st)  # not before its ttl has run out
        taken = None
        while time.monotonic() - killed < 3 * ttl:
            if _try(st):
                taken = time.monotonic() - killed
                break
            time.sleep(0.25)
        assert taken is not None, "the killed holder's lease was never taken over"
        assert taken >= ttl - 1.5  # (Last-Modified counts whole seconds)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stalled_holder_is_taken_over_and_learns_it_lost_the_lease(bucket):
    root = f"s3://{bucket}/p"
    st = Store(root).ensure()
    ttl = 2.0
    proc = _holder(root, ttl)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # a worker stuck (swapping, paused VM): no renewals
        deadline = time.monotonic() + 5 * ttl
        with st.lease("shard-7", ttl_s=30, wait=True, poll_s=0.25) as mine:
            assert mine and time.monotonic() < deadline
            os.kill(proc.pid, signal.SIGCONT)
            # Its next renewal is refused (If-Match on an ETag that is gone): it says so.
            assert _readline(proc, 10 * ttl) == "lost"
            assert mine and not mine.lost  # and the new holder still holds it
            body = json.loads(storage.get(storage_leases.lease_key(st.root, "shard-7")).data)
            assert body["owner"] == mine.owner
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()


def test_downloads_of_a_missing_object_say_so_and_a_replaced_one_gives_its_new_bytes(bucket):
    """local_copy and cached_copy: a missing object is FileNotFoundError naming it; a replaced
    object is read again under its new ETag (the old version's cached file is not served)."""
    missing = storage_paths.ObjectPath(bucket, "p/none.bin")
    with pytest.raises(FileNotFoundError, match="p/none.bin: no such object"):
        with storage.local_copy(missing):
            pass
    with pytest.raises(FileNotFoundError, match="p/none.bin: no such object"):
        storage.cached_copy(missing)
    obj = storage_paths.ObjectPath(bucket, "p/data.bin")
    storage.put(obj, b"first")
    with storage.local_copy(obj) as local:
        assert local.read_bytes() == b"first"
    assert storage.cached_copy(obj).read_bytes() == b"first"
    storage.put(obj, b"second version")
    assert storage.cached_copy(obj).read_bytes() == b"second version"


def test_a_holder_whose_renewals_fail_for_a_ttl_counts_its_lease_lost(bucket, monkeypatch):
    """Renewals that keep failing (the server unreachable) for a whole ttl: another worker may
    take the lease over from then on, so the holder must count it lost (and stop writing)
    rather than retry forever while still believing it holds the lease."""
    st = Store(f"s3://{bucket}/p").ensure()
    url = os.environ["CHESS_PIPELINE_S3_ENDPOINT"]
    ttl = 1.5
    with st.lease("shard-7", ttl_s=ttl) as lease:
        assert lease
        monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens
        deadline = time.monotonic() + 8 * ttl
        while not lease.lost and time.monotonic() < deadline:
            time.sleep(0.1)
        lost = lease.lost
        monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", url)
    assert lost and not lease
    with pytest.raises(storage_leases.LeaseLost):
        lease.check()


def test_the_archive_index_is_written_only_over_the_version_read(bucket, tmp_path):
    st = Store(f"s3://{bucket}/p").ensure()
    pgn = tmp_path / "a.pgn"
    pgn.write_text('[Event "x"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
    key = st.add_archive(pgn)
    index, etag = st._read_index()
    storage.put(st.index_path, json.dumps({**index, "other": 1}).encode())  # another writer, meanwhile
    with pytest.raises(storage.PreconditionFailed):
        st._write_index({**index, "mine": 1}, etag)
    assert json.loads(storage.get(st.index_path).data)["other"] == 1  # theirs was kept
    assert st.scan_archives().archives == {key: st.archives_dir / "a.pgn"}


# Bad settings: one line naming the setting, nothing written ----------------------------------


def _cli(args: list[str]) -> str:
    """The CLI's exit message (what it prints on stderr) for args; it must fail."""
    from cli import main

    with pytest.raises(SystemExit) as e:
        main(args)
    message = str(e.value.code)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def _nothing_local(tmp_path: Path) -> None:
    assert not (tmp_path / "cache").exists() and not (tmp_path / "dagster").exists()


def test_a_missing_bucket_is_one_line_and_nothing_is_written(bucket, tmp_path, shared_data):
    for args in (["sql", "SELECT 1"], ["ingest", str(shared_data / "pgn" / SMALL_ARCHIVE)]):
        message = _cli(["--home", "s3://no-such-bucket-here/p", *args])
        assert "s3://no-such-bucket-here: the bucket 'no-such-bucket-here' does not exist" in message
        assert "--home or CHESS_PIPELINE_HOME" in message
    assert keys(bucket) == []
    names = [b["Name"] for b in storage.client().list_buckets()["Buckets"]]
    assert "no-such-bucket-here" not in names
    _nothing_local(tmp_path)


def test_an_unreachable_endpoint_is_one_line_naming_the_endpoint_setting(bucket, tmp_path, monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    message = _cli(["--home", f"s3://{bucket}/p", "sql", "SELECT 1"])
    assert f"cannot reach the S3 server at http://127.0.0.1:{port}" in message
    assert "check CHESS_PIPELINE_S3_ENDPOINT" in message
    assert time.monotonic() - start < 30
    _nothing_local(tmp_path)


def _moto_auth(url: str, free_requests: bytes) -> None:
    """Switch moto's authentication on after this many requests (its /moto-api/reset-auth)."""
    request = urllib.request.Request(
        f"{url}/moto-api/reset-auth", data=free_requests, method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(request, timeout=10).read()


def test_refused_credentials_are_one_line_naming_the_credential_settings(tmp_path, monkeypatch):
    # A server of its own: authentication is switched on for the whole server.
    with moto_s3() as url:
        _s3_env(monkeypatch, tmp_path, url)
        storage.client().create_bucket(Bucket="guarded-bucket")
        _moto_auth(url, b"0")  # from now on a key must exist in moto's IAM
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG0")
        message = _cli(["--home", "s3://guarded-bucket/p", "sql", "SELECT 1"])
        assert "refused the credentials" in message and "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message
        _nothing_local(tmp_path)
        _moto_auth(url, b"1000000000")  # off again, to look
        assert storage.client().list_objects_v2(Bucket="guarded-bucket").get("KeyCount") == 0


def test_labels_on_s3_are_the_local_stores_labels(bucket, shared_data, stockfish, tmp_path):
    from pipeline.ingest.ingest import IngestConfig, ingest_archive
    from pipeline.labels.labels import label_store
    from pipeline.labels.pool import EnginePool
    from pipeline.labels.setting import LabelRun
    from pipeline.labels.uci import Limit
    from tests.stores import first_games

    pgn = tmp_path / "ten.pgn"
    first_games(shared_data / "pgn" / SMALL_ARCHIVE, 10, pgn)
    stores = (Store(f"s3://{bucket}/p").ensure(), Store(tmp_path / "local").ensure())
    for st in stores:
        key = st.add_archive(pgn)
        with st.local_archive(key) as path:
            ingest_archive(st, key, path, IngestConfig(workers=1))
        with EnginePool(stockfish, workers=2) as pool:
            stats = label_store(st, pool, LabelRun(limit=Limit("depth", 4)))
        assert stats.labelled > 300 and not stats.shards_busy and stats.parts_written
    sql = "SELECT position_key, fen, cp, mate, best_move, depth FROM labels ORDER BY position_key, fen"
    a, b = (query(st, sql) for st in stores)
    assert a.num_rows == b.num_rows and a.equals(b)
    assert query(stores[0], "SELECT count(*) AS n FROM labels GROUP BY position_key, fen HAVING n > 1").num_rows == 0
    names = keys(bucket, "p")
    assert [n for n in names if n.startswith("p/labels/") and n.endswith(".parquet")]
    assert not [n for n in names if "/.leases/" in n]  # every shard's lease released


def test_no_credentials_at_all_is_one_line_naming_them(bucket, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    message = _cli(["--home", f"s3://{bucket}/p", "sql", "SELECT 1"])
    assert message.endswith("no S3 credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    _nothing_local(tmp_path)


def test_a_second_writer_of_a_partition_waits_for_the_first(bucket):
    st = Store(f"s3://{bucket}/p").ensure()
    order: list[str] = []
    told: list[str] = []
    first_in = threading.Event()

    def first():
        with st.partition_lock("a"):
            first_in.set()
            order.append("first in")
            time.sleep(2.0)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(20)
    with st.partition_lock("a", on_wait=told.append):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"]
    assert len(told) == 1 and "partition-a is held by another worker" in told[0]


def test_two_adders_of_different_files_with_one_name_get_two_archives(bucket, tmp_path):
    st = Store(f"s3://{bucket}/p").ensure()
    files = []
    for i in range(2):
        folder = tmp_path / f"from{i}"
        folder.mkdir()
        pgn = folder / "games.pgn"
        pgn.write_text(f'[Event "{i}"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
        files.append(pgn)
    got: list[str] = []
    barrier = threading.Barrier(2)

    def add(path: Path) -> None:
        barrier.wait()
        got.append(st.add_archive(path))

    threads = [threading.Thread(target=add, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == ["games-1.pgn", "games.pgn"]
    assert keys(bucket, "p/archives") == ["p/archives/games-1.pgn", "p/archives/games.pgn"]
    assert sorted(json.loads(storage.get(st.index_path).data)["keys"]) == ["games-1.pgn", "games.pgn"]


def test_an_error_that_is_not_a_setting_propagates_as_itself_without_a_loop(bucket):
    import botocore.exceptions as bx

    from pipeline.store.store_files import is_no_space

    missing = storage_paths.ObjectPath(bucket, "p/none.parquet")
    with pytest.raises(bx.ClientError) as e:
        storage.call("get_object", missing, Bucket=bucket, Key=missing.key)
    assert e.value.__cause__ is not e.value  # a cause chain that ends: error reporters walk it
    assert not is_no_space(e.value)


def test_an_ingest_whose_partition_lease_was_taken_over_commits_nothing(bucket, shared_data, monkeypatch):
    import pipeline.store.store
    from pipeline.ingest.ingest import IngestConfig, ingest_archive

    st = Store(f"s3://{bucket}/p").ensure()
    key = st.add_archive(shared_data / "pgn" / SMALL_ARCHIVE)
    with st.local_archive(key) as path:
        ingest_archive(st, key, path, IngestConfig(workers=1))
        before = {o["Key"]: o["ETag"] for o in storage.list_objects(st.root) if "/archive=" in o["Key"]}
        assert len(before) == 3
        ttl = 1.5
        monkeypatch.setattr(pipeline.store.store, "PARTITION_LEASE_TTL_S", ttl)

        def taken_over(stats) -> None:
            # Another worker took the lease over (as after an expiry): this one's renewal fails.
            storage.put(storage_leases.lease_key(st.root, f"partition-{key}"), b'{"owner": "other", "ttl_s": 60}')
            time.sleep(ttl / 3 + 1.0)

        with pytest.raises(storage_leases.LeaseLost, match=f"lease partition-{key} was lost"):
            ingest_archive(st, key, path, IngestConfig(workers=1), progress=taken_over)
    after = {o["Key"]: o["ETag"] for o in storage.list_objects(st.root) if "/archive=" in o["Key"]}
    assert after == before  # the earlier partition files, untouched


def test_the_cli_ingests_into_and_queries_an_s3_store(bucket, shared_data, tmp_path, capsys):
    from cli import main

    home = f"s3://{bucket}/cli"
    main(["--home", home, "ingest", str(shared_data / "pgn" / SMALL_ARCHIVE)])
    capsys.readouterr()
    main(["--home", home, "sql", "SELECT count(*) AS n FROM games", "--format", "csv"])
    assert capsys.readouterr().out.split()[-1] == "978"
    st = Store(home)
    assert (tmp_path / "cache") in st.duckdb_path.parents  # the DuckDB file is local
    assert not [k for k in keys(bucket) if ".progress-" in k or k.endswith((".duckdb", ".tmp"))]


def test_the_sensor_sees_an_archive_dropped_into_the_s3_archives_prefix(bucket, shared_data):
    import dagster as dg

    from assets.partitions import archives_partitions
    from assets.resources import StoreResource
    from assets.sensors import archives_sensor
    from pipeline.store.store_archives import partition_key

    st = Store(f"s3://{bucket}/p").ensure()
    instance = dg.DagsterInstance.ephemeral()
    resources = {"store": StoreResource(root=str(st.root))}
    first = archives_sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert not first.run_requests
    # Uploaded by any S3 client (no sha256 metadata of ours): hashed from its bytes.
    data = (shared_data / "pgn" / SMALL_ARCHIVE).read_bytes()
    storage.client().put_object(Bucket=bucket, Key="p/archives/2026/new-month.pgn.zst", Body=data)
    tick = archives_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor))
    new_key = partition_key("2026/new-month.pgn.zst")  # as for a file in a subfolder of a local store
    assert [r.partition_key for r in tick.run_requests] == [new_key]
    instance.add_dynamic_partitions(archives_partitions.name, [new_key])
    again = archives_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=tick.cursor))
    assert not again.run_requests
    # The same bytes under another name are that archive, not a new partition.
    storage.client().put_object(Bucket=bucket, Key="p/archives/copy.pgn.zst", Body=data)
    third = archives_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=again.cursor))
    assert not third.run_requests and not third.dynamic_partitions_requests


def test_a_server_gone_during_a_query_is_one_line_not_duckdbs_traceback(tmp_path, monkeypatch):
    with moto_s3() as url:
        _s3_env(monkeypatch, tmp_path, url)
        storage.client().create_bucket(Bucket="short-lived")
        st = Store("s3://short-lived/p").ensure()
        assert query(st, "SELECT count(*) AS n FROM games").column("n")[0].as_py() == 0
    # The server is gone; the store's DuckDB file (local) is still there and its views read S3.
    with pytest.raises(storage.StoreUnavailable) as e:
        query(st, "SELECT count(*) AS n FROM games")
    message = str(e.value)
    assert "\n" not in message and "Traceback" not in message, message
    assert f"reading from the S3 server at {url} failed" in message and "check CHESS_PIPELINE_S3_ENDPOINT" in message
