"""Play: evaluators in a search, and what is measured by playing.

Owns the alpha-beta search and its evaluators (search.py, stockfish_eval.py), matches and Elo
(matches.py), Sabatelli's match openings (openings.py), the test suites STS, Kaufman and Win At
Chess (suites.py), the evaluation of a trained model (evaluation.py), DeepChess's pair
comparisons (deepchess_eval.py) and Lubeck's time/depth grid (lubeck_grid.py).

Imports: every other stage of pipeline/ (it is the top one) and the root helpers.
"""
