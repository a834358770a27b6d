"""Datasets: training sets as SQL over the store, split by game without leakage.

Owns building the datasets from sql/datasets (datasets.py) and the searched-positions growth
that adds positions the project's own search reaches (search_positions.py).

Imports: pipeline.store, pipeline.ingest, pipeline.labels and the root helpers.
"""
