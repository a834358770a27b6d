from assets.definitions import build_defs


def test_definitions_load_with_every_asset_check_sensor_schedule_and_job():
    defs = build_defs({})
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"games", "rejected_games", "positions", "duckdb_views", "labels", "sabatelli_3class",
            "sabatelli_15class", "sabatelli_20class", "sabatelli_regression", "deepchess", "lubeck_wdl",
            "hui_checkmate", "piece_values", "mlp_bitmap_3class", "mlp_algebraic_3class", "cnn_bitmap_3class",
            "cnn_algebraic_3class", "mlp_bitmap_15class", "mlp_bitmap_20class", "mlp_bitmap_regression",
            "lubeck_wdl_mlp", "cnn_features_3class", "cnn_features_15class", "model_results"} <= keys
    assert defs.resolve_sensor_def("archives_sensor")
    assert defs.resolve_job_def("ingest_archive")
    assert defs.resolve_job_def("relabel_labels")
    checks = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert {"reconciles_with_file", "one_position_per_ply", "coverage", "scores_in_range",
            "no_duplicate_labels", "disjoint_splits", "class_balance", "label_coverage", "rows_per_split"} <= checks


def test_nightly_schedule_defaults_to_two_oclock_and_reads_its_settings_from_the_environment():
    default = build_defs({}).resolve_schedule_def("nightly_relabel")
    assert default.cron_schedule == "0 2 * * *"
    assert default.default_status.value == "RUNNING"
    custom = build_defs({"CHESS_PIPELINE_RELABEL_CRON": "30 3 * * 1", "CHESS_PIPELINE_RELABEL_TZ": "Europe/Oslo",
                         "CHESS_PIPELINE_RELABEL_DEPTH": "14"}).resolve_schedule_def("nightly_relabel")
    assert custom.cron_schedule == "30 3 * * 1"
    assert custom.execution_timezone == "Europe/Oslo"
    assert "depth 14" in custom.description
