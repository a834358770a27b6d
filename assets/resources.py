"""Resources shared by the asset modules."""

from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from assets.config import DescribedResource
from pipeline.engine import EnginePool, find_stockfish
from pipeline.labels import CALIBRATION_TIMEOUT_S
from pipeline.store import Store, default_root


class StoreResource(DescribedResource):
    """The store root (Parquet tables, archives folder, DuckDB file).

    Empty `root` means CHESS_PIPELINE_HOME, else ./store, read when a run starts.
    """

    root: str = ""
    """Store root folder; empty: CHESS_PIPELINE_HOME, else ./store (read when a run starts)."""

    def get(self) -> Store:
        return Store(Path(self.root).expanduser().resolve() if self.root else default_root()).ensure()


class StockfishResource(DescribedResource):
    """Stockfish engines for labelling: a pool of processes spoken to over raw UCI.

    Empty `path` means STOCKFISH_PATH, then `stockfish` on PATH, then /usr/games/stockfish.
    """

    path: str = ""
    """Engine binary; empty: STOCKFISH_PATH, PATH, /usr/games/stockfish."""
    workers: int = 0
    """Engine processes in the pool; 0 = one per core."""
    threads: int = 1
    """Search threads per engine (UCI Threads)."""
    hash_mb: int = 16
    """Hash table per engine in MB (UCI Hash)."""
    timeout_s: float = 0.0
    """A search with no result after this long is stopped (and the engine restarted if it hangs);
    0 = measured: the labels asset times its limit on a few positions and allows 20x the
    slowest, at least 2 s (other users of the pool get 60 s)."""
    retries: int = 2
    """Further tries for a position whose engine crashed or hung; then it is recorded as failed."""
    clear_hash: bool = True
    """Clear the engine's hash (`ucinewgame`) before every position, so each label is exactly
    what a fresh engine says: the same FEN, engine and limit give the same label whatever the
    order or the number of engines (needs threads 1). False: the hash-kept setting, faster
    (the hash carries over from the previous ply), but a label depends on what its engine
    searched before; its labels are a setting of their own (`<engine>_<limit>_hash-kept`,
    hash_cleared false), never mixed with the reproducible ones."""

    _pool: EnginePool | None = PrivateAttr(default=None)

    def binary(self) -> str:
        return find_stockfish(self.path or None)

    def make_pool(self) -> EnginePool:
        """A new, not yet started pool with this configuration (`with` it)."""
        if self.timeout_s < 0 or self.retries < 0:
            raise ValueError(
                f"stockfish resource: timeout_s must be 0 (measured) or more and retries 0 or more, "
                f"got timeout_s={self.timeout_s:g}, retries={self.retries}"
            )
        return EnginePool(
            self.binary(),
            workers=self.workers,
            threads=self.threads,
            hash_mb=self.hash_mb,
            timeout_s=self.timeout_s if self.timeout_s > 0 else CALIBRATION_TIMEOUT_S,
            retries=self.retries,
            clear_hash=self.clear_hash,
        )

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
