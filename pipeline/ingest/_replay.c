/* Compiled ingest loops: SAN replay (the hot loop of pipeline.ingest.replay) and the movetext
 * tokenizer (pipeline.ingest.games.tokenize), in C.
 *
 * replay(state, sans, start, emit_initial) replays sans[start:] from state and stops at the
 * first move it does not resolve to exactly one legal move: an unusual SAN shape (long
 * algebraic pawn moves, lowercase or king promotions, null moves, drops), an illegal or
 * ambiguous move, or a king stepping two files. pipeline.ingest.replay hands that one move to
 * python-chess, which decides (and words the error), then calls back in for the rest.
 *
 * The move semantics follow python-chess's Board.parse_san and Board.push for standard
 * chess exactly: the same from-square filters (a pawn move without a file letter is a push),
 * the same en-passant rule (ep square set after every double step), the same castling
 * rights (rook squares, cleared by any move from or to them and by king moves).
 *
 * state: (pawns, knights, bishops, rooks, queens, kings, white, turn, castling, ep, halfmove,
 *         fullmove), ep 64 for none.
 * Returns (stop, records, ucis, captures, state): stop is the index of the first move not
 * replayed (len(sans) when all were); records is bytes of 11 little-endian uint64 per
 * position (pawns, knights, bishops, rooks, queens, kings, white, castling, ep, halfmove,
 * in_check), one per move replayed, preceded by the start position's when emit_initial;
 * ucis a list of str; captures bytes of 0/1 per move; state as given, after the last move.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t u64;

#define NO_EP 64
#define BIT(sq) (1ULL << (sq))
#define RANK(r) (0xFFULL << (8 * (r)))
#define FILE_(f) (0x0101010101010101ULL << (f))

enum { PAWN = 1, KNIGHT, BISHOP, ROOK, QUEEN, KING };

static u64 KNIGHT_ATT[64], KING_ATT[64];
static u64 PAWN_ATT[2][64]; /* [1 white / 0 black][sq]: squares a pawn of that colour on sq attacks */
static u64 RAY[8][64];      /* rays by direction, the square itself excluded */
/* Directions 0-3 go towards higher squares (the nearest blocker is the lowest set bit),
 * 4-7 towards lower squares (the highest set bit). */
static const int DIR_DF[8] = {1, 0, 1, -1, -1, 0, -1, 1};
static const int DIR_DR[8] = {0, 1, 1, 1, 0, -1, -1, -1};
/* Rook directions: 0 (E), 1 (N), 4 (W), 5 (S). Bishop: 2 (NE), 3 (NW), 6 (SW), 7 (SE). */

static PyObject *UCI_CACHE[64 * 64 * 5];

static void init_tables(void) {
    for (int sq = 0; sq < 64; sq++) {
        int f = sq & 7, r = sq >> 3;
        static const int kn[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};
        u64 n = 0, k = 0;
        for (int i = 0; i < 8; i++) {
            int ff = f + kn[i][0], rr = r + kn[i][1];
            if (ff >= 0 && ff < 8 && rr >= 0 && rr < 8) n |= BIT(rr * 8 + ff);
        }
        for (int df = -1; df <= 1; df++)
            for (int dr = -1; dr <= 1; dr++) {
                int ff = f + df, rr = r + dr;
                if ((df || dr) && ff >= 0 && ff < 8 && rr >= 0 && rr < 8) k |= BIT(rr * 8 + ff);
            }
        KNIGHT_ATT[sq] = n;
        KING_ATT[sq] = k;
        u64 w = 0, b = 0;
        if (r < 7 && f > 0) w |= BIT(sq + 7);
        if (r < 7 && f < 7) w |= BIT(sq + 9);
        if (r > 0 && f > 0) b |= BIT(sq - 9);
        if (r > 0 && f < 7) b |= BIT(sq - 7);
        PAWN_ATT[1][sq] = w;
        PAWN_ATT[0][sq] = b;
        for (int d = 0; d < 8; d++) {
            u64 ray = 0;
            int ff = f + DIR_DF[d], rr = r + DIR_DR[d];
            while (ff >= 0 && ff < 8 && rr >= 0 && rr < 8) {
                ray |= BIT(rr * 8 + ff);
                ff += DIR_DF[d];
                rr += DIR_DR[d];
            }
            RAY[d][sq] = ray;
        }
    }
}

