"""Real servers on loopback for the cluster profile: moto's S3 server, Postgres, Redis.

Each is a context manager that starts the server on 127.0.0.1 on a free port, waits until it
answers, yields how to reach it, and stops it by its PID on the way out (also when the block
raises). A missing binary is one `ServerMissing` line naming what to install. Children get
PR_SET_PDEATHSIG on Linux, so a server never outlives the Python process that started it, even
when that process is killed with SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


class ServerMissing(RuntimeError):
    """A server binary is not installed; the message says what to install."""


class ServerFailed(RuntimeError):
    """A server started but did not come up; the message carries its log's last lines."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A preexec_fn asking Linux to send sig to the child when its parent dies."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def preexec() -> None:
        libc.prctl(pr_set_pdeathsig, sig, 0, 0, 0)

    return preexec


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_until(ready: Callable[[], bool], proc: subprocess.Popen, what: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerFailed(f"{what} exited with status {proc.returncode} while starting; its log:\n{_tail(log)}")
        if ready():
            return
        time.sleep(0.1)
    raise ServerFailed(f"{what} did not answer within {timeout:.0f} s; its log:\n{_tail(log)}")


def stop_pid(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace: float = 15.0) -> None:
    """Stop a server by its PID: sig, then SIGKILL after grace seconds; reaps it."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


# --- moto (S3) -------------------------------------------------------------------------------


def moto_binary() -> str:
    """moto_server beside this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "moto_server"
    if beside.exists():
        return str(beside)
    found = shutil.which("moto_server")
    if found is None:
        raise ServerMissing(
            "moto_server not found beside this Python or on PATH: install the dev extras "
            '(.venv/bin/pip install -c requirements.lock -e ".[dev]", which brings moto[server])'
        )
    return found


def _http_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means the server is up
    except OSError:
        return False


@contextlib.contextmanager
def moto_s3(port: int = 0, timeout: float = 60.0) -> Iterator[str]:
    """A moto S3 server on 127.0.0.1; yields its endpoint URL "http://127.0.0.1:PORT".

    Credentials are not checked by moto: any access key works (tests set AWS_ACCESS_KEY_ID etc.
    to dummies so nothing reads a real ~/.aws)."""
    binary = moto_binary()
    port = port or free_port()
    url = f"http://{LOOPBACK}:{port}"
    with tempfile.TemporaryDirectory(prefix="moto-") as tmp:
        log = Path(tmp) / "moto.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [binary, "-H", LOOPBACK, "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent(),
            )
        try:
            _wait_until(lambda: _http_answers(url + "/"), proc, f"moto_server on port {port}", log, timeout)
            yield url
        finally:
            stop_pid(proc)


# --- Redis -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RedisServer:
    port: int
    pid: int

    @property
    def url(self) -> str:
        """The broker URL Celery takes (database 0)."""
        return f"redis://{LOOPBACK}:{self.port}/0"


def redis_binary() -> str:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        raise ServerMissing("redis-server not found: install it (Debian: apt-get install -y redis-server)")
    return found


def start_redis(folder: Path, port: int = 0, timeout: float = 30.0) -> tuple[RedisServer, subprocess.Popen]:
    """Start redis-server on 127.0.0.1 without persistence; the caller stops it with stop_pid."""
    binary = redis_binary()
    port = port or free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "redis.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            # No RDB snapshots, no append-only file: a broker that goes away loses its queue.
            [binary, "--bind", LOOPBACK, "--port", str(port), "--save", "", "--appendonly", "no"]
            + ["--daemonize", "no", "--dir", str(folder), "--protected-mode", "yes"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )
    try:
        _wait_until(lambda: _redis_ping(port), proc, f"redis-server on port {port}", log, timeout)
    except BaseException:
        stop_pid(proc)
        raise
    return RedisServer(port=port, pid=proc.pid), proc


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def redis(port: int = 0, timeout: float = 30.0) -> Iterator[RedisServer]:
    """A redis-server on 127.0.0.1 with no persistence; yields its port and broker URL."""
    with tempfile.TemporaryDirectory(prefix="redis-") as tmp:
        server, proc = start_redis(Path(tmp), port, timeout)
        try:
            yield server
        finally:
            stop_pid(proc)


