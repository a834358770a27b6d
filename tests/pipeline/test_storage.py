"""pipeline.store.storage without a server: store roots, object paths, settings (fast tier).
The tests against a real S3 server (moto on loopback) are in test_storage_s3.py."""

from pathlib import Path, PurePosixPath

import pytest

from pipeline.store import storage_leases
from pipeline.store.storage import S3Settings, parse_root
from pipeline.store.storage_paths import ObjectPath
from pipeline.store.store import Store, default_root


def test_an_s3_uri_is_an_object_path_and_a_folder_a_resolved_path(tmp_path, monkeypatch):
    assert parse_root("s3://chess-data/stores/main/") == ObjectPath("chess-data", "stores/main")
    assert parse_root("s3://chess-data") == ObjectPath("chess-data", "")
    monkeypatch.chdir(tmp_path)
    assert parse_root("store") == tmp_path.resolve() / "store"
    monkeypatch.setenv("CHESS_PIPELINE_HOME", "s3://chess-data/p")
    assert default_root() == ObjectPath("chess-data", "p")
    assert Store("s3://chess-data/p").root == ObjectPath("chess-data", "p")


@pytest.mark.parametrize(
    "root, words",
    [
        ("s3://Chess_Data/x", "not an S3 bucket name"),
        ("s3://ab/x", "not an S3 bucket name"),
        ("gs://bucket/x", "must be a folder or an s3://bucket/prefix URI"),
        ("s3://bucket/x?versionId=1", "no ?query"),
    ],
)
def test_a_bad_root_is_one_line_naming_the_setting(root, words):
    with pytest.raises(ValueError) as e:
        parse_root(root)
    assert words in str(e.value) and "--home or CHESS_PIPELINE_HOME" in str(e.value)
    assert "\n" not in str(e.value)


def test_object_paths_join_like_paths_and_never_pass_for_local_files():
    root = ObjectPath("chess-data", "p")
    f = root / "games" / "archive=a" / "data.parquet"
    assert str(f) == "s3://chess-data/p/games/archive=a/data.parquet"
    assert f.path == "chess-data/p/games/archive=a/data.parquet"
    assert (f.name, f.suffix, f.parent) == ("data.parquet", ".parquet", root / "games" / "archive=a")
    assert f.relative_to(root / "games") == PurePosixPath("archive=a/data.parquet")
    assert root in f.parents
    with pytest.raises(TypeError):
        Path(f)  # no __fspath__: local file code fails at once instead of writing ./s3:/...
    with pytest.raises(TypeError):
        open(f)  # noqa: SIM115


def test_an_s3_store_keeps_duckdb_and_dagster_in_a_local_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CHESS_PIPELINE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", "http://127.0.0.1:9000")
    st = Store("s3://chess-data/p")
    assert st.remote
    assert st.duckdb_path.parent == st.local_dir == st.dagster_home.parent
    assert (tmp_path / "cache" / "stores") in st.local_dir.parents
    first = st.local_dir
    monkeypatch.setenv("CHESS_PIPELINE_S3_ENDPOINT", "http://127.0.0.1:9001")
    assert Store("s3://chess-data/p").local_dir != first  # another server's store, another cache
    local = Store(tmp_path / "store")
    assert not local.remote and local.duckdb_path == tmp_path / "store" / "chess.duckdb"


def test_settings_come_from_the_environment_and_a_bad_endpoint_names_its_variable():
    s = S3Settings.from_env({"CHESS_PIPELINE_S3_ENDPOINT": "http://127.0.0.1:9000/", "AWS_REGION": "eu-west-3"})
    assert (s.endpoint, s.region, s.endpoint_setting) == (
        "http://127.0.0.1:9000",
        "eu-west-3",
        "CHESS_PIPELINE_S3_ENDPOINT",
    )
    s = S3Settings.from_env({"AWS_ENDPOINT_URL": "https://s3.example.net", "AWS_DEFAULT_REGION": "us-west-2"})
    assert (s.endpoint, s.region, s.endpoint_setting) == ("https://s3.example.net", "us-west-2", "AWS_ENDPOINT_URL")
    assert S3Settings.from_env({}) == S3Settings(endpoint="", region="us-east-1")
    with pytest.raises(ValueError, match=r"CHESS_PIPELINE_S3_ENDPOINT='127.0.0.1:9000': not a server URL"):
        S3Settings.from_env({"CHESS_PIPELINE_S3_ENDPOINT": "127.0.0.1:9000"})


def test_lease_names_become_safe_keys_without_collisions():
    root = ObjectPath("chess-data", "p")
    assert (
        storage_leases.lease_key(root, "labels.x_depth-8.shard-03.lock")
        == root / ".leases" / "labels.x_depth-8.shard-03.lock.json"
    )
    a, b = storage_leases.lease_key(root, "a/b"), storage_leases.lease_key(root, "a b")
    assert a != b and a.parent == b.parent == root / ".leases"