static inline int lsb(u64 b) { return __builtin_ctzll(b); }
static inline int msb(u64 b) { return 63 - __builtin_clzll(b); }

static inline u64 ray_attacks(int sq, u64 occ, int d) {
    u64 ray = RAY[d][sq], blockers = ray & occ;
    if (!blockers) return ray;
    return ray ^ RAY[d][d < 4 ? lsb(blockers) : msb(blockers)];
}

static inline u64 rook_attacks(int sq, u64 occ) {
    return ray_attacks(sq, occ, 0) | ray_attacks(sq, occ, 1) | ray_attacks(sq, occ, 4) | ray_attacks(sq, occ, 5);
}

static inline u64 bishop_attacks(int sq, u64 occ) {
    return ray_attacks(sq, occ, 2) | ray_attacks(sq, occ, 3) | ray_attacks(sq, occ, 6) | ray_attacks(sq, occ, 7);
}

typedef struct {
    u64 pc[7]; /* pc[PAWN..KING] */
    u64 white;
    int turn; /* 1 white to move */
    u64 castling;
    int ep;
    long long halfmove, fullmove; /* FEN clocks may exceed 2**31 with the plies of a long game */
} Pos;

static inline u64 occupied(const Pos *p) {
    return p->pc[PAWN] | p->pc[KNIGHT] | p->pc[BISHOP] | p->pc[ROOK] | p->pc[QUEEN] | p->pc[KING];
}

/* Is sq attacked by the pieces of colour `by` (1 white)? */
static int attacked(const Pos *p, int sq, int by) {
    u64 occ = occupied(p);
    u64 them = by ? p->white : occ & ~p->white;
    if (KNIGHT_ATT[sq] & p->pc[KNIGHT] & them) return 1;
    if (KING_ATT[sq] & p->pc[KING] & them) return 1;
    if (PAWN_ATT[!by][sq] & p->pc[PAWN] & them) return 1;
    if (bishop_attacks(sq, occ) & (p->pc[BISHOP] | p->pc[QUEEN]) & them) return 1;
    if (rook_attacks(sq, occ) & (p->pc[ROOK] | p->pc[QUEEN]) & them) return 1;
    return 0;
}

static int king_square(const Pos *p, int colour) {
    u64 k = p->pc[KING] & (colour ? p->white : occupied(p) & ~p->white);
    return k ? msb(k) : -1;
}

/* Move a piece of type `pt` from -> to on a copy, with captures, en passant and promotion. */
static void make(Pos *q, int pt, int from, int to, int promo, int ep_capture) {
    u64 fb = BIT(from), tb = BIT(to);
    for (int t = PAWN; t <= KING; t++) q->pc[t] &= ~tb;
    if (!q->turn) q->white &= ~tb;
    if (ep_capture) {
        u64 cap = BIT(q->turn ? to - 8 : to + 8);
        q->pc[PAWN] &= ~cap;
        q->white &= ~cap;
    }
    q->pc[pt] &= ~fb;
    q->pc[promo ? promo : pt] |= tb;
    if (q->turn) q->white = (q->white & ~fb) | tb;
}

typedef struct {
    int from, to, promo, capture;
} Played;

