// The explorer page: a cm-chessboard board (npm, copied here by `make install`) over the
// JSON API of explorer/app.py. Every number on the page comes from the API.
// Text from the API (players, dates, events, model and engine names, moves) is data: it goes
// into the page through textContent and DOM nodes only, never innerHTML (the server's
// Content-Security-Policy also forbids inline script and style).
import {Chessboard, COLOR, INPUT_EVENT_TYPE, BORDER_TYPE, FEN} from "/static/vendor/cm-chessboard/Chessboard.js"

const START = FEN.start
const PIECES = ["wk", "wq", "wr", "wb", "wn", "wp", "bk", "bq", "br", "bb", "bn", "bp"]
const GLYPH = {wk: "♔", wq: "♕", wr: "♖", wb: "♗", wn: "♘", wp: "♙", bk: "♚", bq: "♛", br: "♜", bb: "♝", bn: "♞", bp: "♟"}
const SERIES_COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]

const $ = (sel) => document.querySelector(sel)
const SVG_NS = "http://www.w3.org/2000/svg"

// An element with properties (className, textContent, dataset entries as data: {...}) and
// children (nodes, or strings as text nodes).
function el(tag, props = {}, ...children) {
    const e = document.createElement(tag)
    const {data, ...rest} = props
    Object.assign(e, rest)
    if (data) Object.assign(e.dataset, data)
    e.append(...children.map(c => c ?? ""))
    return e
}
function svgEl(tag, attrs = {}, text = null) {
    const e = document.createElementNS(SVG_NS, tag)
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v))
    if (text !== null) e.textContent = text
    return e
}
const state = {
    mode: "play",
    tool: "move",
    history: [{fen: START, san: null, uci: null}],  // history[0] is the start of the line
    cur: 0,
    legal: [],
    valid: true,
    game: null,  // {game_id, series} of a stored game loaded from the explorer
    placement: false,  // the line's first position was given as a bare placement: match it alone
    search: null,  // the url of the live search running for the page
}
let seq = 0  // the newest refresh; older answers are dropped

const board = new Chessboard($("#board"), {
    position: START,
    assetsUrl: "/static/vendor/cm-chessboard/assets/",
    style: {borderType: BORDER_TYPE.none, showCoordinates: true, animationDuration: 150},
})

// API -------------------------------------------------------------------------------------

