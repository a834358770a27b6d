"""eval_head_to_head plays only models it depends on (issue 14, item 6): a pair naming another
model would play a checkpoint the asset's lineage does not show."""

import dagster as dg
import pytest
from pydantic import ValidationError

from assets.evaluation import HEAD_TO_HEAD_MODELS, HeadToHeadConfig, eval_head_to_head
from assets.resources import StoreResource


def test_the_default_pairs_name_only_the_assets_dependencies():
    deps = {k.to_user_string() for k in eval_head_to_head.asset_deps[eval_head_to_head.key]}
    assert deps == set(HEAD_TO_HEAD_MODELS)
    assert {m for pair in HeadToHeadConfig().pairs for m in pair} <= deps


@pytest.mark.parametrize(
    "pairs, expect",
    [
        ([["mlp_bitmap_3class", "cnn_bitmap_3class"]], "cnn_bitmap_3class: not a model eval_head_to_head depends on"),
        ([["mlp_bitmap_3class"]], "two different models"),
        ([["mlp_bitmap_3class", "mlp_bitmap_3class"]], "two different models"),
    ],
)
def test_pairs_naming_other_models_are_refused_with_the_valid_names(pairs, expect):
    with pytest.raises(ValidationError) as e:
        HeadToHeadConfig(pairs=pairs)
    assert expect in str(e.value) and "mlp_bitmap_3class, cnn_features_3class" in str(e.value)


def test_a_run_with_such_a_pair_fails_before_it_plays(tmp_path):
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [eval_head_to_head],
            instance=instance,
            raise_on_error=False,
            resources={"store": StoreResource(root=str(tmp_path / "store"))},
            run_config={"ops": {"eval_head_to_head": {"config": {"pairs": [["mlp_bitmap_3class", "lubeck_wdl_mlp"]]}}}},
        )
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    error, messages = failure.step_failure_data.error, []
    while error is not None:  # Dagster's step error, caused by the config's validation error
        messages.append(error.message)
        error = error.cause
    message = "\n".join(messages)
    assert "lubeck_wdl_mlp: not a model eval_head_to_head depends on" in message
    assert "has not been materialised" not in message
