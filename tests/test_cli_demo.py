"""The demo's choices that need no run: which real archives it links, and how it words its result."""

from pathlib import Path

from cli.demo import real_archives, verdict


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


def test_verdict_takes_the_paired_interval_clustered_by_game_when_given():
    # Issue 19's demo set: material 81.2% on 17,510 test positions of 393 games. A network 1.8 points
    # ahead is beyond the interval that takes each position for independent (+/-0.82), but within
    # the paired one clustered by game (+/-1.86): noise, said so.
    assert "learnt more than material" in verdict(0.830, 0.740, 0.812, 17510)
    leads = {"material_lead": 0.018, "material_lead_ci95": 0.0186, "lead_clusters": 393}
    noisy = verdict(0.830, 0.740, 0.812, 17510, leads)
    said = "material rule 81.20%; lead over material +1.80%, its 95% interval +/-1.86% (paired, clustered by the 393"
    assert said in noisy
    assert "within noise of the better baseline" in noisy
    clear = verdict(
        0.834, 0.740, 0.812, 17510, {"material_lead": 0.022, "material_lead_ci95": 0.0161, "lead_clusters": 393}
    )
    assert clear.endswith("it has learnt more than material")
    over_majority = {"majority_lead": 0.01, "majority_lead_ci95": 0.02, "lead_clusters": 100}
    assert "lead over the majority class" in verdict(0.72, 0.71, 0.66, 4000, over_majority)


def test_verdict_says_per_position_when_no_game_grouping_applied():
    # lead_clusters 0: the test rows could not be matched to their games, the interval is per row.
    leads = {"material_lead": 0.018, "material_lead_ci95": 0.0082, "lead_clusters": 0}
    said = verdict(0.830, 0.740, 0.812, 17510, leads)
    assert "(paired, per position (no game grouping))" in said and "test games" not in said


def test_verdict_judges_the_majority_class_by_its_own_lead_and_interval():
    # Far below material, 2 points over the majority class: beyond the majority lead's own interval
    # (+/-1.5) it beats the majority class; within it (+/-3.0) it has not, whatever material's interval.
    below = {"material_lead": -0.05, "material_lead_ci95": 0.01, "lead_clusters": 300}
    beats = verdict(0.76, 0.74, 0.81, 17510, below | {"majority_lead": 0.02, "majority_lead_ci95": 0.015})
    assert "it beats the majority class but has not learnt material yet" in beats
    noise = verdict(0.76, 0.74, 0.81, 17510, below | {"majority_lead": 0.02, "majority_lead_ci95": 0.03})
    assert "it has learnt nothing beyond the majority class" in noise


def test_a_store_without_suites_links_the_shared_sts_and_kaufman_suites_once(shared_data, tmp_path, monkeypatch):
    from cli.demo import DemoConfig, link_suites
    from pipeline.store.store import Store

    monkeypatch.delenv("CHESS_PIPELINE_SUITES", raising=False)
    assert Path(DemoConfig().suites) == shared_data / "epd"  # the demo's default folder of suites
    store = Store(tmp_path / "store").ensure()
    linked = link_suites(store, Path(DemoConfig().suites))
    assert sorted(p.name for p in linked) == ["STS1-STS15_LAN_v3.epd", "kaufman.epd"]
    for name in ("STS1-STS15_LAN_v3.epd", "kaufman.epd"):  # links, read in place
        link = store.root / "suites" / name
        assert link.is_symlink() and link.resolve() == (shared_data / "epd" / name).resolve()
    assert link_suites(store, Path(DemoConfig().suites)) == []  # the store has suites now: nothing more


def test_suites_are_linked_only_into_a_store_whose_evaluation_finds_none(tmp_path, monkeypatch):
    from cli.demo import link_suites
    from pipeline.store.store import Store

    source = tmp_path / "src"
    source.mkdir()
    (source / "a.epd").write_text('8/8/8/8/8/8/8/K1k5 w - - bm Kb1; id "a.1";\n')
    (source / "notes.txt").write_text("not a suite")
    monkeypatch.delenv("CHESS_PIPELINE_SUITES", raising=False)
    own = Store(tmp_path / "own").ensure()
    (own.root / "suites").mkdir()
    (own.root / "suites" / "mine.epd").write_text('8/8/8/8/8/8/8/K1k5 w - - bm Ka2; id "m.1";\n')
    assert link_suites(own, source) == []  # its own suites stay the ones scored
    assert link_suites(Store(tmp_path / "empty").ensure(), tmp_path / "missing") == []
    # CHESS_PIPELINE_SUITES names the suites the evaluation reads: nothing is linked anywhere.
    monkeypatch.setenv("CHESS_PIPELINE_SUITES", str(tmp_path / "elsewhere"))
    other = Store(tmp_path / "other").ensure()
    assert link_suites(other, source) == []
    assert not (tmp_path / "elsewhere").exists() and not (other.root / "suites").exists()
    monkeypatch.delenv("CHESS_PIPELINE_SUITES")
    assert [p.name for p in link_suites(other, source)] == ["a.epd"]
