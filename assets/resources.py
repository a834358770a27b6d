"""Resources shared by the asset modules."""

import dataclasses

import dagster as dg
from pydantic import PrivateAttr

from assets.config import DescribedResource, config_from
from pipeline.labels.calibration import CALIBRATION_TIMEOUT_S
from pipeline.labels.pool import EnginePool, EngineSettings
from pipeline.store.store import Store, store_root


class StoreResource(DescribedResource):
    """The store root (Parquet tables, archives folder, DuckDB file).

    Empty `root` means CHESS_PIPELINE_HOME, else ./store, read when a run starts.
    """

    root: str = ""
    """Store root folder; empty: CHESS_PIPELINE_HOME, else ./store (read when a run starts)."""

    def get(self) -> Store:
        return Store(store_root(self.root)).ensure()  # a folder, or s3://bucket/prefix


class StockfishResource(config_from(EngineSettings, name="StockfishSettings", base=DescribedResource)):
    """Stockfish engines for labelling: a pool of processes spoken to over raw UCI.

    Its fields are pipeline.labels.pool.EngineSettings' (the pool's parameters). Empty `path` means
    STOCKFISH_PATH, then `stockfish` on PATH, then /usr/games/stockfish.
    """

    _pool: EnginePool | None = PrivateAttr(default=None)

    def settings(self) -> EngineSettings:
        """These fields as the library's EngineSettings (checked: timeout_s and retries >= 0)."""
        return self.to_dataclass(EngineSettings)

    def binary(self) -> str:
        return self.settings().binary()

    def make_pool(self) -> EnginePool:
        """A new, not yet started pool with this configuration (`with` it); timeout_s 0 (measured)
        starts it at the calibration timeout, which the labels asset then replaces."""
        settings = self.settings()
        if not settings.timeout_s:
            settings = dataclasses.replace(settings, timeout_s=CALIBRATION_TIMEOUT_S)
        return EnginePool.from_settings(settings)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._pool = self.make_pool().__enter__()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def pool(self) -> EnginePool:
        """The run's engines, started when the run set the resource up."""
        if self._pool is None:
            raise RuntimeError("StockfishResource.pool outside a Dagster run; use make_pool() instead")
        return self._pool
