def test_definitions_load_with_every_asset_check_sensor_and_job():
    from assets.definitions import defs

    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"games", "rejected_games", "positions", "duckdb_views"} <= keys
    assert defs.resolve_sensor_def("archives_sensor")
    assert defs.resolve_job_def("ingest_archive")
    checks = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert {"reconciles_with_file", "one_position_per_ply"} <= checks