/* Resolve one SAN against p and apply it. 0 when applied, -1 to leave the move to python-chess. */
static int play_san(Pos *p, const char *s, Py_ssize_t len, Played *out) {
    int c = p->turn;
    u64 occ = occupied(p);
    u64 us = c ? p->white : occ & ~p->white;
    u64 them = occ & ~us;
    if (len > 0 && (s[len - 1] == '+' || s[len - 1] == '#')) len--;

    int castle = 0;
    if ((len == 3 && (!memcmp(s, "O-O", 3) || !memcmp(s, "0-0", 3)))) castle = 1;
    if ((len == 5 && (!memcmp(s, "O-O-O", 5) || !memcmp(s, "0-0-0", 5)))) castle = 2;
    if (castle) {
        int home = c ? 4 : 60;
        int rook = castle == 1 ? home + 3 : home - 4;
        u64 between = castle == 1 ? BIT(home + 1) | BIT(home + 2) : BIT(home - 1) | BIT(home - 2) | BIT(home - 3);
        int step = castle == 1 ? 1 : -1;
        if (!(p->castling & BIT(rook)) || !(p->pc[ROOK] & us & BIT(rook)) || !(p->pc[KING] & us & BIT(home)) ||
            (occ & between))
            return -1;
        for (int i = 0; i <= 2; i++)
            if (attacked(p, home + i * step, !c)) return -1;
        int kto = home + 2 * step, rto = home + step;
        p->pc[KING] ^= BIT(home) | BIT(kto);
        p->pc[ROOK] ^= BIT(rook) | BIT(rto);
        if (c) p->white ^= BIT(home) | BIT(kto) | BIT(rook) | BIT(rto);
        p->castling &= ~(c ? RANK(0) : RANK(7));
        p->ep = NO_EP;
        p->halfmove++;
        out->from = home;
        out->to = kto;
        out->promo = 0;
        out->capture = 0;
        return 0;
    }

    int promo = 0;
    if (len >= 3) {
        char last = s[len - 1];
        const char *at = strchr("NBRQ", last);
        if (last && at && (s[len - 2] == '=' || (s[len - 2] >= '1' && s[len - 2] <= '8'))) {
            promo = KNIGHT + (int)(at - "NBRQ");
            len -= s[len - 2] == '=' ? 2 : 1;
        }
    }
    if (len < 2 || s[len - 2] < 'a' || s[len - 2] > 'h' || s[len - 1] < '1' || s[len - 1] > '8') return -1;
    int to = (s[len - 1] - '1') * 8 + (s[len - 2] - 'a');
    int i = 0, pt = PAWN, ffile = -1, frank = -1;
    const char *at;
    if (len > 2 && s[0] && (at = strchr("NBRQK", s[0])) != NULL) {
        pt = KNIGHT + (int)(at - "NBRQK");
        i = 1;
    }
    if (i < len - 2 && s[i] >= 'a' && s[i] <= 'h') ffile = s[i++] - 'a';
    if (i < len - 2 && s[i] >= '1' && s[i] <= '8') frank = s[i++] - '1';
    if (i < len - 2 && (s[i] == 'x' || s[i] == '-')) i++;
    if (i != len - 2) return -1;
    if (pt == PAWN && ffile >= 0 && frank >= 0) return -1; /* long algebraic: python-chess's find_move */

    u64 tb = BIT(to);
    if (tb & us) return -1;
    u64 from_mask = ~0ULL;
    if (ffile >= 0) from_mask &= FILE_(ffile);
    if (frank >= 0) from_mask &= RANK(frank);

    u64 cands;
    int ep_capture = 0;
    if (pt == PAWN) {
        int last_rank = c ? 7 : 0;
        if (((to >> 3) == last_rank) != (promo != 0)) return -1;
        if (ffile < 0) from_mask &= FILE_(to & 7);
        u64 own = p->pc[PAWN] & us & from_mask;
        cands = 0;
        if (!(occ & tb)) {
            int src = c ? to - 8 : to + 8;
            if (src >= 0 && src < 64) {
                if (own & BIT(src)) {
                    cands |= BIT(src);
                } else if (!(occ & BIT(src)) && (to >> 3) == (c ? 3 : 4)) {
                    int src2 = c ? src - 8 : src + 8;
                    if (own & BIT(src2)) cands |= BIT(src2);
                }
            }
            if (to == p->ep) {
                u64 ep_cands = own & PAWN_ATT[!c][to] & RANK(c ? 4 : 3);
                if (ep_cands) {
                    cands |= ep_cands;
                    ep_capture = 1;
                }
            }
        } else if (tb & them) {
            cands |= own & PAWN_ATT[!c][to];
        }
    } else {
        if (promo) return -1;
        u64 att;
        switch (pt) {
        case KNIGHT: att = KNIGHT_ATT[to]; break;
        case BISHOP: att = bishop_attacks(to, occ); break;
        case ROOK: att = rook_attacks(to, occ); break;
        case QUEEN: att = bishop_attacks(to, occ) | rook_attacks(to, occ); break;
        default: att = KING_ATT[to]; break;
        }
        cands = att & p->pc[pt] & us & from_mask;
    }
    if (!cands) return -1;

    int found = -1, found_ep = 0;
    Pos best;
    while (cands) {
        int from = lsb(cands);
        cands &= cands - 1;
        /* An en-passant candidate is a diagonal step onto the empty ep square. */
        int is_ep = ep_capture && ((from & 7) != (to & 7));
        Pos q = *p;
        make(&q, pt, from, to, promo, is_ep);
        int ksq = pt == KING ? to : king_square(&q, c);
        if (ksq >= 0 && attacked(&q, ksq, !c)) continue;
        if (found >= 0) return -1; /* ambiguous: python-chess words the error */
        found = from;
        found_ep = is_ep;
        best = q;
    }
    if (found < 0) return -1;

    int capture = (tb & them) != 0 || found_ep;
    best.castling &= ~(BIT(found) | tb);
    if (pt == KING) best.castling &= ~(c ? RANK(0) : RANK(7));
    int diff = to - found;
    best.ep = (pt == PAWN && (diff == 16 || diff == -16)) ? found + diff / 2 : NO_EP;
    best.halfmove = (pt == PAWN || capture) ? 0 : p->halfmove + 1;
    *p = best;
    out->from = found;
    out->to = to;
    out->promo = promo;
    out->capture = capture;
    return 0;
}

