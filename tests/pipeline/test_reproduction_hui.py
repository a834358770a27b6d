"""Hui's row of the reproduction report is the TD learner's own figure (issue 37, item 3): the
share of 100-game batches won against the random mover within 80 plies, from td_evaluation's
result, with n games and its 95% interval; not Sabatelli's MLP playing 1-ply."""

from pipeline.research import published
from pipeline.research.reproduction import ReportInputs, batches_ours, render


def hui_figure() -> published.Figure:
    return next(f for f in published.EVALUATION_FIGURES if f.source == "Hui 2018")


def test_hui_figure_is_compared_with_the_td_learner_on_its_batches():
    f = hui_figure()
    assert (f.model, f.table, f.where, f.metric) == ("td_selfplay", "evaluation_results", "random", "win_ratio_batches")
    assert f.text() == "73-79.8%, peak 84%"  # Hui's range and peak, as published


def test_hui_row_is_rendered_from_a_td_evaluation_record():
    # td_evaluation's metadata as training.td.checks.win_ratio_batches gives it: 10 batches of 100.
    ratios = [0.80, 0.78, 0.84, 0.75, 0.79, 0.81, 0.77, 0.82, 0.76, 0.78]
    record = {
        "win_ratio_mean": 0.79,
        "win_ratio_interval": [0.7715, 0.8085],
        "win_ratio_peak": 0.84,
        "batch_ratios": ratios,
        "batch_games": 100,
    }
    f = hui_figure()
    ours = {(f.model, f.table, f.where, f.metric): batches_ours(record)}
    text = render(ReportInputs([f], ours, {f.model: "8 generations of 20 games"}, [], {}))
    row = next(line for line in text.splitlines() if line.startswith("| Hui 2018 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "td_selfplay" and cells[3] == "73-79.8%, peak 84%"
    assert cells[8].startswith("79.00%") and "77.15%" in cells[8] and "80.85%" in cells[8]  # its 95% interval
    assert cells[9] == "1,000"  # 10 batches x 100 games
    assert cells[10] == "8 generations of 20 games"


def test_no_td_evaluation_figure_is_not_measured():
    assert batches_ours({}) is None