async function api(path, params = {}, init = undefined) {
    const url = new URL(path, location.origin)
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) url.searchParams.set(k, v)
    const r = await fetch(url, init)
    const body = await r.json().catch(() => ({error: `HTTP ${r.status}`}))
    if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`)
    return body
}

// Position and history ----------------------------------------------------------------------

function currentFen() { return state.history[state.cur].fen }

async function show(fen, {animate = false} = {}) {
    await board.setPosition(fen, animate)
    $("#fen").value = fen
    $("#fen-error").textContent = ""
    renderMoves()
    refresh(fen)
}

function setLine(fen, {placement = false} = {}) {  // a new line starting at fen
    state.placement = placement
    state.history = [{fen, san: null, uci: null}]
    state.cur = 0
    state.game = null
    $("#game-section").classList.add("hidden")
    return show(fen)
}

function go(index) {
    if (index < 0 || index >= state.history.length || index === state.cur) return
    state.cur = index
    show(currentFen(), {animate: true})
    if (state.game) markPly(index)
}

async function play(uci) {
    try {
        const m = await api("/api/move", {fen: currentFen(), move: uci})
        const next = state.history[state.cur + 1]
        if (!(next && next.uci === m.uci)) {
            state.history = state.history.slice(0, state.cur + 1)
            state.history.push({fen: m.fen, san: m.san, uci: m.uci})
            if (state.game) { state.game = null; $("#game-section").classList.add("hidden") }
        }
        state.cur += 1
        await show(state.history[state.cur].fen)
    } catch (e) {
        $("#fen-error").textContent = e.message
        board.setPosition(currentFen())
    }
}

function renderMoves() {
    const ol = $("#moves")
    ol.replaceChildren()
    const first = state.history[0].fen.split(" ")
    let number = parseInt(first[5] || "1"), white = first[1] !== "b"
    let li = null
    state.history.forEach((h, i) => {
        if (i === 0) return
        if (white || !li) {
            li = document.createElement("li")
            li.appendChild(Object.assign(document.createElement("b"), {textContent: `${number}.`}))
            ol.appendChild(li)
            if (!white) li.appendChild(Object.assign(document.createElement("span"), {textContent: "…"}))
        }
        const span = document.createElement("span")
        span.textContent = h.san
        span.dataset.index = i
        if (i === state.cur) span.classList.add("current")
        span.onclick = () => go(i)
        li.appendChild(span)
        if (!white) { number += 1; li = null }
        white = !white
    })
    $("#back").disabled = state.cur === 0
    $("#forward").disabled = state.cur >= state.history.length - 1
}

// Everything about the position -------------------------------------------------------------

function stopSearch() {  // the position changed: its live search is of no use any more
    if (state.search) fetch(state.search, {method: "DELETE"}).catch(() => {})
    state.search = null
}

function refresh(fen) {
    const mine = ++seq
    const fresh = (f) => (x) => { if (mine === seq) f(x) }
    const fail = (where) => (e) => { if (mine === seq) where.textContent = e.message }
    stopSearch()
    const asked = state.placement && state.cur === 0 ? fen.split(" ")[0] : fen
    api("/api/position", {fen: asked}).then(fresh(renderExplorer)).catch(fail($("#status")))
    api("/api/piece_values", {fen, model: $("#pv-model").value || undefined}).then(fresh(renderPieceValues)).catch(fail($("#pv-note")))
    api("/api/evaluations", {fen}).then(fresh(renderEvaluations)).catch(fail($("#search-status")))
}

function wdlBar(w, d, b, cls = "wdl") {
    const n = w + d + b
    const div = document.createElement("div")
    div.className = cls
    if (!n) return div
    for (const [k, v] of [["w", w], ["d", d], ["b", b]]) {
        const part = document.createElement("div")
        part.className = k
        part.style.width = (100 * v / n) + "%"
        part.textContent = v / n >= 0.12 ? Math.round(100 * v / n) + "%" : ""
        div.appendChild(part)
    }
    return div
}

function renderExplorer(p) {
    state.legal = p.legal_moves
    const mover = p.match === "placement" ? "these pieces on these squares, either side to move" : `${p.fen.split(" ")[1] === "w" ? "White" : "Black"} to move`
    $("#status").textContent = p.status === "playing" ? mover : p.status
    $("#games-count").textContent = p.games
    $("#games-count").dataset.games = p.games
    $("#games-count").dataset.fen = p.fen
    const rb = $("#result-bar")
    rb.replaceWith(Object.assign(wdlBar(p.results.white_wins, p.results.draws, p.results.black_wins, "result-bar"), {id: "result-bar"}))
    const tbody = $("#explorer-moves tbody")
    tbody.replaceChildren()
    for (const m of p.moves) {
        const tr = el("tr", {data: {uci: m.uci}},
            el("td", {textContent: m.san}), el("td", {textContent: m.games}),
            el("td", {}, wdlBar(m.white_wins, m.draws, m.black_wins)),
            el("td", {textContent: `${m.score ?? ""}%`}), el("td", {textContent: m.average_elo ?? ""}))
        tr.onclick = () => play(m.uci)
        tbody.appendChild(tr)
    }
    if (!p.moves.length) tbody.appendChild(el("tr", {}, el("td", {colSpan: 5, className: "muted", textContent: "no stored game played on from here"})))
    const bands = $("#bands tbody")
    bands.replaceChildren()
    for (const b of p.rating_bands) {
        bands.appendChild(el("tr", {}, el("td", {textContent: b.band}), el("td", {textContent: b.games}),
            el("td", {}, wdlBar(b.white_wins, b.draws, b.black_wins))))
    }
    const ul = $("#top-games")
    ul.replaceChildren()
    for (const g of p.top_games) {
        const elo = (x) => x ? ` (${x})` : ""
        const li = el("li", {}, `${g.white ?? "?"}${elo(g.white_elo)} – ${g.black ?? "?"}${elo(g.black_elo)} ${g.result ?? ""} `,
            el("span", {className: "muted", textContent: g.date ?? ""}), " ")
        const open = Object.assign(document.createElement("a"), {href: "#", textContent: "open"})
        open.onclick = (e) => { e.preventDefault(); loadGame(g.game_id, g.ply) }
        const pgn = Object.assign(document.createElement("a"), {href: g.pgn_url, textContent: "PGN", target: "_blank"})
        li.append(open, " · ", pgn)
        ul.appendChild(li)
    }
}

function renderPieceValues(pv) {
    $("#pv-note").textContent = pv.note
    const sel = $("#pv-model")
    const wanted = sel.value
    const names = pv.models.length ? pv.models : []
    const options = names.length ? names : ["(material values)"]
    if ([...sel.options].map(o => o.value || o.textContent).join() !== options.join()) {
        sel.replaceChildren()
        for (const n of options) sel.appendChild(Object.assign(document.createElement("option"), {value: names.length ? n : "", textContent: n}))
        if (names.includes(wanted)) sel.value = wanted
    }
    // labels on the board
    const layer = $("#labels")
    layer.replaceChildren()
    const flipped = board.getOrientation() === COLOR.black
    for (const p of pv.pieces) {
        const file = p.square.charCodeAt(0) - 97, rank = parseInt(p.square[1]) - 1
        const div = document.createElement("div")
        div.className = `piece-label ${p.color}`
        div.dataset.square = p.square
        div.style.left = (flipped ? 7 - file : file) * 12.5 + "%"
        div.style.top = (flipped ? rank : 7 - rank) * 12.5 + "%"
        if (p.piece.toLowerCase() !== "k" || pv.source !== "material") div.appendChild(el("span", {textContent: fmt(p.value)}))
        layer.appendChild(div)
    }
    layer.dataset.fen = pv.fen
    // the two bar charts
    const max = Math.max(1, ...pv.pieces.map(p => Math.abs(p.value)))
    for (const side of ["white", "black"]) {
        const box = $(`#bars-${side}`)
        box.replaceChildren()
        const pieces = pv.pieces.filter(p => p.color === side).sort((a, b) => b.value - a.value || a.square.localeCompare(b.square))
        for (const p of pieces) {
            const row = document.createElement("div")
            row.className = "bar-row"
            row.dataset.square = p.square
            row.appendChild(el("span", {textContent: `${GLYPH[(p.color === "white" ? "w" : "b") + p.piece.toLowerCase()] ?? p.piece} ${p.square}`}))
            const bar = document.createElement("div")
            bar.className = "bar" + (p.value < 0 ? " negative" : "")
            bar.dataset.value = p.value
            bar.style.width = (100 * Math.abs(p.value) / max) + "%"
            const track = document.createElement("div")
            track.appendChild(bar)
            row.append(track, Object.assign(document.createElement("span"), {textContent: fmt(p.value)}))
            box.appendChild(row)
        }
        $(`#total-${side}`).textContent = fmt(pv.totals[side])
        $(`#total-${side}`).dataset.total = pv.totals[side]
    }
    $(".bars-pair").dataset.fen = pv.fen
}