typedef struct {
    u64 *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_push(Buf *b, const Pos *p, int check) {
    if (b->len + 11 > b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 11 * 128;
        u64 *data = realloc(b->data, cap * sizeof(u64));
        if (!data) return -1;
        b->data = data;
        b->cap = cap;
    }
    u64 *r = b->data + b->len;
    for (int t = PAWN; t <= KING; t++) r[t - 1] = p->pc[t];
    r[6] = p->white;
    r[7] = p->castling;
    r[8] = (u64)p->ep;
    r[9] = (u64)p->halfmove;
    r[10] = (u64)check;
    b->len += 11;
    return 0;
}

static PyObject *uci_string(int from, int to, int promo) {
    int idx = (from * 64 + to) * 5 + (promo ? promo - 1 : 0);
    PyObject *s = UCI_CACHE[idx];
    if (!s) {
        char text[6] = {(char)('a' + (from & 7)), (char)('1' + (from >> 3)), (char)('a' + (to & 7)),
                        (char)('1' + (to >> 3)), 0, 0};
        if (promo) text[4] = " pnbrq"[promo];
        s = PyUnicode_FromStringAndSize(text, promo ? 5 : 4);
        if (!s) return NULL;
        UCI_CACHE[idx] = s;
    }
    Py_INCREF(s);
    return s;
}

static int in_check(const Pos *p) {
    int k = king_square(p, p->turn);
    return k >= 0 && attacked(p, k, !p->turn);
}

static PyObject *py_replay(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *state, *sans;
    Py_ssize_t start;
    int emit_initial;
    if (!PyArg_ParseTuple(args, "O!O!np", &PyTuple_Type, &state, &PyList_Type, &sans, &start, &emit_initial))
        return NULL;
    if (PyTuple_GET_SIZE(state) != 12) {
        PyErr_SetString(PyExc_ValueError, "state must have 12 fields");
        return NULL;
    }
    Pos p;
    u64 v[12];
    for (int i = 0; i < 12; i++) {
        v[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(state, i));
        if (v[i] == (u64)-1 && PyErr_Occurred()) return NULL;
    }
    memset(p.pc, 0, sizeof p.pc);
    for (int t = PAWN; t <= KING; t++) p.pc[t] = v[t - 1];
    p.white = v[6];
    p.turn = v[7] != 0;
    p.castling = v[8];
    if (v[9] > NO_EP || v[10] > (u64)1 << 62 || v[11] > (u64)1 << 62) {
        PyErr_SetString(PyExc_ValueError, "state: ep square or clocks out of range");
        return NULL;
    }
    p.ep = (int)v[9];
    p.halfmove = (long long)v[10];
    p.fullmove = (long long)v[11];

    Py_ssize_t n = PyList_GET_SIZE(sans);
    if (start < 0 || start > n) {
        PyErr_SetString(PyExc_ValueError, "start out of range");
        return NULL;
    }
    Buf rec = {NULL, 0, 0};
    PyObject *ucis = PyList_New(0);
    PyObject *caps = PyBytes_FromStringAndSize(NULL, n - start);
    if (!ucis || !caps) goto fail;
    char *capbuf = PyBytes_AS_STRING(caps);
    if (emit_initial && buf_push(&rec, &p, in_check(&p)) < 0) goto nomem;
    Py_ssize_t k = start;
    for (; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(sans, k);
        Py_ssize_t len;
        const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len) : NULL;
        if (!s) {
            PyErr_Clear();
            break;
        }
        Played m;
        if (play_san(&p, s, len, &m) < 0) break;
        if (!p.turn) p.fullmove++;
        p.turn = !p.turn;
        capbuf[k - start] = (char)m.capture;
        PyObject *u = uci_string(m.from, m.to, m.promo);
        if (!u) goto fail;
        int err = PyList_Append(ucis, u);
        Py_DECREF(u);
        if (err < 0) goto fail;
        if (buf_push(&rec, &p, in_check(&p)) < 0) goto nomem;
    }
    if (_PyBytes_Resize(&caps, k - start) < 0) {
        caps = NULL;
        goto fail;
    }
    PyObject *records = PyBytes_FromStringAndSize((const char *)rec.data, rec.len * (Py_ssize_t)sizeof(u64));
    free(rec.data);
    if (!records) {
        Py_DECREF(ucis);
        Py_DECREF(caps);
        return NULL;
    }
    return Py_BuildValue("nNNN(KKKKKKKiKiLL)", k, records, ucis, caps, p.pc[PAWN], p.pc[KNIGHT], p.pc[BISHOP],
                         p.pc[ROOK], p.pc[QUEEN], p.pc[KING], p.white, p.turn, p.castling, p.ep, p.halfmove,
                         p.fullmove);
nomem:
    PyErr_NoMemory();
fail:
    free(rec.data);
    Py_XDECREF(ucis);
    Py_XDECREF(caps);
    return NULL;
}

