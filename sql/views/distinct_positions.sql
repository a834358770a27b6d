-- One row per distinct position (polyglot key + the full position: planes, side to move,
-- castling, en passant), how many position rows it has, and where it was first seen
-- (lowest game_id, then ply). Labels are made per distinct position.
CREATE OR REPLACE VIEW distinct_positions AS
SELECT position_key, planes, side_to_move, castling, ep_square,
       count(*) AS occurrences,
       min({'game_id': game_id, 'ply': ply}) AS first_seen
FROM positions
GROUP BY position_key, planes, side_to_move, castling, ep_square;