# --- Postgres --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    db: str
    pid: int

    def env(self) -> dict[str, str]:
        """The DAGSTER_PG_* variables deploy/cluster/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.db,
        }


def postgres_bindir() -> Path:
    """Debian's versioned bin folder (/usr/lib/postgresql/N/bin), the newest when several."""
    dirs = sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if (Path(p) / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if dirs:
        return dirs[-1]
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise ServerMissing("postgres initdb not found: install the server (Debian: apt-get install -y postgresql)")


def _server_user() -> tuple[str | None, int | None, int | None]:
    """(name, uid, gid) to run Postgres as: the `postgres` user when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None, None, None
    import pwd

    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerMissing(
            "running as root and there is no `postgres` user to run the server as (Postgres refuses root): "
            "install Debian's postgresql package (apt-get install -y postgresql), which creates it"
        ) from None
    return pw.pw_name, pw.pw_uid, pw.pw_gid


def start_postgres(
    folder: Path, port: int = 0, user: str = "dagster", db: str = "dagster", timeout: float = 60.0
) -> tuple[PostgresServer, subprocess.Popen]:
    """initdb a fresh cluster under folder and run `postgres` on 127.0.0.1 (TCP only, password auth).

    As root the server runs as the `postgres` user (it refuses root); folder is handed to that user.
    The caller stops it with stop_pid(proc, signal.SIGINT) (Postgres' fast shutdown)."""
    bindir = postgres_bindir()
    name, uid, gid = _server_user()
    port = port or free_port()
    password = secrets.token_hex(16)
    folder.mkdir(parents=True, exist_ok=True)
    data, sock = folder / "data", folder / "sock"
    sock.mkdir(exist_ok=True)
    pwfile = folder / "pwfile"
    pwfile.write_text(password + "\n")
    as_user: dict = {}
    if uid is not None:
        for p in (folder, sock, pwfile):
            os.chown(p, uid, gid)
        as_user = {"user": uid, "group": gid, "extra_groups": []}
    log = folder / "postgres.log"
    with open(log, "wb") as out:
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", user, f"--pwfile={pwfile}", "-E", "UTF8"]
            + ["--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "--no-instructions"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            **as_user,
        )
    pwfile.unlink()
    if init.returncode != 0:
        raise ServerFailed(f"initdb failed with status {init.returncode} in {data}; its log:\n{_tail(log)}")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(port)]
            + ["-c", f"listen_addresses={LOOPBACK}", "-c", f"unix_socket_directories={sock}"]
            + ["-c", "fsync=off", "-c", "max_connections=200"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            # SIGINT is Postgres' fast shutdown: the backends end when the postmaster does.
            preexec_fn=die_with_parent(signal.SIGINT),
            **as_user,
        )
    server = PostgresServer(LOOPBACK, port, user, password, db, proc.pid)
    try:
        _wait_until(lambda: _pg_answers(server, "postgres"), proc, f"postgres on port {port}", log, timeout)
        _create_db(server)
    except BaseException:
        stop_pid(proc, signal.SIGINT)
        raise
    return server, proc


def _pg_answers(server: PostgresServer, dbname: str) -> bool:
    import psycopg2

    try:
        psycopg2.connect(
            host=server.host,
            port=server.port,
            user=server.user,
            password=server.password,
            dbname=dbname,
            connect_timeout=2,
        ).close()
        return True
    except psycopg2.OperationalError:
        return False


def _create_db(server: PostgresServer) -> None:
    import psycopg2
    from psycopg2 import sql

    conn = psycopg2.connect(
        host=server.host, port=server.port, user=server.user, password=server.password, dbname="postgres"
    )
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(server.db)))
    finally:
        conn.close()


@contextlib.contextmanager
def postgres(
    port: int = 0, user: str = "dagster", db: str = "dagster", timeout: float = 60.0
) -> Iterator[PostgresServer]:
    """A throwaway Postgres cluster on 127.0.0.1 (data under a temp folder, deleted after);
    yields its connection settings (host, port, user, password, db; .env() for dagster.yaml)."""
    with tempfile.TemporaryDirectory(prefix="pg-") as tmp:
        os.chmod(tmp, 0o755)  # the postgres user must reach its folder inside
        server, proc = start_postgres(Path(tmp) / "pg", port, user, db, timeout)
        try:
            yield server
        finally:
            stop_pid(proc, signal.SIGINT, grace=30.0)


def main(argv: list[str] | None = None) -> int:
    """`python -m deploy.servers`: throwaway Postgres and Redis (and with --s3 a moto S3 server)
    on 127.0.0.1 for trying the cluster profile on one machine; prints the settings as `export`
    lines, runs until Ctrl-C (or SIGTERM), then stops them by PID and deletes their data."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m deploy.servers", description=main.__doc__.split(";")[0])
    parser.add_argument("--s3", action="store_true", help="also a moto S3 server (bucket `chess-store`)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        with contextlib.ExitStack() as stack:
            pg = stack.enter_context(postgres())
            rd = stack.enter_context(redis())
            exports = {**pg.env(), "CHESS_PIPELINE_PROFILE": "cluster", "CHESS_PIPELINE_BROKER_URL": rd.url}
            if args.s3:
                import boto3

                endpoint = stack.enter_context(moto_s3())
                keys = {"AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto", "AWS_REGION": "us-east-1"}
                boto3.client(
                    "s3",
                    endpoint_url=endpoint,
                    aws_access_key_id="moto",
                    aws_secret_access_key="moto",
                    region_name="us-east-1",
                ).create_bucket(Bucket="chess-store")
                exports.update(
                    {**keys, "CHESS_PIPELINE_S3_ENDPOINT": endpoint, "CHESS_PIPELINE_HOME": "s3://chess-store/store"}
                )
            for k, v in exports.items():
                print(f"export {k}={v}")
            print("# servers up; Ctrl-C stops them (their data goes with them)", file=sys.stderr, flush=True)
            sys.stdout.flush()
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except (ServerMissing, ServerFailed) as e:
        print(f"deploy.servers: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