/* ---- Movetext tokenizer ------------------------------------------------------------------
 *
 * tokenize(movetext) -> (sans, result) or None. The same answer as pipeline.ingest.games.tokenize's
 * regular expressions for movetext made of move numbers, SAN moves, castling, results, brace
 * and rest-of-line comments, escape lines, NAGs, !? glyphs, + # and =. Anything else
 * (variations, null moves, drops, non-ASCII, text the expressions would call junk or split
 * differently) gives None and the Python tokenizer decides.
 */

static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static inline int is_file(char c) { return c >= 'a' && c <= 'h'; }
static inline int is_rank(char c) { return c >= '1' && c <= '8'; }
static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Length of the regex [NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])? matched at s
 * (n chars left), 0 if none. The optional parts are tried take-first, in order, as the
 * regex engine backtracks. */
static Py_ssize_t san_length(const char *s, Py_ssize_t n) {
    for (int mask = 0; mask < 16; mask++) {
        /* bit 3: piece, 2: file, 1: rank, 0: separator; take (bit clear) is tried first. */
        Py_ssize_t i = 0;
        if (!(mask & 8)) {
            if (i < n && strchr("NBKRQ", s[i]) && s[i]) i++;
            else continue;
        }
        if (!(mask & 4)) {
            if (i < n && is_file(s[i])) i++;
            else continue;
        }
        if (!(mask & 2)) {
            if (i < n && is_rank(s[i])) i++;
            else continue;
        }
        if (!(mask & 1)) {
            if (i < n && (s[i] == '-' || s[i] == 'x')) i++;
            else continue;
        }
        if (i + 1 < n && is_file(s[i]) && is_rank(s[i + 1])) {
            i += 2;
            if (i + 1 < n && s[i] == '=' && s[i + 1] && strchr("nbrqkNBRQK", s[i + 1])) i += 2;
            else if (i < n && s[i] && strchr("nbrqkNBRQK", s[i])) i += 1;
            return i;
        }
    }
    return 0;
}

/* End of the run of digits at i. */
static Py_ssize_t digits_end(const char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && is_digit(s[i])) i++;
    return i;
}

/* Whether s[i:j] holds 0000, where the expressions find a null move (unless the digits are
 * a move number or a NAG, which they read whole). */
static int has_null_move(const char *s, Py_ssize_t i, Py_ssize_t j) {
    int zeros = 0;
    for (; i < j; i++) {
        zeros = s[i] == '0' ? zeros + 1 : 0;
        if (zeros == 4) return 1;
    }
    return 0;
}

