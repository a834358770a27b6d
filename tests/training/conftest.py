"""Shared by the training tests: a log that prints nothing, and one torch thread per module."""

import pytest
import torch

QUIET = lambda s: None  # noqa: E731
"""A `log` for train() and the pretraining that drops every line."""


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread: on a shared 2-core machine more threads only wait for each other. A
    module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")` (set before its
    module-scoped fixtures train anything), and gets the old count back after its last test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
