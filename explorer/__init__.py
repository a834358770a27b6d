"""The explorer page (`chess-pipeline explore`): a board, piece values, every model's
evaluation and an opening explorer over the store.

Plain modules, no Dagster: `position` (input checks, the store's key of a board), `queries`
(read-only DuckDB over the store), `evaluations` (networks, the traditional evaluation,
Stockfish labels and live searches, piece values), `app` (the FastAPI layer over them) and
`static/` (the page; `static/vendor/` is filled by `make install` from npm)."""
