"""`chess-pipeline ingest PATH...`: add archives to the store and ingest each, one Dagster run
per archive partition."""

import argparse
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
from tqdm import tqdm

from assets.records import GamesMetadata, PositionsMetadata, RejectedGamesMetadata
from cli.checks import failed_checks
from cli.progress import new_bar, progress_file, watch
from cli.runtime import failure_message, materializations, materialize, open_instance, open_store
from pipeline.ingest.ingest import IngestConfig
from pipeline.settings import add_arguments, from_namespace
from pipeline.store import duck
from pipeline.store.store import Store
from pipeline.store.store_archives import ARCHIVE_SUFFIXES, ArchiveNameError, is_archive_name
from pipeline.store.store_files import NoSpaceError


@dataclass(frozen=True)
class ArchiveSummary:
    """One ingested archive, as its run's metadata gives it."""

    archive: str
    games: int
    rejected: int
    positions: int
    plies_per_second: float
    bytes_per_position: float

    def line(self) -> str:
        return (
            f"{self.archive}: {self.games} games, {self.rejected} rejected, {self.positions} positions "
            f"({self.plies_per_second:,} plies/s, {self.bytes_per_position} bytes/position)"
        )


@dataclass
class IngestResult:
    archives: list[ArchiveSummary] = field(default_factory=list)
    """The archives ingested, in the order asked for."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(archive, why) for each archive whose run or ERROR check failed."""
    notes: list[tuple[str, str]] = field(default_factory=list)
    """(archive, line) for each WARN check that did not pass: the archive is ingested."""


def expand_paths(paths: list[str]) -> list[Path]:
    """Files as given, folders as the archives under them (sorted)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and is_archive_name(q.name)))
        elif p.exists():
            out.append(p)
        else:
            raise SystemExit(f"chess-pipeline: {p}: no such file or directory")
    return out


def add_archives(store: Store, paths: list[str], copy: bool = False) -> list[str]:
    """Link (or copy) the archives into the store; their partition keys, the same content once."""
    keys: list[str] = []
    for path in expand_paths(paths):
        try:
            key = store.add_archive(path, copy=copy)
        except (ArchiveNameError, FileNotFoundError, NoSpaceError) as e:
            raise SystemExit(f"chess-pipeline ingest: {e}") from None
        if key not in keys:  # the same content twice is one archive
            keys.append(key)
    return keys


def ingest_archives(
    store: Store,
    instance: dg.DagsterInstance,
    keys: list[str],
    config: IngestConfig | None = None,
    on_done: Callable[[ArchiveSummary], None] | None = None,
) -> IngestResult:
    """Materialise the archive tables of each partition key with this IngestConfig (its
    defaults when None), one Dagster run per archive. on_done(summary) is called as each
    archive succeeds, so a later failure hides nothing."""
    from assets.ingest import IngestRunConfig, archive_tables
    from assets.partitions import archives_partitions

    known = set(instance.get_dynamic_partitions(archives_partitions.name))
    new = [k for k in keys if k not in known]
    if new:
        instance.add_dynamic_partitions(archives_partitions.name, new)
    out = IngestResult()
    bar = new_bar("ingest", "archive", len(keys))
    try:
        for key in keys:
            bar.set_postfix_str(key[:40])

            def show(counts, key=key) -> None:
                bar.set_postfix_str(f"{key[:40]}: {counts.handled:,} games")

            with watch(progress_file(store, "games"), show) as tags:
                result = materialize(
                    [archive_tables],
                    store,
                    instance,
                    partition_key=key,
                    ops={"archive_tables": IngestRunConfig(**dataclasses.asdict(config or IngestConfig()))},
                    tags=tags,
                )
            bar.update(1)
            if not result.success:
                out.failures.append((key, failure_message(result)))
                continue
            meta = materializations(result)
            games = GamesMetadata.read(meta["games"])
            rejected = RejectedGamesMetadata.read(meta["rejected_games"])
            positions = PositionsMetadata.read(meta["positions"])
            summary = ArchiveSummary(
                key, games.rows, rejected.rows, positions.rows, games.plies_per_second, positions.bytes_per_position
            )
            out.archives.append(summary)
            if on_done is not None:
                on_done(summary)
            errors, warnings = failed_checks(result)
            out.failures.extend((key, line) for line in errors)
            out.notes.extend((key, line) for line in warnings)
    finally:
        bar.close()
    return out


def report(result: IngestResult) -> None:
    """Notes and failures on stderr, one line each; exit status 1 when an archive failed."""
    for key, line in result.notes:  # a WARN check: said, but the archive is ingested
        print(f"chess-pipeline: note: archive {key}: {line}", file=sys.stderr)
    for key, msg in result.failures:
        print(f"chess-pipeline: archive {key} failed: {msg}", file=sys.stderr)
    if result.failures:
        raise SystemExit(1)


def print_summary(summary: ArchiveSummary) -> None:
    tqdm.write(summary.line(), file=sys.stdout)


def cmd_ingest(args: argparse.Namespace) -> None:
    store = open_store(args.home)
    instance = open_instance(store)
    keys = add_archives(store, args.paths, copy=args.copy)
    try:
        config = from_namespace(IngestConfig, args, names=["workers"])
        result = ingest_archives(store, instance, keys, config, on_done=print_summary)
    finally:
        duck.create_views(store)  # the archives that succeeded show up even when one failed
    report(result)


def add_parser(sub) -> None:
    s = sub.add_parser("ingest", help="add archives (files or folders) and ingest them through Dagster")
    s.add_argument("paths", nargs="+", help=f"archive files ({', '.join(ARCHIVE_SUFFIXES)}) or folders")
    s.add_argument("--copy", action="store_true", help="copy into the store instead of linking")
    add_arguments(s, IngestConfig, names=["workers"])
    s.set_defaults(func=cmd_ingest)
