-- Macros for ad-hoc SQL over position rows (planes: 96 bytes, 12 little-endian uint64
-- bitboards in the order P N B R Q K p n b r q k; square 0 = a1, 63 = h8).

-- Number of pieces on plane i (0 = P .. 11 = k). The byte order does not matter to a count.
CREATE OR REPLACE MACRO plane_count(planes, i) AS
    bit_count(('0x' || substr(hex(planes), 16 * i + 1, 16))::UBIGINT);

-- Whether plane i has a piece on square sq.
CREATE OR REPLACE MACRO plane_has(planes, i, sq) AS
    ((('0x' || substr(hex(planes), 16 * i + 2 * (sq // 8) + 1, 2))::INTEGER >> (sq % 8)) & 1) = 1;

-- Material balance in pawns from White's point of view (P 1, N 3, B 3, R 5, Q 9).
CREATE OR REPLACE MACRO material(planes) AS
    plane_count(planes, 0) + 3 * plane_count(planes, 1) + 3 * plane_count(planes, 2)
    + 5 * plane_count(planes, 3) + 9 * plane_count(planes, 4)
    - plane_count(planes, 6) - 3 * plane_count(planes, 7) - 3 * plane_count(planes, 8)
    - 5 * plane_count(planes, 9) - 9 * plane_count(planes, 10);

-- Non-pawn material in phase units (N, B 1; R 2; Q 4): 24 at the start, 0 with kings and pawns only.
CREATE OR REPLACE MACRO phase_units(planes) AS
    least(24, plane_count(planes, 1) + plane_count(planes, 2) + plane_count(planes, 7) + plane_count(planes, 8)
              + 2 * (plane_count(planes, 3) + plane_count(planes, 9))
              + 4 * (plane_count(planes, 4) + plane_count(planes, 10)));

-- Game phase: opening / middlegame (by move number and material) or endgame (little material).
CREATE OR REPLACE MACRO game_phase(planes, fullmove_number) AS
    CASE WHEN phase_units(planes) <= 8 THEN 'endgame'
         WHEN fullmove_number <= 12 AND phase_units(planes) >= 20 THEN 'opening'
         ELSE 'middlegame' END;

-- The board field of a FEN.
CREATE OR REPLACE MACRO fen_board(planes) AS
    array_to_string(list_transform(range(7, -1, -1), lambda rank:
        regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(regexp_replace(regexp_replace(
            array_to_string(list_transform(range(8), lambda file:
                coalesce(list_extract(list_filter(list_transform(range(12), lambda i:
                    CASE WHEN plane_has(planes, i, rank * 8 + file) THEN substr('PNBRQKpnbrqk', i + 1, 1) END),
                    lambda c: c IS NOT NULL), 1), '.')), ''),
        '\.{8}', '8', 'g'), '\.{7}', '7', 'g'), '\.{6}', '6', 'g'), '\.{5}', '5', 'g'),
        '\.{4}', '4', 'g'), '\.{3}', '3', 'g'), '\.{2}', '2', 'g'), '\.', '1', 'g')), '/');

-- A full FEN from a stored row (as pipeline.ingest.encoding.fen_from_row gives it).
CREATE OR REPLACE MACRO fen(planes, side_to_move, castling, ep_square, halfmove_clock, fullmove_number) AS
    fen_board(planes) || ' ' || side_to_move || ' '
    || coalesce(nullif(CASE WHEN castling & 1 = 1 THEN 'K' ELSE '' END || CASE WHEN castling & 2 = 2 THEN 'Q' ELSE '' END
                       || CASE WHEN castling & 4 = 4 THEN 'k' ELSE '' END || CASE WHEN castling & 8 = 8 THEN 'q' ELSE '' END, ''), '-')
    || ' ' || CASE WHEN ep_square IS NULL OR ep_square < 0 THEN '-'
                   ELSE chr(97 + ep_square % 8) || (ep_square // 8 + 1)::VARCHAR END
    || ' ' || halfmove_clock || ' ' || fullmove_number;

-- Sabatelli's classes from a centipawn score of the side the target is for (mates beyond any
-- edge). 3 classes: 0 loss (< -150), 1 draw (-150..150), 2 win (> 150).
CREATE OR REPLACE MACRO sabatelli_class3(cp) AS
    CASE WHEN cp IS NULL THEN NULL WHEN cp < -150 THEN 0 WHEN cp > 150 THEN 2 ELSE 1 END;

-- 15 classes: 0..6 losses, one per pawn beyond -1.5 (0 = below -7.5, 6 = -2.5 <= cp < -1.5,
-- in cp: [-250, -150) is 6, [-350, -250) is 5, ...), 7 draw [-150, 150], 8..14 wins mirrored
-- (8 = (150, 250], ..., 14 = above 750).
CREATE OR REPLACE MACRO sabatelli_class15(cp) AS
    CASE WHEN cp IS NULL THEN NULL WHEN cp < -150 THEN 7 - least(7, (-cp - 150 + 99) // 100)
         WHEN cp > 150 THEN 7 + least(7, (cp - 150 + 99) // 100)
         ELSE 7 END;

-- 20 classes: the 15-class edges with the draw region split into six half-pawn classes:
-- 0..6 losses as above, 7..12 = [-150,-100), [-100,-50), [-50,0), [0,50), [50,100), [100,150],
-- 13..19 wins.
CREATE OR REPLACE MACRO sabatelli_class20(cp) AS
    CASE WHEN cp IS NULL THEN NULL WHEN cp < -150 THEN 7 - least(7, (-cp - 150 + 99) // 100)
         WHEN cp > 150 THEN 12 + least(7, (cp - 150 + 99) // 100)
         ELSE 7 + least(5, (cp + 150) // 50) END;

-- Material on the board in pawns, both sides together, kings left out (P 1, N 3, B 3, R 5, Q 9):
-- 78 at the start.
CREATE OR REPLACE MACRO total_material(planes) AS
    plane_count(planes, 0) + 3 * plane_count(planes, 1) + 3 * plane_count(planes, 2)
    + 5 * plane_count(planes, 3) + 9 * plane_count(planes, 4)
    + plane_count(planes, 6) + 3 * plane_count(planes, 7) + 3 * plane_count(planes, 8)
    + 5 * plane_count(planes, 9) + 9 * plane_count(planes, 10);

-- The archive (partition key) and the part (`<archive>/data.parquet`, `<archive>/data-0001.parquet`,
-- ...) of a table's file, from its path (read_parquet(..., filename = true)): positions_by_archive
-- and position_book_by_part both name parts with file_part, so a book's part is the name of the
-- positions part it was made from. A filter on either is applied to the file names, so the other
-- files are never opened.
CREATE OR REPLACE MACRO file_archive(filename) AS regexp_extract(filename, '/archive=([^/]+)/[^/]+$', 1);
CREATE OR REPLACE MACRO file_part(filename) AS regexp_extract(filename, '/archive=([^/]+/[^/]+)$', 1);
