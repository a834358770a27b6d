"""The plain modules under the assets, one folder a stage, lowest first:

- store/     the store's layout, files, partitions, S3 backend, schemas and DuckDB views
- ingest/    PGN archives to games and encoded positions
- labels/    the Stockfish engine pool and labelling
- research/  the published figures, the reproduction's rows and budget
- datasets/  SQL training sets split by game
- play/      search, matches, suites, evaluation, Lubeck's grid

and shared helpers at the root: settings.py (settings dataclasses to flags and configs),
parallel.py (process pools), progress.py (counts, rates, ETA), plots.py (pictures).

A stage imports only the stages listed before it (tests/test_layering.py checks it);
nothing here imports training/, assets/, explorer/ or cli/.
"""
