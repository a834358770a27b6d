"""What every command shares: the store, the persistent Dagster instance, the run's resources
and tags, and one way to run assets and read back why a run failed.

Every command that materialises something does it with the store's persistent Dagster
instance, so `chess-pipeline ui` shows those runs.
"""

import contextlib
import contextvars
import errno
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import dagster as dg

from assets.profile import dagster_yaml, ensure_instance_yaml, profile_from_env
from assets.shared import COMMAND_TAG
from pipeline.store.store import Store, remove_stale_progress_files, store_root
from pipeline.store.store_files import NoSpaceError, no_space_error

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
ASSETS_TAG = "chess-pipeline/assets"
_command = contextvars.ContextVar("chess_pipeline_command", default="python")
"""The CLI command running (set by main), named in the tags of the runs it starts."""


def set_command(name: str) -> None:
    _command.set(name)


def run_tags(assets: list, selection: list[str] | None = None) -> dict[str, str]:
    """Tags for a run the CLI starts: Dagster names every `materialize` run
    `__ephemeral_asset_job__`, so the tags say which command started it and what it makes
    (the partition is Dagster's own `dagster/partition` tag)."""
    names = list(selection) if selection else sorted(k.to_user_string() for a in assets for k in a.keys)
    text = ", ".join(names)
    return {COMMAND_TAG: _command.get(), ASSETS_TAG: text if len(text) <= 250 else text[:246] + " ..."}


DAGSTER_YAML = dagster_yaml("embedded")
"""The embedded profile's instance settings: deploy/embedded/dagster.yaml."""
OLD_DAGSTER_YAML = "telemetry:\n  enabled: false\n"
"""What earlier versions wrote: replaced by DAGSTER_YAML (a file a user changed is kept)."""


def open_store(home: str | None) -> Store:
    """The store the command works on (--home, else CHESS_PIPELINE_HOME, else ./store), created
    if missing: a new one is named on stderr, so a command run from another directory does not
    pass for one on the usual store."""
    store = Store(store_root(home))  # a folder, or s3://bucket/prefix (pipeline/store/storage.py)
    new = store.is_new()
    store.ensure()
    if new:
        print(
            f"chess-pipeline: created a new store at {store.root} (set CHESS_PIPELINE_HOME or --home to use another)",
            file=sys.stderr,
        )
    return store


def open_instance(store: Store) -> dg.DagsterInstance:
    """The persistent instance: DAGSTER_HOME if set, else <store>/dagster."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(store.dagster_home)
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    # CHESS_PIPELINE_PROFILE picks deploy/embedded/ (SQLite) or deploy/cluster/ (Postgres) dagster.yaml.
    ensure_instance_yaml(Path(home), profile_from_env(), replace=(OLD_DAGSTER_YAML,))
    keep_reserve(Path(home))
    instance = dg.DagsterInstance.get()
    from assets.runs import fail_dead_runs

    for run_id, pid in fail_dead_runs(instance):
        print(
            f"chess-pipeline: run {run_id} was left STARTED by process {pid}, which is gone: marked failed",
            file=sys.stderr,
        )
    remove_stale_progress_files(store)
    return instance


RESERVE = ".chess-pipeline-reserve"
RESERVE_BYTES = 1 << 20
"""Space the CLI holds beside the Dagster instance (a file of this size in its home) and gives
back when a run stops on a full disk, so that the run's failure can still be recorded: SQLite
needs room for its journal to write anything, even the one row that ends the run."""


def keep_reserve(home: Path) -> None:
    """Hold RESERVE_BYTES in home (allocated, not sparse) unless it is held already or there is
    no room for it (then a full disk may leave a run STARTED until the next command ends it)."""
    path = home / RESERVE
    try:
        if path.stat().st_size >= RESERVE_BYTES:
            return
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        finally:
            os.close(fd)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()


def give_back_reserve() -> None:
    with contextlib.suppress(OSError):
        (Path(os.environ.get("DAGSTER_HOME") or ".") / RESERVE).unlink()


class _DagsterWriteErrors:
    """sys.stderr without what Dagster prints itself when it cannot write a run's log to its
    event log ("Exception while writing logger call to event log: ..." and SQLAlchemy's
    statement, parameters and background link): the run's error says the cause in one line.
    Shown with CHESS_PIPELINE_DEBUG=1."""

    PREFIX = "Exception while writing logger call to event log"

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(self.PREFIX):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


DEBUG_VARIABLE = "CHESS_PIPELINE_DEBUG"
"""The CLI's debug switch: set and not 0 shows tracebacks (`--debug` sets it while its command runs)."""


