"""benchmarks/evaluation.py in a tiny run: both parts timed one way and the other, the same moves
and games both ways, and a ratio per part."""


def test_the_evaluation_benchmark_times_both_parts_and_checks_they_agree(stockfish, capsys):
    from benchmarks import evaluation

    ratios = evaluation.main(["--positions", "6", "--openings", "1", "--workers", "2"])
    printed = capsys.readouterr().out
    assert set(ratios) == {"suites", "matches"} and all(r > 0 for r in ratios.values())
    assert "6 positions at depths 1 and 2" in printed and "(12 games)" in printed  # 6 matches x 2 games
    assert f"ratio {ratios['matches']:.2f}x" in printed