function fmt(v) { return (Math.round(v * 100) / 100).toString() }
function pawns(cp) { return cp === null || cp === undefined ? "" : (cp / 100).toFixed(2) }
function labelText(l) {
    if (l.mate !== null && l.mate !== undefined) return l.mate === 0 ? "mated" : `mate ${l.mate}`
    return pawns(l.cp)
}

function renderEvaluations(ev) {
    const tbody = $("#evals tbody")
    tbody.replaceChildren()
    const row = (name, value, detail = "") => {
        const tr = el("tr", {}, el("td", {textContent: name}), el("td", {className: "value", textContent: value}),
            el("td", {className: "muted small", textContent: detail}))
        tbody.appendChild(tr)
        return tr
    }
    for (const l of ev.stockfish.stored) row("Stockfish (stored)", labelText(l), `${l.engine}, ${l.setting}, depth ${l.depth}, best ${l.best_move ?? "-"}`)
    if (!ev.stockfish.stored.length) row("Stockfish (stored)", "–", "not labelled in the store: search below")
    row("traditional", ev.traditional === null ? "–" : pawns(ev.traditional), "material + piece-square tables")
    for (const n of ev.networks) {
        const value = n.error ? "–" : n.expected_result !== undefined ? `${n.expected_result}` : pawns(n.score)
        const detail = n.error ?? (n.kind === "piece_values" ? `${n.dataset}: White's piece values - Black's` + (n.expected_result !== undefined ? " (expected result for White)" : "") : n.dataset)
        row(n.model, value, detail).dataset.model = n.model
    }
    if (!ev.networks.length) row("networks", "–", ev.networks_note ?? "")
    tbody.appendChild(el("tr", {id: "live-row"}, el("td", {textContent: "Stockfish (live)"}),
        el("td", {className: "value", id: "live-score", textContent: "–"}), el("td", {className: "muted small", id: "live-detail"})))
    $("#search-status").textContent = ""
}

