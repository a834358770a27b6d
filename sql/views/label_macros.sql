-- Macros over the label views (created after them).

-- The best label of each distinct position under one setting (engine '' = any engine):
-- a reproducible label (hash_cleared) before a hash-kept one, then the deepest, then the newest.
CREATE OR REPLACE MACRO setting_labels(kind, value, eng) AS TABLE
    SELECT * FROM labels
    WHERE limit_kind = kind AND limit_value = value AND (eng = '' OR engine = eng)
    QUALIFY row_number() OVER (PARTITION BY position_key, planes, side_to_move, castling, ep_square
                               ORDER BY hash_cleared IS NOT TRUE, depth DESC, labelled_at DESC) = 1;

-- Positions of Sabatelli's datasets: games where both players are rated over min_elo, plus
-- engine games (CCRL, self-play), each with its label under one setting (NULL when it has
-- none). score is from `pov`: 'side_to_move' (the thesis encodes every position as if White
-- were to move, so a Black-to-move position's score is negated and `mirrored` tells the
-- encoder to flip the board) or 'white'. Any other pov raises: the one-row `known` guard is
-- evaluated whatever the rows and columns asked for, so an empty store refuses it too.
CREATE OR REPLACE MACRO sabatelli_positions(min_elo, kind, value, eng, pov) AS TABLE
    SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
           p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
           l.cp AS cp_white, l.mate AS mate_white, l.score AS score_white,
           CASE WHEN pov = 'side_to_move' AND p.side_to_move = 'b' THEN -l.score ELSE l.score END AS score,
           (pov = 'side_to_move' AND p.side_to_move = 'b') AS mirrored
    FROM positions p
    JOIN games g USING (game_id)
    LEFT JOIN setting_labels(kind, value, eng) l
        ON l.position_key = p.position_key AND l.planes = p.planes AND l.side_to_move = p.side_to_move
       AND l.castling = p.castling AND l.ep_square IS NOT DISTINCT FROM p.ep_square
    CROSS JOIN (SELECT CASE WHEN pov IN ('side_to_move', 'white') THEN true
                            ELSE error('pov must be one of side_to_move, white; got ''' || coalesce(pov, 'NULL') || '''')
                       END AS pov_ok) known
    WHERE ((g.white_elo > min_elo AND g.black_elo > min_elo) OR g.source IN ('ccrl', 'selfplay')) AND known.pov_ok;

-- Positions of DeepChess's datasets: every position of a decisive game after move skip_moves not
-- reached by a capture, with `draw`, its rank in its game by a hash of sample_seed, game and ply
-- (deepchess takes the first per_game of each game; deepchess_scored takes them all for train).
CREATE OR REPLACE MACRO deepchess_positions(sample_seed, skip_moves) AS TABLE
    SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
           p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
           CASE g.outcome WHEN '1-0' THEN 'white' ELSE 'black' END AS winner,
           row_number() OVER (PARTITION BY p.game_id
                              ORDER BY md5(sample_seed::VARCHAR || ':' || p.game_id::VARCHAR || ':' || p.ply::VARCHAR)) AS draw
    FROM positions p
    JOIN games g USING (game_id)
    WHERE g.outcome IN ('1-0', '0-1') AND p.ply >= 2 * skip_moves AND NOT p.is_capture;
