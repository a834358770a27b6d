"""Labels: Stockfish's evaluation of every distinct position, versioned by engine and limit.

Owns the UCI engine, its process pool and what a label is (engine.py: Limit, the one label
setting from the flag to the file path) and the labelling run over the store's shards with its
leases, retries and validation (labels.py).

Imports: pipeline.store, pipeline.ingest and the root helpers.
"""
