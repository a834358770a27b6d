"""Resources shared by the asset modules."""


from pathlib import Path

import dagster as dg

from pipeline.store import Store, default_root


class StoreResource(dg.ConfigurableResource):
    """The store root (Parquet tables, archives folder, DuckDB file).

    Empty `root` means CHESS_PIPELINE_HOME, else ./store, read when a run starts.
    """

    root: str = ""

    def get(self) -> Store:
        return Store(Path(self.root).expanduser().resolve() if self.root else default_root()).ensure()
