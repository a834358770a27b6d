"""Resources shared by the asset modules."""


from pathlib import Path

import dagster as dg
from pydantic import PrivateAttr

from pipeline.engine import EnginePool, find_stockfish
from pipeline.store import Store, default_root


class StoreResource(dg.ConfigurableResource):
    """The store root (Parquet tables, archives folder, DuckDB file).

    Empty `root` means CHESS_PIPELINE_HOME, else ./store, read when a run starts.
    """

    root: str = ""

    def get(self) -> Store:
        return Store(Path(self.root).expanduser().resolve() if self.root else default_root()).ensure()


class StockfishResource(dg.ConfigurableResource):
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
    timeout_s: float = 60.0
    """A search with no result after this long is stopped (and the engine restarted if it hangs)."""
    retries: int = 2
    """Further tries for a position whose engine crashed or hung; then it is recorded as failed."""
    clear_hash: bool = False
    """Send ucinewgame before every position: each label is exactly what a fresh engine says,
    at about 0.65x the speed. Off by default: positions go to an engine game by game, and the
    hash carried from the previous ply is what makes depth-8 labelling fast."""

    _pool: EnginePool | None = PrivateAttr(default=None)

    def binary(self) -> str:
        return find_stockfish(self.path or None)

    def make_pool(self) -> EnginePool:
        """A new, not yet started pool with this configuration (`with` it)."""
        return EnginePool(self.binary(), workers=self.workers, threads=self.threads, hash_mb=self.hash_mb,
                          timeout_s=self.timeout_s, retries=self.retries, clear_hash=self.clear_hash)

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