def debugging() -> bool:
    """The CLI's debug switch (DEBUG_VARIABLE), as the command and the processes it starts see it."""
    return os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")


def fail_own_runs(instance: dg.DagsterInstance, since: float, message: str) -> list[str]:
    """Mark failed the in-flight runs this process started at or after `since` (Dagster could not
    end them itself: the run's own events could not be written); their ids. Never raises: the
    error that stopped the run is what the user needs, not this one's."""
    from assets.runs import IN_FLIGHT, run_pid

    failed = []
    try:
        for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT)):
            run = record.dagster_run
            if record.create_timestamp.timestamp() >= since - 1 and run_pid(instance, run.run_id) == os.getpid():
                instance.report_run_failed(run, message)
                failed.append(run.run_id)
    except Exception:  # noqa: BLE001 - the next command's fail_dead_runs ends it then
        pass
    return failed


def resources(store: Store, stockfish=None) -> dict:
    """The run's resources: the store, and Stockfish (a StockfishResource; default settings
    when None)."""
    from assets.resources import StockfishResource, StoreResource

    return {"store": StoreResource(root=str(store.root)), "stockfish": stockfish or StockfishResource()}


def run_config(ops: dict | None = None) -> dg.RunConfig:
    """A run config of op configs (dg.Config objects), with the console log at WARNING."""
    return dg.RunConfig(ops=ops or {}, loggers=QUIET["loggers"])


def materialize(
    assets: list,
    store: Store,
    instance: dg.DagsterInstance,
    *,
    selection: list[str] | None = None,
    ops: dict | None = None,
    partition_key: str | None = None,
    stockfish=None,
    tags: dict | None = None,
) -> dg.ExecuteInProcessResult:
    """One Dagster run of `assets` (or the `selection` of them) on the store, tagged with the
    command that started it; ops: {op name: its dg.Config}. Returns the result, failed or not.

    A run stopped by Ctrl-C or SIGTERM raises KeyboardInterrupt here: Dagster turns the signal
    into the run's failure and returns (or, when it lands outside a step's own code, e.g. as the
    run ends, records it and lets the run succeed), and a command going through steps (reproduce,
    ingest) would otherwise take it for that step's failure, or for nothing, and go on."""
    tags = {**run_tags(assets, selection), **(tags or {})}
    stderr = sys.stderr if debugging() else _DagsterWriteErrors(sys.stderr)
    since = time.time()
    try:
        with signals_seen() as seen, interrupts_kept(), contextlib.redirect_stderr(stderr):
            result = dg.materialize(
                assets,
                selection=selection,
                partition_key=partition_key,
                instance=instance,
                resources=resources(store, stockfish),
                run_config=run_config(ops),
                tags=tags,
                raise_on_error=False,
            )
    except Exception as e:
        # Dagster itself failed (it could not write the run's events): the run is still
        # STARTED. Said as a full disk when it is one (measured before the reserve goes back),
        # and the run marked failed before the command ends.
        paths = [Path(os.environ.get("DAGSTER_HOME") or ".")] + ([] if store.remote else [Path(str(store.root))])
        full = no_space_error(e, paths)
        if full is not None:
            give_back_reserve()  # room for the run's last rows
        why = full or f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        fail_own_runs(instance, since, f"{why}; marked failed by chess-pipeline")
        if full is not None:
            raise NoSpaceError(errno.ENOSPC, f"the run of {tags[ASSETS_TAG]} stopped: {full}") from e
        raise
    if seen & STOP_SIGNALS or (not result.success and interrupted(result)):
        raise KeyboardInterrupt
    return result


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
INTERRUPTED = frozenset({"DagsterExecutionInterruptedError", "KeyboardInterrupt"})
"""The errors a run fails with when the process is sent SIGINT or SIGTERM (Dagster's, or one
re-raised from a worker)."""


