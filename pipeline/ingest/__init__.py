"""Ingest: PGN archives (plain, .zst, .bz2, .gz) to games, rejected games and encoded positions.

Owns reading archives with bounded memory (archive.py), parsing and validating games
(games.py), replaying moves to positions (replay.py, with its compiled loops in _replay.c),
the position encoding and keys (encoding.py), the parallel ingest of one archive (ingest.py),
and the small Stockfish-played sample archive of the demo and tests (sample_archive.py).

Imports: pipeline.store and the root helpers.
"""