async function startSearch() {
    const fen = currentFen()
    const depth = parseInt($("#depth").value)
    $("#search-status").textContent = "starting…"
    try {
        let s = await api("/api/search", {}, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({fen, depth})})
        state.search = s.url
        while (s.status === "queued" || s.status === "running") {
            $("#search-status").textContent = `${s.status} (depth ${s.depth})…`
            await new Promise(r => setTimeout(r, 300))
            s = await api(s.url)
        }
        if (currentFen() !== fen) return
        if (state.search === s.url) state.search = null
        if (s.status === "done") {
            $("#live-score").textContent = labelText(s.result)
            $("#live-detail").textContent = `${s.result.engine}, depth ${s.result.depth}, ${s.result.nodes} nodes, ${s.result.time_ms} ms: ${s.result.pv_san}`
            $("#search-status").textContent = "done"
        } else {
            $("#search-status").textContent = `${s.status}: ${s.error}`
        }
    } catch (e) {
        $("#search-status").textContent = e.message
    }
}

// A stored game and its evaluation chart -----------------------------------------------------

async function loadGame(gameId, ply = 0) {
    try {
        const g = await api(`/api/games/${gameId}`)
        state.history = [{fen: g.start_fen, san: null, uci: null}, ...g.moves.map(m => ({fen: m.fen, san: m.san, uci: m.uci}))]
        state.cur = Math.min(ply, state.history.length - 1)
        state.game = {game_id: gameId}
        $("#game-title").textContent = `${g.white} – ${g.black} ${g.result} (${g.date ?? ""})`
        await show(currentFen())
        const ev = await api(g.evaluations_url)
        state.game.series = ev.series
        drawChart(ev)
        markPly(state.cur)
    } catch (e) {
        $("#fen-error").textContent = e.message
    }
}

