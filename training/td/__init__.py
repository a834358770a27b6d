"""Learning by self-play (Hui 2018): TD(lambda) and TD-Leaf(lambda) over the antisymmetric bitboard.

An evaluation V(s) in (-1, 1), White's point of view, learns from the games it plays against
itself with the negamax alpha-beta search of pipeline/play/search.py (transposition table, the
frontier scored in one batch, as the matches play). After each game the weights move by
temporal differences (Sutton's TD(lambda); Baxter, Tridgell and Weaver's TD-Leaf(lambda)):

    d_t = J_{t+1} - J_t            (J_N = the game's result, +1 / 0 / -1, when the rules ended it;
                                    with clock_ends 'unfinished' not by the fifty- or 75-move rule)
    w  += lr * sum_t grad J_t * sum_{j >= t} lambda^(j - t) d_j

where J_t is V of the position the search started from (TD) or V of the leaf of its principal
variation (TD-Leaf: the position whose value the search actually backed up). A leaf the rules
end (a mate seen by the search) has the result as its value and no gradient.

The representation is the antisymmetric bitboard: 6 x 64 inputs, +1 for a White piece on its
square, -1 for a Black piece on its square with the ranks flipped (each side seen from its own
side of the board). Colour-flipping a position negates the input, so an evaluation without
biases and with odd activations is antisymmetric: V(flip s) = -V(s). Two evaluations:
`linear` (piece-square weights, one tanh unit) and `network` (one tanh hidden layer, no
biases). Both are plain numpy with hand-written gradients: small, fast to call from the
search, and bit-for-bit reproducible.

Self-play runs in generations: the games of a generation are played with the weights the
generation started with (in parallel: one game per process, results in game order), then the
updates are applied game by game in that order, so a seed gives the same games and weights
whatever the number of processes.

What this package owns, one module per concern (each imports only the modules listed before it,
pipeline/, and training/ outside this package; never Dagster: assets/selfplay.py calls in):

- config: the settings, one dataclass each with a docstring per field: TDConfig (a self-play
  line), TDEvaluation (the published checks), KRKCheck (the KRvK check; it holds a TDConfig),
  RepresentationConfig (the representation study).
- models: the antisymmetric bitboard features and the linear, network and residual evaluations.
- update: the TD(lambda) / TD-Leaf(lambda) update of one game (GameRecord, td_update).
- checkpoints: a line's weights with its config and encoder (save_checkpoint, load_checkpoint).
- play: self-play games, generations, the process pool, a line in the store (play_line).
- checks: the published checks: win ratio against the random mover, the match against the
  traditional evaluation, the KRvK check (krk_generations).
- study: Hui's representations compared on hui_checkmate (supervised, through training.train).

Nothing is re-exported here: import each name from its module.
"""
