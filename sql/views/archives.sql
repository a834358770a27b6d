-- Per-archive reconciliation: games + rejected, positions, and plies.
CREATE OR REPLACE VIEW archive_summary AS
WITH g AS (
    SELECT archive, count(*) AS games, sum(ply_count) AS plies,
           count(*) FILTER (WHERE result_mismatch) AS result_mismatches
    FROM games GROUP BY archive
), r AS (
    SELECT archive, count(*) AS rejected FROM rejected_games GROUP BY archive
), p AS (
    SELECT g.archive, count(*) AS positions
    FROM positions p JOIN games g USING (game_id) GROUP BY g.archive
)
SELECT coalesce(g.archive, r.archive) AS archive,
       coalesce(g.games, 0) AS games,
       coalesce(r.rejected, 0) AS rejected,
       coalesce(g.games, 0) + coalesce(r.rejected, 0) AS games_in_file,
       coalesce(g.plies, 0)::BIGINT AS plies,
       coalesce(p.positions, 0) AS positions,
       coalesce(g.result_mismatches, 0) AS result_mismatches
FROM g FULL JOIN r USING (archive) LEFT JOIN p USING (archive)
ORDER BY archive;
