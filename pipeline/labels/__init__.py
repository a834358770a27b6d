"""Labels: Stockfish's evaluation of every distinct position, versioned by engine and limit.

Owns what a label is and how a UCI reply is read (uci.py: Limit, the one label setting from the
flag to the file path; Job, Evaluation, Failure, check_label), one engine process and its fences
(engine.py), the process pool (pool.py: EngineSettings, EnginePool), a label setting and a run's
choices (setting.py), the store's shards, their locks and pending positions (shards.py), the
measured search timeout (calibration.py), the labelling run with its retries and parts
(labels.py), and labels carried between stores as one checked Parquet file (exchange.py).

Imports: pipeline.store, pipeline.ingest and the root helpers.
"""