static inline int starts(const char *s, Py_ssize_t n, const char *word) {
    Py_ssize_t k = (Py_ssize_t)strlen(word);
    return n >= k && !memcmp(s, word, (size_t)k);
}

static int append_token(PyObject *list, const char *s, Py_ssize_t k) {
    PyObject *tok = PyUnicode_FromStringAndSize(s, k);
    if (!tok) return -1;
    int err = PyList_Append(list, tok);
    Py_DECREF(tok);
    return err;
}

static PyObject *py_tokenize(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t n;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "movetext must be str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) Py_RETURN_NONE;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!s) return NULL;
    PyObject *sans = PyList_New(0);
    if (!sans) return NULL;
    const char *result = NULL;
    Py_ssize_t result_len = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        char c = s[i];
        const char *rest = s + i;
        Py_ssize_t left = n - i;
        if (is_space(c)) {
            i++;
        } else if (c == '{') {
            const char *close = memchr(rest + 1, '}', (size_t)(left - 1));
            i = close ? (close - s) + 1 : n;
        } else if (c == ';' || (c == '%' && (i == 0 || s[i - 1] == '\n'))) {
            const char *eol = memchr(rest, '\n', (size_t)left);
            i = eol ? eol - s : n;
        } else if (c == '!' || c == '?' || c == '+' || c == '#' || c == '=') {
            i++;
        } else if (c == '$') {
            Py_ssize_t j = digits_end(s, i + 1, n);
            if (j == i + 1 || (j < n && !is_space(s[j]) && s[j] != '{')) goto unsure;
            i = j;
        } else if (c == '*') {
            result = "*";
            result_len = 1;
            i++;
        } else if (is_digit(c)) {
            /* A SAN token may start at a rank digit ("1e4"): leave that to the expressions. */
            if (is_rank(c) && (san_length(rest, left) > 0)) goto unsure;
            /* A move number of any length, "10000." included. */
            Py_ssize_t digits = digits_end(s, i, n), j = digits;
            while (j < n && is_space(s[j])) j++;
            if (j < n && s[j] == '.') {
                while (j < n && s[j] == '.') j++;
                i = j;
            } else if (has_null_move(s, i, digits)) {
                goto unsure;
            } else if (starts(rest, left, "1/2-1/2")) {
                result = "1/2-1/2";
                result_len = 7;
                i += 7;
            } else if (starts(rest, left, "1-0") || starts(rest, left, "0-1")) {
                result = rest;
                result_len = 3;
                i += 3;
            } else if (starts(rest, left, "0-0")) {
                Py_ssize_t k = starts(rest, left, "0-0-0") ? 5 : 3;
                if (append_token(sans, rest, k) < 0) goto fail;
                i += k;
            } else {
                goto unsure;
            }
        } else {
            Py_ssize_t k = 0;
            if (c == 'O') {
                if (starts(rest, left, "O-O-O")) k = 5;
                else if (starts(rest, left, "O-O")) k = 3;
            } else {
                k = san_length(rest, left);
            }
            if (!k) goto unsure;
            if (append_token(sans, rest, k) < 0) goto fail;
            i += k;
        }
    }
    if (!result) return Py_BuildValue("(NO)", sans, Py_None);
    return Py_BuildValue("(Ns#)", sans, result, result_len);
unsure:
    Py_DECREF(sans);
    Py_RETURN_NONE;
fail:
    Py_DECREF(sans);
    return NULL;
}

/* The store's encoding of n replay records (pipeline.ingest.replay.encode_records, vectorised there
   with numpy; this is the same a position at a time). records: n x 11 native uint64 (pawns, knights,
   bishops, rooks, queens, kings, white occupancy, castling rights as rook squares, ep square or 64,
   halfmove clock, in check); white: n bytes (1: white to move); keys: the 781 polyglot random
   numbers (native uint64). Returns (planes: n x 12 native uint64 bitboards P N B R Q K p n b r q
   k, castling: n bytes K=1 Q=2 k=4 q=8, ep: n signed bytes, the polyglot en-passant square or -1,
   keys: n native uint64 polyglot Zobrist keys), each as bytes. */