@contextlib.contextmanager
def signals_seen():
    """The numbers of the signals that arrive while the block runs, whatever handler takes them
    (signal.set_wakeup_fd: Python writes each one there before any handler runs). Only the main
    thread can watch; elsewhere the set stays empty."""
    seen: set[int] = set()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield seen
    finally:
        signal.set_wakeup_fd(previous)
        try:
            while data := reader.recv(4096):
                seen.update(data)
        except BlockingIOError:
            pass
        reader.close()
        writer.close()


AGAIN_AFTER_S = 0.1
"""How long after a dropped interrupt it is sent again (interrupts_kept)."""


@contextlib.contextmanager
def interrupts_kept():
    """An interrupt raised while a finaliser runs (a `__del__`, a weakref callback: where a
    signal handler's exception lands when the signal arrives during one) is dropped by Python,
    which prints "Exception ignored in ..." and its traceback and goes on; a run would then go on
    to the end of its step. In this block such an interrupt is raised again instead: a timer
    thread sends the process SIGINT a moment later, whose handler (Dagster's, or Python's
    KeyboardInterrupt) then runs in the main thread's own code. Sent at once, from the hook, the
    handler would run, and raise, inside the hook, where Python drops it again; should the
    moment fall in another finaliser, the hook sends it again."""
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if type(unraisable.exc_value).__name__ in INTERRUPTED:
            threading.Timer(AGAIN_AFTER_S, os.kill, (os.getpid(), signal.SIGINT)).start()
        else:
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def interrupted(result) -> bool:
    """Whether a failed run was stopped by a signal rather than by an error of its own (the
    interrupt, or an error raised while handling it, which keeps it as its cause or context)."""
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            stack = [getattr(event.event_specific_data, "error", None)]
            while stack:
                error = stack.pop()
                if error is None:
                    continue
                if error.cls_name in INTERRUPTED:
                    return True
                stack += [error.cause, getattr(error, "context", None)]
    return False


def require_success(result, what: str):
    """The result, or SystemExit naming what failed and why."""
    if not result.success:
        raise SystemExit(f"chess-pipeline: {what} failed: {failure_message(result)}")
    return result


def failure_message(result) -> str:
    """The user-code error behind a failed run (Dagster wraps it in its own error): a step's, or
    a resource's that could not start (a bad setting: the run's steps never ran)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
        elif event.is_resource_init_failure and getattr(event.event_specific_data, "error", None):
            error = event.event_specific_data.error
        else:
            continue
        while error.cause is not None:
            error = error.cause
        message = error.message.strip()
        # "pipeline.ingest.archive.ArchiveError: <text>": our own errors' text is the message, their
        # module path noise (a builtin's name, e.g. KeyError, stays: it says something).
        head, sep, rest = message.partition(": ")
        if sep and "." in head and error.cls_name and head.rsplit(".", 1)[-1] == error.cls_name:
            return rest.strip()
        return message
    return "run failed (see the Dagster UI for the run's logs)"


def materializations(result) -> dict[str, dict]:
    """{asset key: its metadata (MetadataValue objects)} of a run's materialisations."""
    out = {}
    for event in result.get_asset_materialization_events():
        m = event.materialization
        out[m.asset_key.to_user_string()] = dict(m.metadata)
    return out
