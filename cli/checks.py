"""Asset checks that did not pass, as one line each: what the check says and what to do."""

from collections.abc import Callable

import dagster as dg

from assets.records import (
    CoverageCheck,
    NoDuplicateLabelsCheck,
    OnePositionPerPlyCheck,
    ReconcilesWithFileCheck,
    Record,
    ScoresInRangeCheck,
)
from pipeline.labels.uci import CP_BOUND, MATE_BOUND


def _coverage(m: CoverageCheck) -> str:
    return (
        f"{m.unlabelled:,} distinct position(s) have no {m.setting} label yet (coverage {m.coverage:.2%}): "
        f"`chess-pipeline label` again goes on where this run stopped"
    )


def _scores_in_range(m: ScoresInRangeCheck) -> str:
    return (
        f"{m.out_of_range:,} label(s) of {m.setting} break the label contract (scores {m.min_score} to "
        f"{m.max_score}; {m.out_of_range_this_run or 'none'} by this run"
        f"{'' if m.out_of_range_this_run else ', so written before labels were validated'}): "
        f'do not train on them; `chess-pipeline sql "SELECT run_id, count(*) FROM labels '
        f'WHERE abs(cp) >= {CP_BOUND} OR abs(mate) > {MATE_BOUND} OR (cp IS NULL) = (mate IS NULL) GROUP BY 1"` '
        "names the runs that wrote them"
    )


def _no_duplicate_labels(m: NoDuplicateLabelsCheck) -> str:
    return (
        f"{m.duplicates:,} position(s) labelled twice under {m.setting}: two runs labelled the same shard; "
        f"the views use one label each, but report it (labels/.locks should prevent it)"
    )


def _reconciles_with_file(m: ReconcilesWithFileCheck) -> str:
    if m.games_in_unclosed_comments and m.games + m.rejected == m.games_in_file:
        return (
            f"{m.games_in_unclosed_comments:,} game(s) lost inside an unclosed {{ comment (python-chess loses them "
            f"too; the games metadata's archive_warnings gives the line): close the comment and ingest the file again"
        )
    return (
        f"the store holds {m.games:,} games + {m.rejected:,} rejected, python-chess counts "
        f"{m.games_in_file:,} games in the file: games were merged or split (odd line ends, a "
        f"byte-order mark, broken tags?); check the file, and `chess-pipeline report reject_reasons`"
    )


def _one_position_per_ply(m: OnePositionPerPlyCheck) -> str:
    return f"{m.positions:,} positions written, {m.expected:,} expected: ingest the archive again"


CHECK_ADVICE: dict[str, tuple[type[Record], Callable]] = {
    "coverage": (CoverageCheck, _coverage),
    "scores_in_range": (ScoresInRangeCheck, _scores_in_range),
    "no_duplicate_labels": (NoDuplicateLabelsCheck, _no_duplicate_labels),
    "reconciles_with_file": (ReconcilesWithFileCheck, _reconciles_with_file),
    "one_position_per_ply": (OnePositionPerPlyCheck, _one_position_per_ply),
}
"""What a failed check means and what to do, from its metadata (one line each): the record of
the check's metadata and the advice built from it."""


def failed_checks(result) -> tuple[list[str], list[str]]:
    """One line per asset check of the run that did not pass, (those of ERROR severity, the
    rest): the check, the asset, what its metadata says and what to do."""
    errors, warnings = [], []
    for e in result.get_asset_check_evaluations():
        if e.passed:
            continue
        meta = {k: v.value for k, v in e.metadata.items()}
        try:
            record, advice = CHECK_ADVICE[e.check_name]
            detail = advice(record.read(meta))
        except (KeyError, TypeError, ValueError):
            detail = ", ".join(f"{k} {v}" for k, v in meta.items()) or "see the check in the Dagster UI"
        line = f"check {e.check_name} of {e.asset_key.to_user_string()} did not pass: {detail}"
        (errors if e.severity == dg.AssetCheckSeverity.ERROR else warnings).append(line)
    return errors, warnings


def exit_on_check_errors(errors: list[str], command: str) -> None:
    """A check of ERROR severity that did not pass fails the command: one line per check."""
    if errors:
        raise SystemExit("\n".join(f"chess-pipeline {command}: {line}" for line in errors))