static PyObject *py_encode(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer records, white, keys;
    if (!PyArg_ParseTuple(args, "y*y*y*", &records, &white, &keys)) return NULL;
    PyObject *planes_b = NULL, *castling_b = NULL, *ep_b = NULL, *keys_b = NULL, *out = NULL;
    Py_ssize_t n = white.len;
    if (records.len != 11 * (Py_ssize_t)sizeof(u64) * n || keys.len != 781 * (Py_ssize_t)sizeof(u64)) {
        PyErr_SetString(PyExc_ValueError, "encode: records must be 11 uint64 a position, and keys 781 uint64");
        goto done;
    }
    planes_b = PyBytes_FromStringAndSize(NULL, 12 * (Py_ssize_t)sizeof(u64) * n);
    castling_b = PyBytes_FromStringAndSize(NULL, n);
    ep_b = PyBytes_FromStringAndSize(NULL, n);
    keys_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(u64) * n);
    if (!planes_b || !castling_b || !ep_b || !keys_b) goto done;
    const u64 *rec = records.buf;
    const unsigned char *ws = white.buf;
    const u64 *k = keys.buf;
    u64 *planes = (u64 *)PyBytes_AS_STRING(planes_b);
    unsigned char *castling = (unsigned char *)PyBytes_AS_STRING(castling_b);
    signed char *ep = (signed char *)PyBytes_AS_STRING(ep_b);
    u64 *h = (u64 *)PyBytes_AS_STRING(keys_b);
    for (Py_ssize_t i = 0; i < n; i++) {
        const u64 *r = rec + 11 * i;
        u64 *pl = planes + 12 * i;
        u64 acc = 0;
        for (int t = 0; t < 6; t++) {
            pl[t] = r[t] & r[6];
            pl[6 + t] = r[t] & ~r[6];
        }
        for (int p = 0; p < 12; p++) {
            /* polyglot's piece kind: 2 x (type - 1) + 1 for white, + 0 for black */
            const u64 *piece = k + 64 * (p < 6 ? 2 * p + 1 : 2 * (p - 6));
            for (u64 bb = pl[p]; bb; bb &= bb - 1) acc ^= piece[lsb(bb)];
        }
        u64 cr = r[7];
        unsigned char c = (unsigned char)((cr >> 7 & 1) | (cr >> 0 & 1) << 1 | (cr >> 63 & 1) << 2 | (cr >> 56 & 1) << 3);
        castling[i] = c;
        for (int b = 0; b < 4; b++)
            if (c >> b & 1) acc ^= k[768 + b];
        /* en passant as polyglot has it: only where a pawn of the side to move can take */
        signed char e = -1;
        u64 sq = r[8];
        if (sq < 64) {
            int s = (int)sq;
            int behind = ws[i] ? s - 8 : s + 8;
            u64 pawns = ws[i] ? pl[0] : pl[6];
            u64 mask = 0;
            if ((s & 7) && behind >= 1 && behind <= 64) mask |= (u64)1 << (behind - 1);
            if ((s & 7) != 7 && behind >= -1 && behind <= 62) mask |= (u64)1 << (behind + 1);
            if (pawns & mask) {
                e = (signed char)s;
                acc ^= k[772 + (s & 7)];
            }
        }
        ep[i] = e;
        if (ws[i]) acc ^= k[780];
        h[i] = acc;
    }
    out = PyTuple_Pack(4, planes_b, castling_b, ep_b, keys_b);
done:
    Py_XDECREF(planes_b);
    Py_XDECREF(castling_b);
    Py_XDECREF(ep_b);
    Py_XDECREF(keys_b);
    PyBuffer_Release(&records);
    PyBuffer_Release(&white);
    PyBuffer_Release(&keys);
    return out;
}

static PyMethodDef METHODS[] = {
    {"tokenize", py_tokenize, METH_O, "tokenize(movetext) -> (sans, result) or None"},
    {"replay", py_replay, METH_VARARGS,
     "replay(state, sans, start, emit_initial) -> (stop, records, ucis, captures, state)"},
    {"encode", py_encode, METH_VARARGS, "encode(records, white, keys) -> (planes, castling, ep, keys) as bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "pipeline.ingest._replay",
                                    "Compiled SAN replay and movetext tokenizer (see pipeline.ingest.replay, pipeline.ingest.games).", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__replay(void) {
    init_tables();
    return PyModule_Create(&MODULE);
}
