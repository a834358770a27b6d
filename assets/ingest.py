"""Archives -> games, rejected_games, positions and the position book (one partition per archive)."""

import dagster as dg

from assets.config import config_from
from assets.metadata import md_table, png_md
from assets.partitions import archives_partitions
from assets.progress import run_progress
from assets.resources import StoreResource
from pipeline.ingest.book import write_book
from pipeline.ingest.ingest import (
    IngestConfig,
    IngestStats,
    count_games_python_chess,
    expected_positions,
    ingest_archive,
)
from pipeline.plots import games_charts
from pipeline.store.duck import create_views

GROUP = "ingest"


IngestRunConfig = config_from(IngestConfig, name="IngestRunConfig")
"""How archive_tables ingests its archive: pipeline.ingest.ingest.IngestConfig's fields."""


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "games", group_name=GROUP, description="One row per replayable game: headers, result flags, UCI moves."
        ),
        dg.AssetSpec(
            "rejected_games", group_name=GROUP, description="Games that could not be replayed, with reason and excerpt."
        ),
        dg.AssetSpec(
            "positions",
            group_name=GROUP,
            deps=["games"],
            description="One row per mainline position: Zobrist key, packed planes, state, game context.",
        ),
        dg.AssetSpec(
            "position_book",
            group_name=GROUP,
            deps=["positions"],
            description="The explorer's figures for the archive's common positions, summed from its positions.",
        ),
    ],
    check_specs=[
        dg.AssetCheckSpec(
            "reconciles_with_file",
            asset="games",
            description="games + rejected_games equals the number of games python-chess counts in the archive",
        ),
        dg.AssetCheckSpec(
            "one_position_per_ply", asset="positions", description="positions = sum over games of (plies + 1)"
        ),
    ],
    partitions_def=archives_partitions,
    name="archive_tables",
)
def archive_tables(context: dg.AssetExecutionContext, config: IngestRunConfig, store: StoreResource):
    """Parse one archive (one partition) into its games, rejected_games and positions files,
    then sum its position book from the positions (pipeline/ingest/book.py).

    One pass over the archive writes all three: replaying the moves once for both games
    and positions is twice as fast as replaying them again from the games table.
    """
    st = store.get()
    key = context.partition_key
    scan = st.scan_archives()
    source = st.archive_path(key, scan)
    # The bytes' sha256 as the store's archive index has it (no second read): reproduce compares
    # it with the file's, so the same bytes touched or copied again are not ingested again.
    digest = scan.hashes[key]
    reporter = run_progress(context, "games")

    def progress(s: IngestStats) -> None:
        reporter.update(s.games, s.rejected, detail=f" ({s.plies:,} plies, {s.plies_per_second:,.0f} plies/s)")

    with st.local_archive(key) as path:  # an S3 store's archive is downloaded first
        context.log.info(f"ingesting {source} ({path.stat().st_size:,} bytes) as partition {key}")
        stats = ingest_archive(
            st,
            key,
            path,
            config.to_dataclass(),
            progress,
            on_wait=context.log.warning,
        )
        in_file = count_games_python_chess(path)
    book = write_book(st, key, on_wait=context.log.warning)
    context.log.info(f"{key}: position book of {book.positions:,} common positions in {book.seconds:.1f}s")
    positions_expected = expected_positions(st, key)
    for warning in stats.notes.warnings:  # e.g. games lost inside an unclosed comment, with the line
        context.log.warning(warning.message)
    context.log.info(
        f"{key}: {stats.games:,} games, {stats.rejected:,} rejected, {stats.positions:,} positions "
        f"in {stats.seconds:.1f}s ({stats.plies_per_second:,.0f} plies/s)"
    )
    yield dg.MaterializeResult(
        asset_key="games",
        metadata={
            "rows": stats.games,
            "archive": str(source),
            "sha256": digest,
            "path": dg.MetadataValue.path(str(st.partition_file("games", key))),
            "seconds": round(stats.seconds, 2),
            "plies_per_second": round(stats.plies_per_second),
            "parts": stats.parts,
            **_game_charts(st.partition_files("games", key), key),
            **(
                {
                    "archive_warnings": md_table(
                        ("line", "warning"), {f"{w.line:,}": w.message for w in stats.notes.warnings}
                    )
                }
                if stats.notes.warnings
                else {}
            ),
        },
    )
    yield dg.MaterializeResult(
        asset_key="rejected_games",
        metadata={
            "rows": stats.rejected,
            "path": dg.MetadataValue.path(str(st.partition_file("rejected_games", key))),
            "reasons": md_table(("reason", "games"), dict(sorted(stats.reject_reasons.items()))),
        },
    )
    yield dg.MaterializeResult(
        asset_key="positions",
        metadata={
            "rows": stats.positions,
            "plies": stats.plies,
            "path": dg.MetadataValue.path(str(st.partition_file("positions", key))),
            "bytes_per_position": round(stats.bytes_per_position, 2),
        },
    )
    yield dg.MaterializeResult(
        asset_key="position_book",
        metadata={
            "rows": book.rows,
            "positions": book.positions,
            "seconds": round(book.seconds, 2),
            "bytes_per_position": round(book.bytes / max(stats.positions, 1), 3),
            "path": dg.MetadataValue.path(str(st.partition_file("position_book", key))),
        },
    )
    lost = stats.notes.games_in_unclosed_comments
    yield dg.AssetCheckResult(
        asset_key="games",
        check_name="reconciles_with_file",
        passed=stats.games + stats.rejected == in_file and not lost,
        # Games swallowed by an unclosed comment (python-chess loses them too) are a warning.
        severity=dg.AssetCheckSeverity.ERROR if stats.games + stats.rejected != in_file else dg.AssetCheckSeverity.WARN,
        metadata={
            "games": stats.games,
            "rejected": stats.rejected,
            "games_in_file (python-chess)": in_file,
            "games_in_unclosed_comments": lost,
        },
    )
    yield dg.AssetCheckResult(
        asset_key="positions",
        check_name="one_position_per_ply",
        passed=stats.positions == positions_expected,
        metadata={"positions": stats.positions, "sum(ply_count + 1)": positions_expected},
    )


def _game_charts(games_files: list, key: str) -> dict:
    """Game lengths and players' ratings of the partition as charts for the UI, and its numbers
    of distinct players and rated players (by name): pipeline.plots.games_charts."""
    return {
        k: png_md(v, k.replace("_", " ")) if isinstance(v, bytes) else v
        for k, v in games_charts(games_files, key).items()
    }


@dg.asset(
    group_name=GROUP,
    deps=["games", "rejected_games", "positions", "position_book"],
    description="The DuckDB file with views over every table (globs, so new partitions show up without a refresh).",
)
def duckdb_views(store: StoreResource) -> dg.MaterializeResult:
    st = store.get()
    path = create_views(st)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path))})


ingest_job = dg.define_asset_job(
    "ingest_archive",
    selection=dg.AssetSelection.assets("games", "rejected_games", "positions", "position_book"),
    description="Ingest one archive partition.",
)
