"""The settings of TD self-play (training/td): a line (TDConfig), the published checks of its
last checkpoint (TDEvaluation), the KRvK check (KRKCheck, which holds the TDConfig of its
self-play) and the representation study (RepresentationConfig). Each field's docstring is its
description in the CLI's help and the Dagster launchpad (pipeline/settings.py)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from pipeline.settings import literal_choices
from training.choices import check_choice

Learner = Literal["td_leaf", "td_lambda"]
ModelKind = Literal["linear", "network", "residual"]
ClockEnd = Literal["draw", "unfinished"]


@dataclass
class TDConfig:
    """Self-play TD learning (Hui 2018): what is learnt, how games are searched, how long."""

    name: str = "td"
    """Name of this self-play line: its games go to `archives/selfplay/<name>/gen-NNNN.pgn` and
    its weights to `selfplay/<name>/gen-NNNN.pt`; a run continues the line from the checkpoint
    of its last materialisation when the settings match."""
    learner: Learner = "td_leaf"
    """td_leaf (the leaves of the principal variations) or td_lambda (the positions played)."""
    model: ModelKind = "linear"
    """linear (piece-square weights over the antisymmetric bitboard, one tanh unit), network
    (one tanh hidden layer, no biases) or residual (the linear model plus a tanh hidden layer:
    it starts as the linear model, the layer's output weights at 0, and the layer learns what
    piece-square weights cannot, such as where one king stands relative to the other)."""
    hidden: int = 32
    """Hidden units of the network and residual models."""
    init: Literal["material", "random", "zero"] = "material"
    """First weights of the linear model (and of the residual model's linear part): material (P 1,
    N 3, B 3, R 5, Q 9 pawns x 0.1 on every square, as KnightCap started TD-Leaf from material),
    random (normal, sd 0.01, seeded) or zero (every move ties: nothing to learn from until a game
    ends decisively). The network always starts random."""
    lam: float = 0.7
    """lambda, the decay of later temporal differences (published: 0.7)."""
    lr: float = 0.01
    """Learning rate of the per-game update (published: 0.01)."""
    depth: int = 2
    """Plies of the alpha-beta search that plays and picks the TD-Leaf leaves."""
    generations: int = 1
    """Generations to play in this run (each: its games, an archive, a checkpoint); the command
    line's 0 plays none and only evaluates (--evaluate)."""
    games: int = 20
    """Self-play games per generation."""
    random_plies: int = 4
    """The first plies of every self-play game are random legal moves, so games differ."""
    max_plies: int = 160
    """A self-play game still going after this many plies ends unfinished (no result to learn)."""
    clock_ends: ClockEnd = "draw"
    """What TD learns from a self-play game the fifty-move (claimed) or seventy-five-move rule
    ends: draw (its result, 0, is the last target) or unfinished (no result: the last position's
    value stands, as for a game stopped at the cap). The move counter is not in the input, so for
    the evaluation these ends are a time limit, not a value of the position (Pardo et al. 2018,
    "Time limits in reinforcement learning": bootstrap at a time-out). The KRvK check uses
    unfinished: there most games end by the fifty-move rule, and as draws they pull the values of
    a won ending towards 0 (README, Self-play)."""
    start: Literal["standard", "krk"] = "standard"
    """standard: the initial position; krk: random king-and-rook-against-king positions."""
    curve_games: int = 20
    """Games against the random mover after each generation (win ratio within 80 plies, the
    learning curve); 0 skips."""
    curve_plies: int = 80
    """A game against the random mover counts as won only inside this many plies (Hui's test)."""
    seed: int = 0
    """Seed of the random plies, the start positions, the network's first weights and the
    random mover: the same seed gives the same games and weights."""
    workers: int = 0
    """Processes playing games at once (0: one per core; 1: in this process)."""

    def __post_init__(self):
        hints = typing.get_type_hints(TDConfig)
        for f in dataclasses.fields(self):  # the choices are the Literal annotations' values
            if (valid := literal_choices(hints[f.name])) is not None:
                check_choice(f.name, getattr(self, f.name), valid)
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise ValueError(f"name {self.name!r}: use letters, digits, '-' and '_' (it names folders)")
        if self.depth < 1:
            raise ValueError(f"depth must be at least 1, got {self.depth}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam (lambda) must be in [0, 1], got {self.lam}")
        if self.generations < 0:
            raise ValueError(f"generations must be 0 or more, got {self.generations}")
        for name in ("games", "max_plies"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


@dataclass
class TDEvaluation:
    """The published checks of a self-play line's last checkpoint."""

    line: str = ""
    """The self-play line (TDConfig.name) whose latest checkpoint is checked; empty: the line
    td_selfplay materialised last."""
    batches: int = 10
    """Batches of games against the random mover (published: 10)."""
    batch_games: int = 100
    """Games per batch (published: 100)."""
    eval_depth: int = 0
    """Search depth of the evaluation games (both the random-mover batches and the match against
    the traditional evaluation, which searches as deep); 0: the depth the line was trained at. A
    line trained at depth 1 wins 14 to 21 points more against the random mover at depth 2 (README)."""
    openings: int = 20
    """Sabatelli's openings for the match against the traditional evaluation, each twice (0 skips)."""
    max_plies: int = 400
    """A game against the traditional evaluation still going after this many plies is unfinished."""
    workers: int = 0
    """Processes playing games at once (0: one per core)."""

    def __post_init__(self):
        for name in ("batches", "batch_games"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.eval_depth < 0:
            raise ValueError(f"eval_depth must be 0 (the line's own depth) or more, got {self.eval_depth}")


def krk_selfplay() -> TDConfig:
    """The self-play of the KRvK check: random KRvK starts, no random plies, 40 games a
    generation, the fifty-move ends unfinished; TDConfig's defaults otherwise. Why those:

    - depth 2, not 1: a 1-ply search does not see the reply, so the attacker leaves its rook en
      prise and the defender takes it (5 of 8 games, untrained, whatever the first weights);
      those games are draws by insufficient material, and TD learns from them that KRvK is
      worth a draw. At 2 plies the rook stays until the fifty-move rule ends the game: on the
      move that ends it every move scores a draw, so the rook may be left en prise (of the
      first 14 games of generation 1, seed 0, 2 end so, both at ply 100).
    - init material: the rook is worth 0.5 from the start, so the search keeps it; zero: losing
      the rook scores the same as keeping it (a draw is 0).
    - clock_ends unfinished: in KRvK every game that is not mated and keeps the rook ends by the
      fifty-move rule (no pawn moves, the only capture is of the rook), and as draws those
      games pull the values of a won ending towards 0. Measured over 8 generations, seeds 0-2,
      neither choice makes the check robust (README, Self-play)."""
    return TDConfig(name="krk", start="krk", games=40, random_plies=0, clock_ends="unfinished", curve_games=0)


KRK_TD_UNUSED = ("name", "generations", "start", "curve_games", "curve_plies")
"""TDConfig's fields the KRvK check does not read (krk_generations: KRvK starts, no games against
the random mover, KRKCheck.max_generations for generations, no line to name)."""


@dataclass
class KRKCheck:
    """The KRvK check: self-play on random KRvK positions until the search mates from ours."""

    max_generations: int = 20
    """Give up after this many generations."""
    check_depth: int = 2
    """Search depth of the check from the mate-in-3 position: a mate in 3 needs 5 plies, so at
    2 the search cannot see it and the evaluation must choose the first two moves (at 3 the
    untrained evaluations already mate, by their move order)."""
    mate_plies: int = 5
    """The check passes when the search mates within this many plies: 5 asks for the mate in 3
    itself; more asks only that the evaluation lead the 2-ply search to a mate."""
    defender_depth: int = 6
    """Plies the defender (the traditional evaluation) searches: at 6 it sees every mate of the
    mate in 3 and delays it as long as it can."""
    lead_plies: int = 60
    """The check's game goes on to this many plies (at least mate_plies): a later mate is the
    weaker result, that the learned evaluation leads the 2-ply search to a mate at all, and its
    first generation is reported beside the mate in 3's (the game is deterministic, so its first
    plies are the strict check's game). A game that does not mate costs its 60 plies against the
    6-ply defender: about 15 s on this 2-core machine, against the self-play's 30 s to 2 minutes."""
    td: TDConfig = field(default_factory=krk_selfplay)
    """The self-play settings (its start is always krk, its games against the random mover none;
    generations and the name are not used): krk_selfplay's by default."""

    def __post_init__(self):
        for name in ("check_depth", "mate_plies", "defender_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.td.hidden < 1:
            raise ValueError(f"hidden must be at least 1, got {self.td.hidden}")
        if self.lead_plies < self.mate_plies:
            raise ValueError(f"lead_plies must be at least mate_plies ({self.mate_plies}), got {self.lead_plies}")

    def td_config(self) -> TDConfig:
        """The self-play settings of this check (random KRvK starts, no games against the random mover)."""
        return dataclasses.replace(self.td, start="krk", curve_games=0)


@dataclass
class RepresentationConfig:
    """The representation comparison: the same small network trained on hui_checkmate with each
    representation, several seeds each."""

    seeds: int = 3
    """Training runs per representation (seeds 0..seeds-1)."""
    hidden: int = 64
    """Hidden units of the network (one ReLU layer; the `lubeck` preset's shape)."""
    epochs: int = 5
    """Most epochs of each run (early stopping may end sooner)."""
    max_train_rows: int = 0
    """Use only the first rows of train (0: all)."""
    max_minutes: float = 1.0
    """Wall-time bound of each run."""
