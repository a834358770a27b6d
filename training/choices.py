"""The training side's string choices as Literal types, and the check that refuses any other value.

Kept free of torch so that the CLI's parser can offer them (`choices=get_args(Device)`) without
importing torch. A Literal field of a Dagster config shows in the launchpad as an enum of its
values; a plain dataclass field of one is checked by `check_choice` where the value enters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Device = Literal["auto", "cpu", "cuda"]
"""auto (CUDA when present, else CPU), cpu or cuda."""
Profile = Literal["quick", "full"]
"""The training schedules of the model assets (assets.training.PROFILES): quick (a few CPU
minutes) or full (the published schedules)."""


def check_choice(what: str, value: object, valid: Iterable) -> None:
    """Refuse a value that is not one of `valid` (a Literal's values or a registry's names),
    naming the valid ones: a misspelled choice never falls through to a default."""
    valid = tuple(valid)
    if value not in valid:
        raise ValueError(f"{what} must be one of {', '.join(map(str, valid))}; got {value!r}")
