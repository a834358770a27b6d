import dagster as dg
import pytest


@pytest.fixture
def instance():
    """A real, temporary Dagster instance (SQLite storage in a temp dir)."""
    with dg.instance_for_test() as inst:
        yield inst
