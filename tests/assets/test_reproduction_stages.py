"""What `chess-pipeline reproduce` runs by default and with its optional stage (issue 37, item 1):
by default what the published figures need (1-ply suites, Kaufman, DeepChess's pairs and buckets,
the piece values, Lubeck's grid, Hui's TD learner and its check); the matches, Elo, each model's
evaluation page, the deeper suites and the models with no published figure with `--with ours`."""

import dataclasses
import warnings

import pytest

from assets.reproduce import (
    PUBLISHED_MODELS,
    REPORT,
    REPRODUCED,
    ReportConfig,
    grid_extra,
    job_assets,
    job_selection,
    stage_configs,
)
from cli.reproduce_config import ReproduceConfig, settings_text, step_kind
from pipeline.research.budget import EVALUATION_SECONDS, evaluation_reserve
from training.td.config import TDConfig

NO_FIGURE = {
    "mlp_material_3class",
    "mlp_counts_3class",
    "cnn_bitmap_3class_regularised",
    "cnn_features_3class_regularised",
    "mlp_bitmap_15class_regularised",
    "mlp_bitmap_20class_regularised",
    "mlp_bitmap_regression_regularised",
    "piece_value_net_result",
}
OURS = {"eval_head_to_head", "elo_ratings"}


def steps(stages=()):
    models = PUBLISHED_MODELS if not stages else REPRODUCED
    return job_assets(list(models), grid_extra(list(models)), stages)


def test_default_selection_is_what_the_published_figures_need():
    names = steps()
    assert set(PUBLISHED_MODELS) == set(REPRODUCED) - NO_FIGURE
    assert not NO_FIGURE & set(names)
    assert not OURS & set(names)
    assert not [n for n in names if n.startswith(("eval_matches_", "eval_report_"))]
    assert {f"eval_suites_{m}" for m in PUBLISHED_MODELS} <= set(names)
    assert {"eval_pairs_deepchess_net", "eval_piece_values_piece_value_net", "lubeck_grid"} <= set(names)
    assert names.index("td_selfplay") < names.index("td_evaluation") < names.index(REPORT) == len(names) - 1


def test_the_stage_ours_adds_the_matches_elo_and_the_models_with_no_figure():
    names = steps(("ours",))
    assert NO_FIGURE | OURS <= set(names)
    assert {f"eval_matches_{m}" for m in REPRODUCED} <= set(names)
    assert names.index("td_evaluation") < names.index("elo_ratings")  # elo rates the TD games too
    assert set(steps()) < set(names)


def test_one_model_named_plays_no_td_line():
    assert not {"td_selfplay", "td_evaluation"} & set(job_assets(["mlp_bitmap_3class"]))


def test_the_dagster_jobs_select_the_same_assets():
    from assets.definitions import build_defs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = build_defs({}).resolve_asset_graph()
    for stages in ((), ("ours",)):
        keys = {k.to_user_string() for k in job_selection(stages).resolve(graph)}
        assert set(steps(stages)) - {"lubeck_grid"} <= keys  # the job holds every step the command runs
        # and nothing more, but the Hui dataset no model of the job trains on (hui_representations' own)
        assert keys - set(steps(stages)) <= {"hui_checkmate", "published_split_hui_checkmate"}
    default = {k.to_user_string() for k in job_selection().resolve(graph)}
    assert not NO_FIGURE & default and not OURS & default and {"td_selfplay", "td_evaluation"} <= default


@pytest.mark.parametrize("stages, depths", [((), [1]), (("ours",), [1, 2])])
def test_suites_search_the_published_depth_unless_ours(stages, depths):
    from assets.evaluation import SuitesConfig

    ops = stage_configs({"eval_suites_x": SuitesConfig(), REPORT: ReportConfig()}, stages, quick=False)
    assert ops["eval_suites_x"].depths == depths
    assert ops[REPORT].stages == list(stages)


def test_td_steps_keep_huis_settings_and_protocol():
    ops = stage_configs({}, (), quick=False, workers=2)
    line, check = ops["td_selfplay"], ops["td_evaluation"]
    published = TDConfig()
    assert (line.learner, line.model, line.lam, line.lr, line.depth) == ("td_leaf", "linear", 0.7, 0.01, 2)
    assert (line.lam, line.lr, line.curve_plies) == (published.lam, published.lr, 80)
    assert (check.batches, check.batch_games, check.line, check.openings) == (10, 100, line.name, 0)
    assert ops["td_selfplay"].workers == 2
    assert stage_configs({}, ("ours",), quick=False)["td_evaluation"].openings == 20  # the match: ours


def test_the_budget_reserves_the_td_steps():
    names = steps()
    after = names[names.index("model_results") :]
    for evaluation in ("quick", "full"):
        reserve = evaluation_reserve(after, {}, evaluation)
        figures = EVALUATION_SECONDS[evaluation]
        assert reserve.seconds >= figures["td_selfplay"] + figures["td_evaluation"] > 0
        without = evaluation_reserve([n for n in after if not n.startswith("td_")], {}, evaluation)
        assert reserve.seconds - without.seconds == pytest.approx(figures["td_selfplay"] + figures["td_evaluation"])


def test_the_reserve_counts_the_suites_at_the_depths_the_stages_search():
    """By default the suites search at 1 ply (17.3 s a model measured, EVALUATION_SECONDS' note);
    with the stage ours at depths 1 and 2 (231 s). Before: both were reserved the second, about
    13 times the default's, about 43 minutes too many for the 12 models with a published figure."""
    import dagster as dg

    from cli.reproduce_steps import evaluation_reserve_of

    with dg.DagsterInstance.ephemeral() as instance:
        for stages, evaluation, suite_s in (((), "full", 17.3), (("ours",), "ours", 231.0)):
            models = list(PUBLISHED_MODELS if not stages else REPRODUCED)
            names = steps(stages)
            cfg = ReproduceConfig(models=tuple(models), with_stages=stages)
            reserve = evaluation_reserve_of(instance, cfg, names)
            assert reserve.evaluation == evaluation and EVALUATION_SECONDS[evaluation]["eval_suites_"] == suite_s
            after = names[names.index("model_results") :]
            suites = [n for n in after if n.startswith("eval_suites_")]
            rest = evaluation_reserve([n for n in after if n not in suites], {}, evaluation)
            assert reserve.seconds - rest.seconds == pytest.approx(len(suites) * suite_s)
            assert len(suites) == len(models)
        quick = evaluation_reserve_of(instance, dataclasses.replace(cfg, quick_eval=True), names)
        assert quick.evaluation == "quick"  # --quick-eval's figures whatever the stages
    assert "full evaluation with the stage ours;" in reserve.text()


def test_the_td_line_is_kept_whatever_the_evaluation_settings():
    cfg = ReproduceConfig()
    other = dataclasses.replace(cfg, openings=3, with_stages=("ours",))
    assert step_kind("td_selfplay") == "selfplay" and step_kind("td_evaluation") == "evaluation"
    assert settings_text(cfg, "selfplay") == settings_text(other, "selfplay")
    assert settings_text(cfg, "evaluation") != settings_text(other, "evaluation")
