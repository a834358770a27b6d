"""The demo's choices that need no run: which real archives it links, and how it words its result."""

from assets.cli.demo import real_archives, verdict


def test_real_archives_are_the_2024_fics_standard_files_of_the_folder(tmp_path):
    for name in (
        "ficsgamesdb_202401_standard2000_nomovetimes_397466.pgn.zst",
        "ficsgamesdb_202404_standard2000_nomovetimes_398056.pgn.zst",
        "ficsgamesdb_202212_blitz2000_nomovetimes_271471.pgn.zst",  # blitz, 2022: not the demo's
        "lichess_ju-key_2017-01-07.pgn",
    ):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in real_archives(tmp_path)] == [
        "ficsgamesdb_202401_standard2000_nomovetimes_397466.pgn.zst",
        "ficsgamesdb_202404_standard2000_nomovetimes_398056.pgn.zst",
    ]
    assert real_archives(tmp_path / "missing") == []


def test_verdict_compares_with_the_better_baseline_beyond_noise():
    # 4,000 test positions, baselines 71% and 80%: the noise of a difference is about 1.75 points.
    clear = verdict(0.84, 0.71, 0.80, 4000)
    assert clear.startswith("demo result: the 3-class network scores 84.00% on 4,000 test positions")
    assert "majority class 71.00%, material rule 80.00% (+/-1.75% noise): it has learnt more than material" in clear
    assert "learnt little beyond it" in verdict(0.81, 0.71, 0.80, 4000)
    assert "beats the majority class but has not learnt material yet" in verdict(0.767, 0.74, 0.812, 17510)
    assert "nothing beyond the majority class" in verdict(0.7188, 0.7188, 0.7963, 1561)  # issue 19's 10k rows
    assert "learnt little beyond it" in verdict(0.72, 0.71, 0.66, 4000)  # majority is the better one here
