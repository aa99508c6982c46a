// ctxeval token explorer. All data comes from the JSON block; every text goes into the page
// through textContent, never innerHTML. Windows and tokens are rendered on demand (one page of
// windows, one page of tokens), so the page stays responsive on 100K-token runs.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("ctxeval-data").textContent);
  const WINDOWS_PER_PAGE = 50, TOKENS_PER_PAGE = 2000, WORST_SHOWN = 10;
  const NA = [221, 221, 221], WHITE = [255, 255, 255], RED = [178, 24, 43], BLUE = [33, 102, 172];
  const LOGPROB_RED = [220, 50, 47], ORANGE = [255, 140, 0], KEY = [255, 215, 0];
  const RANK_COLOURS = [[140, 220, 140], [200, 240, 160], [255, 236, 140], [255, 170, 140], [210, 160, 230]];
  const RANK_LABELS = ["1", "≤10", "≤100", "≤1000", ">1000"];
  const $ = (id) => document.getElementById(id);
  const { decode, clamp, mix, css, visible, fmt, pct, signed, placeCard, focusTokenIn, wireTokenCard, renderPage, wireWindowKeys } = ctxevalCommon;

  const TYPES = { target_id: Int32Array, logprob: Float64Array, rank: Int32Array, greedy_id: Int32Array, context_len: Int32Array, topk_ids: Int32Array, topk_lp: Float32Array, gain: Float32Array, key: Uint8Array };
  const cols = new Map();  // arm index -> decoded columns, decoded when first needed
  function columns(a) {
    if (!cols.has(a)) {
      const out = {};
      for (const [name, b64] of Object.entries(DATA.arms[a].tokens)) out[name] = decode(b64, TYPES[name]);
      cols.set(a, out);
    }
    return cols.get(a);
  }
  const deltas = new Map();
  function delta(p) {
    if (!deltas.has(p)) deltas.set(p, decode(DATA.pairs[p].delta, Float32Array));
    return deltas.get(p);
  }

  // ---- colours (docs/report.md states the same formulas) ----
  const diverging = (t, pos, neg) => (t >= 0 ? mix(WHITE, pos, t) : mix(WHITE, neg, -t));
  function bucket(rank) { return rank === 1 ? 0 : rank <= 10 ? 1 : rank <= 100 ? 2 : rank <= 1000 ? 3 : 4; }
  function top1(c, arm, i) {
    const k = DATA.arms[arm].k;
    return k > 0 ? Math.max(c.topk_lp[i * k], c.logprob[i]) : NaN;
  }
  function value(mode, arm, i) {
    const c = columns(arm);
    switch (mode) {
      case "logprob": return c.logprob[i];
      case "rank": return c.rank[i] >= 1 ? c.rank[i] : NaN;
      case "rel": return Math.exp(c.logprob[i] - top1(c, arm, i));
      case "gain": return c.gain ? c.gain[i] : NaN;
      case "key": return c.key ? c.key[i] : NaN;
      case "diff": { const p = pairFor(arm); return p === null ? NaN : delta(p)[i]; }
    }
    return NaN;
  }
  function colour(mode, v) {
    if (!Number.isFinite(v)) return NA;
    switch (mode) {
      case "logprob": return mix(WHITE, LOGPROB_RED, clamp(-v / 10, 0, 1));
      case "rank": return RANK_COLOURS[bucket(v)];
      case "rel": return mix(WHITE, ORANGE, 1 - clamp(v, 0, 1));
      case "gain": return diverging(clamp(v / 4, -1, 1), BLUE, RED);
      case "key": return v ? KEY : WHITE;
      case "diff": return diverging(clamp(v / 4, -1, 1), RED, BLUE);
    }
    return NA;
  }
  const LEGENDS = {
    logprob: "white: log p = 0 → red: log p ≤ −10",
    rank: RANK_LABELS.map((l) => "rank " + l).join(" · "),
    rel: "white: as likely as the top-1 → orange: far less likely",
    gain: "blue: distant context helps (log p_long − log p_short > 0, full at +4) · red: it hurts",
    key: "gold: LongPPL key token",
    diff: "Δ = log p_A − log p_B = loss_B − loss_A: red where B is worse (full at 4 nats) · blue where B is better",
  };

  // ---- state ----
  const state = { mode: "logprob", pair: DATA.pairs.length ? 0 : null, page: 0, tokenPage: 0, current: null, focus: null, worstAt: -1, list: [] };
  function pairFor(arm) {
    if (state.pair !== null && DATA.pairs[state.pair].a === arm) return state.pair;
    const p = DATA.pairs.findIndex((q) => q.a === arm);
    return p < 0 ? null : p;
  }
  function tokenText(arm, id) {
    const t = DATA.arms[arm].vocab[String(id)];
    return t === undefined ? "#" + id : t;
  }
  function windowText(arm, w) {
    const win = DATA.arms[arm].windows, c = columns(arm);
    let s = "";
    for (let i = win.start[w]; i < win.start[w] + win.count[w]; i++) s += tokenText(arm, c.target_id[i]);
    return s;
  }
  function meanNll(arm, w) {
    const win = DATA.arms[arm].windows, c = columns(arm);
    let s = 0;
    for (let i = win.start[w]; i < win.start[w] + win.count[w]; i++) s -= c.logprob[i];
    return s / win.count[w];
  }

  // ---- window list ----
  function filterWindows() {
    const model = $("f-model").value, len = $("f-len").value, text = $("f-text").value;
    state.list = [];
    DATA.arms.forEach((armData, arm) => {
      if (model !== "" && String(arm) !== model) return;
      armData.windows.id.forEach((_, w) => {
        if (len !== "" && String(armData.windows.nominal_len[w]) !== len) return;
        if (text !== "" && !windowText(arm, w).includes(text)) return;
        state.list.push([arm, w]);
      });
    });
    state.page = 0;
    renderWindowList();
  }
  function renderWindowList() {
    state.page = renderPage({
      body: $("windows").tBodies[0], label: $("w-page"), items: state.list, page: state.page, perPage: WINDOWS_PER_PAGE,
      cells: ([arm, w]) => {
        const a = DATA.arms[arm];
        return [a.model, a.windows.text_id[w], a.windows.nominal_len[w], a.windows.repeat[w], a.windows.id[w], a.windows.count[w], meanNll(arm, w).toFixed(3)];
      },
      data: ([arm, w]) => ({ arm, w }),
      selected: ([arm, w]) => state.current && state.current[0] === arm && state.current[1] === w,
      select: ([arm, w]) => selectWindow(arm, w),
    });
  }

  // ---- tokens of one window ----
  function selectWindow(arm, w, focusIndex) {
    state.current = [arm, w];
    state.worstAt = -1;
    const a = DATA.arms[arm], start = a.windows.start[w];
    state.tokenPage = focusIndex === undefined ? 0 : Math.floor((focusIndex - start) / TOKENS_PER_PAGE);
    $("window-title").textContent = `${a.run} · ${a.model} · ${a.windows.text_id[w]} · ${a.windows.method[w]} ${a.windows.mode[w]} · L=${a.windows.nominal_len[w]} · repeat ${a.windows.repeat[w]} · ${a.windows.id[w]} · ${a.windows.count[w]} tokens`;
    renderWorst();
    renderTokens();
    renderWindowList();
    if (focusIndex !== undefined) focusToken(focusIndex);
  }
  function worstOf(arm, w) {
    const a = DATA.arms[arm], c = columns(arm), idx = [];
    for (let i = a.windows.start[w]; i < a.windows.start[w] + a.windows.count[w]; i++) idx.push(i);
    idx.sort((x, y) => c.logprob[x] - c.logprob[y]);
    return idx.slice(0, WORST_SHOWN);
  }
  function renderWorst() {
    const [arm, w] = state.current, box = $("worst");
    box.replaceChildren();
    const label = document.createElement("span");
    label.textContent = "worst tokens: ";
    box.appendChild(label);
    for (const i of worstOf(arm, w)) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "worst-token";
      b.dataset.i = i;
      b.textContent = `${visible(tokenText(arm, columns(arm).target_id[i]))} (${columns(arm).logprob[i].toFixed(2)})`;
      b.addEventListener("click", () => jumpTo(i));
      box.appendChild(b);
    }
  }
  function renderTokens() {
    const [arm, w] = state.current, a = DATA.arms[arm], c = columns(arm);
    const start = a.windows.start[w], end = start + a.windows.count[w];
    const pages = Math.max(1, Math.ceil(a.windows.count[w] / TOKENS_PER_PAGE));
    state.tokenPage = clamp(state.tokenPage, 0, pages - 1);
    const from = start + state.tokenPage * TOKENS_PER_PAGE, to = Math.min(end, from + TOKENS_PER_PAGE);
    const box = $("tokens"), frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) {
      const text = tokenText(arm, c.target_id[i]), span = document.createElement("span");
      span.className = "tok";
      span.tabIndex = -1;
      span.setAttribute("role", "listitem");
      span.dataset.i = i;
      span.textContent = visible(text);
      span.style.backgroundColor = css(colour(state.mode, value(state.mode, arm, i)));
      frag.appendChild(span);
      if (text.includes("\n")) frag.appendChild(document.createElement("br"));
    }
    box.replaceChildren(frag);
    const first = box.querySelector(".tok");
    if (first) first.tabIndex = 0;
    $("t-page").textContent = `tokens ${from - start + 1}–${to - start} of ${a.windows.count[w]}`;
  }
  function recolour() {
    if (!state.current) return;
    const arm = state.current[0];
    for (const span of $("tokens").querySelectorAll(".tok")) span.style.backgroundColor = css(colour(state.mode, value(state.mode, arm, Number(span.dataset.i))));
    $("legend").textContent = LEGENDS[state.mode];
  }

  // ---- card, focus, keys ----
  // numbers for people (common.js), ranks as integers with their GLTR bucket
  function modeValue(mode, v) {
    switch (mode) {
      case "logprob": return fmt(v, 3);
      case "rank": return Number.isFinite(v) ? `${v} (bucket ${RANK_LABELS[bucket(v)]})` : "unknown";
      case "rel": return pct(v);
      case "gain": case "diff": return Number.isFinite(v) ? `${signed(v)} nats` : "—";
      case "key": return Number.isFinite(v) ? (v ? "yes" : "no") : "—";
    }
    return fmt(v, 3);
  }
  function showCard(span) {
    const arm = state.current[0], i = Number(span.dataset.i), a = DATA.arms[arm], c = columns(arm);
    $("card-token").textContent = visible(tokenText(arm, c.target_id[i]));
    $("card-id").textContent = String(c.target_id[i]);
    $("card-logprob").textContent = fmt(c.logprob[i], 3);
    $("card-prob").textContent = pct(Math.exp(c.logprob[i]));
    $("card-rank").textContent = c.rank[i] >= 1 ? String(c.rank[i]) : "unknown (outside the API's top-k)";
    $("card-greedy").textContent = c.greedy_id[i] >= 0 ? `${visible(tokenText(arm, c.greedy_id[i]))} (id ${c.greedy_id[i]})` : "—";
    $("card-ctx").textContent = String(c.context_len[i]);
    $("card-mode-name").textContent = $("mode").selectedOptions[0].textContent;
    $("card-mode").textContent = modeValue(state.mode, value(state.mode, arm, i));
    const list = $("card-topk");
    list.replaceChildren();
    for (let j = 0; j < a.k; j++) {
      const id = c.topk_ids[i * a.k + j], lp = c.topk_lp[i * a.k + j], li = document.createElement("li");
      li.dataset.id = id;
      li.textContent = `${visible(tokenText(arm, id))}  ${pct(Math.exp(lp))}  (log p ${fmt(lp, 3)}, id ${id})`;
      if (id === c.target_id[i]) li.className = "is-target";
      list.appendChild(li);
    }
    placeCard($("card"), span);
  }
  function focusToken(i) { focusTokenIn($("tokens"), i); }
  const jumpTo = wireWindowKeys(state, {
    span: ([arm, w]) => [DATA.arms[arm].windows.start[w], DATA.arms[arm].windows.count[w]],
    worst: ([arm, w]) => worstOf(arm, w),
    same: (a, b) => a[0] === b[0] && a[1] === b[1],
    open: ([arm, w]) => selectWindow(arm, w),
    renderTokens, focusToken, tokensPerPage: TOKENS_PER_PAGE, windowsPerPage: WINDOWS_PER_PAGE, card: $("card"),
  });
  const tokens = $("tokens");
  wireTokenCard(tokens, $("card"), showCard);

  // ---- controls ----
  function option(select, value, label) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = label;
    select.appendChild(o);
  }
  DATA.arms.forEach((a, i) => option($("f-model"), String(i), `${a.run} · ${a.model}`));
  [...new Set(DATA.arms.flatMap((a) => a.windows.nominal_len))].sort((x, y) => x - y).forEach((l) => option($("f-len"), String(l), String(l)));
  DATA.pairs.forEach((p, i) => option($("pair"), String(i), p.label));
  $("pair-label").hidden = DATA.pairs.length === 0;
  $("mode").addEventListener("change", () => { state.mode = $("mode").value; recolour(); });
  $("pair").addEventListener("change", () => {
    state.pair = Number($("pair").value);
    const arm = DATA.pairs[state.pair].a;
    if (!state.current || state.current[0] !== arm) {
      const k = state.list.findIndex(([a]) => a === arm);
      if (k >= 0) { state.page = Math.floor(k / WINDOWS_PER_PAGE); selectWindow(arm, state.list[k][1]); }
    }
    recolour();
  });
  for (const id of ["f-model", "f-len"]) $(id).addEventListener("change", filterWindows);
  $("f-text").addEventListener("input", filterWindows);
  $("w-prev").addEventListener("click", () => { state.page -= 1; renderWindowList(); });
  $("w-next").addEventListener("click", () => { state.page += 1; renderWindowList(); });
  $("t-prev").addEventListener("click", () => { if (state.current) { state.tokenPage -= 1; renderTokens(); } });
  $("t-next").addEventListener("click", () => { if (state.current) { state.tokenPage += 1; renderTokens(); } });

  filterWindows();
  if (state.list.length) selectWindow(state.list[0][0], state.list[0][1]);
  $("legend").textContent = LEGENDS[state.mode];
  window.ctxevalReport = { selectWindow, state };
  performance.mark("ctxeval-interactive");
})();