function drawChart(ev) {
    $("#game-section").classList.remove("hidden")
    const W = 900, H = 260, pad = 30, clip = 1000
    const n = ev.plies
    const x = (i) => pad + (W - 2 * pad) * (n ? i / n : 0)
    const y = (v) => H / 2 - (H / 2 - 10) * Math.max(-clip, Math.min(clip, v)) / clip
    const svg = svgEl("svg", {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none"})
    svg.appendChild(svgEl("line", {x1: pad, x2: W - pad, y1: H / 2, y2: H / 2, stroke: "#999"}))
    for (const v of [-500, 500]) {
        svg.appendChild(svgEl("line", {x1: pad, x2: W - pad, y1: y(v), y2: y(v), stroke: "#eee"}))
        svg.appendChild(svgEl("text", {x: 2, y: y(v) + 4, "font-size": 10}, `${v > 0 ? "+" : ""}${v / 100}`))
    }
    const legend = $("#game-legend")
    legend.replaceChildren()
    let k = 0
    for (const [name, values] of Object.entries(ev.series)) {
        const colour = SERIES_COLOURS[k++ % SERIES_COLOURS.length]
        const have = values.some(v => v !== null)
        const pts = []
        let d = ""
        values.forEach((v, i) => {
            if (v === null) { if (pts.length) { d += "M" + pts.join("L"); pts.length = 0 } return }
            pts.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`)
        })
        if (pts.length) d += "M" + pts.join("L")
        if (d) svg.appendChild(svgEl("path", {d, fill: "none", stroke: colour, "stroke-width": 1.6, "data-series": name}))
        const swatch = el("span", {className: "swatch"})
        swatch.style.background = colour
        legend.appendChild(el("span", {}, swatch, name + (have ? "" : " (no values)")))
    }
    svg.appendChild(svgEl("line", {id: "ply-marker", x1: 0, x2: 0, y1: 0, y2: H, stroke: "#000", "stroke-dasharray": "3,3"}))
    const box = $("#game-chart")
    box.replaceChildren(svg)
    svg.onclick = (e) => {
        const r = e.currentTarget.getBoundingClientRect()
        const i = Math.round(((e.clientX - r.left) / r.width * W - pad) / (W - 2 * pad) * n)
        go(Math.max(0, Math.min(n, i)))
    }
    state.game.x = x
    const notes = []
    if (!ev.series.stockfish.some(v => v !== null)) notes.push("no Stockfish labels for this game's positions (chess-pipeline label)")
    for (const [m, err] of Object.entries(ev.errors)) notes.push(`${m}: ${err}`)
    $("#game-note").textContent = notes.join("; ") + (notes.length ? ". " : "") + "Scores clipped to ±10 pawns; click the chart to go to a move."
}

function markPly(i) {
    const line = document.querySelector("#ply-marker")
    if (line && state.game && state.game.x) { line.setAttribute("x1", state.game.x(i)); line.setAttribute("x2", state.game.x(i)) }
}

// Set-up mode ---------------------------------------------------------------------------------

function castlingText() {
    const s = [...document.querySelectorAll(".castle")].filter(c => c.checked).map(c => c.value).join("")
    return s || "-"
}

async function setupChanged() {
    const placement = board.getPosition()
    try {
        const r = await api("/api/setup", {placement, turn: $("#turn").value, castling: castlingText()})
        state.valid = true
        $("#setup-status").textContent = r.notes.join("; ") || "legal position"
        state.history = [{fen: r.fen, san: null, uci: null}]
        state.cur = 0
        $("#fen").value = r.fen
        renderMoves()
        refresh(r.fen)
    } catch (e) {
        state.valid = false
        $("#setup-status").textContent = e.message
        $("#fen").value = `${placement} ${$("#turn").value} ${castlingText()} - 0 1`
        clearPosition()
    }
}

// No legal position on the board (cleared, or an illegal set-up): nothing of the last one
// stays on screen: piece labels, bars, totals, evaluations, explorer, move list, side to move.
function clearPosition() {
    ++seq  // answers still on their way are for the old position
    stopSearch()
    state.history = [{fen: $("#fen").value, san: null, uci: null}]
    state.cur = 0
    state.legal = []
    renderMoves()
    $("#labels").replaceChildren()
    delete $("#labels").dataset.fen
    for (const side of ["white", "black"]) {
        $(`#bars-${side}`).replaceChildren()
        $(`#total-${side}`).textContent = ""
        delete $(`#total-${side}`).dataset.total
    }
    delete $(".bars-pair").dataset.fen
    $("#pv-note").textContent = ""
    $("#evals tbody").replaceChildren()
    $("#search-status").textContent = ""
    $("#status").textContent = ""
    $("#games-count").textContent = "-"
    delete $("#games-count").dataset.games
    delete $("#games-count").dataset.fen
    $("#result-bar").replaceChildren()
    $("#explorer-moves tbody").replaceChildren()
    $("#bands tbody").replaceChildren()
    $("#top-games").replaceChildren()
}


function setMode(mode) {
    state.mode = mode
    $("#setup").classList.toggle("hidden", mode !== "setup")
    if (mode === "play" && !state.valid) setLine(START)
    if (mode === "setup") {
        const parts = currentFen().split(" ")
        $("#turn").value = parts[1]
        for (const c of document.querySelectorAll(".castle")) c.checked = parts[2].includes(c.value)
    }
}

function selectTool(tool) {
    state.tool = tool
    for (const b of document.querySelectorAll("#palette button")) b.classList.toggle("selected", b.dataset.tool === tool)
}

// Board input ---------------------------------------------------------------------------------

function onMoveInput(event) {
    if (state.mode === "setup") {
        switch (event.type) {
            case INPUT_EVENT_TYPE.moveInputStarted: return state.tool === "move"
            case INPUT_EVENT_TYPE.validateMoveInput: return true
            case INPUT_EVENT_TYPE.moveInputFinished: if (event.legalMove) setupChanged(); return
            case INPUT_EVENT_TYPE.moveInputCanceled:
                if (event.reason === "movedOutOfBoard") board.setPiece(event.squareFrom, null).then(setupChanged)
                return
        }
        return
    }
    switch (event.type) {
        case INPUT_EVENT_TYPE.moveInputStarted:
            return state.legal.some(m => m.from === event.squareFrom)
        case INPUT_EVENT_TYPE.validateMoveInput:
            return state.legal.some(m => m.from === event.squareFrom && m.to === event.squareTo)
        case INPUT_EVENT_TYPE.moveInputFinished: {
            if (!event.legalMove) return
            const candidates = state.legal.filter(m => m.from === event.squareFrom && m.to === event.squareTo)
            const promo = candidates.find(m => m.uci.length === 5 && m.uci[4] === $("#promotion").value)
            play((promo || candidates[0]).uci)
            return
        }
    }
}

board.enableMoveInput(onMoveInput)
board.enableSquareSelect("pointerdown", (e) => {
    if (state.mode !== "setup" || state.tool === "move" || !e.square) return
    board.setPiece(e.square, state.tool === "erase" ? null : state.tool).then(setupChanged)
})

// Controls ------------------------------------------------------------------------------------

for (const p of PIECES) {
    const b = Object.assign(document.createElement("button"), {textContent: GLYPH[p], title: `place ${p}`, className: "tool"})
    b.dataset.tool = p
    $("#palette-pieces").appendChild(b)
}
for (const b of document.querySelectorAll("#palette button")) b.onclick = () => selectTool(b.dataset.tool)
for (const r of document.querySelectorAll("input[name=mode]")) r.onchange = () => setMode(r.value)
$("#turn").onchange = setupChanged
for (const c of document.querySelectorAll(".castle")) c.onchange = setupChanged
$("#reset").onclick = () => { state.valid = true; setLine(START) }
$("#clear").onclick = async () => {
    document.querySelector("input[name=mode][value=setup]").checked = true
    setMode("setup")
    await board.setPosition(FEN.empty)
    setupChanged()
}
$("#flip").onclick = async () => {
    await board.setOrientation(board.getOrientation() === COLOR.white ? COLOR.black : COLOR.white)
    refresh(currentFen())
}
$("#back").onclick = () => go(state.cur - 1)
$("#forward").onclick = () => go(state.cur + 1)
document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return
    if (e.key === "ArrowLeft") go(state.cur - 1)
    if (e.key === "ArrowRight") go(state.cur + 1)
})
$("#fen-form").onsubmit = async (e) => {
    e.preventDefault()
    const fen = $("#fen").value.trim()
    try {
        const p = await api("/api/fen", {fen})
        state.valid = true
        setLine(p.fen, {placement: fen.split(/\s+/).length === 1})
    } catch (err) {
        $("#fen-error").textContent = err.message
    }
}
$("#copy-fen").onclick = () => navigator.clipboard && navigator.clipboard.writeText($("#fen").value)
$("#pv-model").onchange = () => refresh(currentFen())
$("#search").onclick = startSearch

api("/api/store").then(s => { $("#store-note").textContent = s.note ?? `${s.games} games in the store` }).catch(e => { $("#store-note").textContent = e.message })
setLine(START)
