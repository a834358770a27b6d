"""The store: where everything lands and how it is read.

Owns the layout of the store home (store.py), writing files so a killed run leaves no half file
(store_files.py), the archives' partitions and their register (store_archives.py), the local and
S3 filesystems and their leases (storage*.py), the Parquet schemas (schemas.py) and DuckDB's
read-only views over all of it (duck.py).

Imports: pipeline.settings and pipeline.parallel only; every other stage imports this one.
"""
