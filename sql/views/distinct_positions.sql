-- One row per distinct position (polyglot key + the full position: planes, side to move,
-- castling, en passant), how many position rows it has, and where it was first seen
-- (lowest game_id, then ply). Labels are made per distinct position.
CREATE OR REPLACE VIEW distinct_positions AS
SELECT position_key, planes, side_to_move, castling, ep_square,
       count(*) AS occurrences,
       min({'game_id': game_id, 'ply': ply}) AS first_seen
FROM positions
GROUP BY position_key, planes, side_to_move, castling, ep_square;

-- Whether a position key is in one of the labels shards shard_list, of `shards` shards
-- (position_key % shards). The casts keep the modulus in 64 bits: with an INTEGER `shards`
-- DuckDB widens every key to HUGEINT first, which made a shard's query several times slower.
CREATE OR REPLACE MACRO in_shards(position_key, shard_list, shards) AS
    list_contains(CAST(shard_list AS UBIGINT[]), position_key % CAST(shards AS UBIGINT));

-- distinct_positions of some shards only. The shard filter is applied to the position rows,
-- before they are grouped: DuckDB does not push a filter on the view's output through its
-- GROUP BY, so `FROM distinct_positions WHERE <shard>` grouped every position of the store
-- first (4.4 s for one shard of 10M positions, against 0.5 s here; benchmarks/scale.py).
CREATE OR REPLACE MACRO shard_distinct_positions(shard_list, shards) AS TABLE
SELECT position_key, planes, side_to_move, castling, ep_square,
       count(*) AS occurrences,
       min({'game_id': game_id, 'ply': ply}) AS first_seen
FROM positions
WHERE in_shards(position_key, shard_list, shards)
GROUP BY position_key, planes, side_to_move, castling, ep_square;
