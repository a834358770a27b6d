"""The training side's string choices as Literal types, and the check that refuses any other value.

Kept free of torch so that the CLI's parser can offer them (`choices=get_args(Device)`) without
importing torch. A Literal field of a Dagster config shows in the launchpad as an enum of its
values; a plain dataclass field of one is checked by `check_choice` where the value enters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, cast, get_args

Device = Literal["auto", "cpu", "cuda"]
"""auto (CUDA when present, else CPU), cpu or cuda."""
Profile = Literal["quick", "full"]
"""The training schedules of the model assets (training.catalog.PROFILES): quick (a few CPU
minutes) or full (the published schedules)."""
PairOrder = Literal["winner", "score"]
"""Which train pairs a siamese comparator learns from: a position of a game White won against one
of a game Black won (DeepChess), or any two positions of train ordered by Stockfish's score
(White's view; the dataset's `score` column: deepchess_scored). Val and test pairs are always
by the winner, the published protocol."""
KeepBy = Literal["loss", "accuracy"]
"""Which validation figure keeps a run's best epoch and stops it early: the loss, or the accuracy
(a comparator whose train pairs are ordered by score is judged by the winner's pairs, where a
surer order raises the loss of the pairs it gets wrong while it gets more of them right)."""
Stop = Literal["epochs", "early stopping", "time budget"]
"""Why a run's training ended (training.train.TrainResult.stopped_by): every epoch asked for
ran, early stopping (no better validation loss), or the time bound (max_minutes) was reached."""
EPOCHS_DONE, EARLY_STOPPING, TIME_BUDGET = cast("tuple[Stop, Stop, Stop]", get_args(Stop))
"""Stop's values by name (the code compares and sets these, never the strings)."""


def check_choice(what: str, value: object, valid: Iterable) -> None:
    """Refuse a value that is not one of `valid` (a Literal's values or a registry's names),
    naming the valid ones: a misspelled choice never falls through to a default."""
    valid = tuple(valid)
    if value not in valid:
        raise ValueError(f"{what} must be one of {', '.join(map(str, valid))}; got {value!r}")
