// ctxeval diff page: tokens coloured by KL(P_ref || P_cand), a card with both models' numbers
// and top-k side by side. All data comes from the JSON block; every text goes into the page
// through textContent, never innerHTML. Windows and tokens are drawn on demand, a page at a time.
"use strict";
(function () {
  const { decode, clamp, mix, css, visible, fmt, pct, signed, placeCard, focusTokenIn, wireTokenCard, renderPage, wireWindowKeys } = ctxevalCommon;
  const DATA = JSON.parse(document.getElementById("ctxeval-data").textContent);
  const WINDOWS_PER_PAGE = 50, TOKENS_PER_PAGE = 2000, WORST_SHOWN = 10;
  const WHITE = [255, 255, 255], KL_RED = [178, 24, 43];
  // KL colour, log scale: white at or below 1e-4 nats (and at 0) -> full red at 10 nats or more
  const LOG_LO = -4, LOG_HI = 1;
  const $ = (id) => document.getElementById(id);
  const TYPES = {
    target_id: Int32Array, context_len: Int32Array, kl: Float64Array, ref_logprob: Float64Array, cand_logprob: Float64Array,
    ref_rank: Int32Array, cand_rank: Int32Array, ref_top1: Int32Array, cand_top1: Int32Array, delta_p: Float64Array,
    ref_topk_ids: Int32Array, ref_topk_lp: Float32Array, cand_topk_ids: Int32Array, cand_topk_lp: Float32Array, key: Uint8Array,
  };
  const C = {};
  for (const [name, b64] of Object.entries(DATA.tokens)) C[name] = decode(b64, TYPES[name]);
  const W = DATA.windows, K = DATA.k;

  function klShade(kl) {
    return kl > 0 ? clamp((Math.log10(kl) - LOG_LO) / (LOG_HI - LOG_LO), 0, 1) : 0;
  }
  const klColour = (kl) => mix(WHITE, KL_RED, klShade(kl));
  const tokenText = (id) => { const t = DATA.vocab[String(id)]; return t === undefined ? "#" + id : t; };
  const nats = (x) => (Number.isFinite(x) ? x.toFixed(6) : "—");

  function legend() {
    const box = $("legend");
    box.replaceChildren();
    const label = document.createElement("span");
    label.textContent = "KL (nats, log scale): ";
    box.appendChild(label);
    for (const kl of [0, 1e-3, 1e-2, 1e-1, 1, 10]) {
      const sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.backgroundColor = css(klColour(kl));
      if (klShade(kl) > 0.6) sw.style.color = "#fff";
      sw.textContent = kl === 0 ? "≤1e-4" : kl >= 10 ? "≥10" : String(kl);
      box.appendChild(sw);
    }
    const flip = document.createElement("span");
    flip.className = "swatch flip";
    flip.textContent = "top-1 flipped";
    box.appendChild(flip);
  }

  // ---- window list ----
  const state = { page: 0, tokenPage: 0, current: null, worstAt: -1, list: [] };
  function windowText(w) {
    let s = "";
    for (let i = W.start[w]; i < W.start[w] + W.count[w]; i++) s += tokenText(C.target_id[i]);
    return s;
  }
  function filterWindows() {
    const text = $("f-text").value;
    state.list = W.id.map((_, w) => w).filter((w) => text === "" || windowText(w).includes(text));
    state.page = 0;
    renderWindowList();
  }
  function renderWindowList() {
    state.page = renderPage({
      body: $("windows").tBodies[0], label: $("w-page"), items: state.list, page: state.page, perPage: WINDOWS_PER_PAGE,
      cells: (w) => [W.text_id[w], W.id[w], W.count[w], W.mean_kl[w].toFixed(5), W.flips[w]],
      data: (w) => ({ w }),
      selected: (w) => state.current === w,
      select: (w) => selectWindow(w),
    });
  }

  // ---- tokens of one window ----
  function selectWindow(w) {
    state.current = w;
    state.worstAt = -1;
    state.tokenPage = 0;
    $("window-title").textContent = `${W.text_id[w]} · ${W.id[w]} · ${W.count[w]} tokens · mean KL ${W.mean_kl[w].toFixed(5)} · ${W.flips[w]} top-1 flips`;
    renderWorst();
    renderTokens();
    renderWindowList();
  }
  function worstOf(w) {
    const idx = [];
    for (let i = W.start[w]; i < W.start[w] + W.count[w]; i++) idx.push(i);
    idx.sort((x, y) => C.kl[y] - C.kl[x]);
    return idx.slice(0, WORST_SHOWN);
  }
  function renderWorst() {
    const box = $("worst");
    box.replaceChildren();
    const label = document.createElement("span");
    label.textContent = "highest KL: ";
    box.appendChild(label);
    for (const i of worstOf(state.current)) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "worst-token";
      b.dataset.i = i;
      b.textContent = `${visible(tokenText(C.target_id[i]))} (${C.kl[i].toFixed(3)})`;
      b.addEventListener("click", () => jumpTo(i));
      box.appendChild(b);
    }
  }
  function renderTokens() {
    const w = state.current, start = W.start[w], end = start + W.count[w];
    const pages = Math.max(1, Math.ceil(W.count[w] / TOKENS_PER_PAGE));
    state.tokenPage = clamp(state.tokenPage, 0, pages - 1);
    const from = start + state.tokenPage * TOKENS_PER_PAGE, to = Math.min(end, from + TOKENS_PER_PAGE);
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) {
      const text = tokenText(C.target_id[i]), span = document.createElement("span");
      span.className = C.ref_top1[i] === C.cand_top1[i] ? "tok" : "tok flip";
      span.tabIndex = -1;
      span.setAttribute("role", "listitem");
      span.dataset.i = i;
      span.textContent = visible(text);
      span.style.backgroundColor = css(klColour(C.kl[i]));
      frag.appendChild(span);
      if (text.includes("\n")) frag.appendChild(document.createElement("br"));
    }
    $("tokens").replaceChildren(frag);
    const first = $("tokens").querySelector(".tok");
    if (first) first.tabIndex = 0;
    $("t-page").textContent = `tokens ${from - start + 1}–${to - start} of ${W.count[w]}`;
  }

  // ---- the card ----
  function topkList(list, ids, lps, i, target) {
    list.replaceChildren();
    for (let j = 0; j < K; j++) {
      const id = ids[i * K + j], lp = lps[i * K + j], li = document.createElement("li");
      li.dataset.id = id;
      const tok = document.createElement("span");
      tok.className = "topk-token";
      tok.textContent = visible(tokenText(id));
      const p = document.createElement("span");
      p.className = "topk-prob";
      p.textContent = pct(Math.exp(lp));
      li.append(tok, " ", p);
      li.title = `id ${id}, log p ${fmt(lp, 3)}`;
      if (id === target) li.className = "is-target";
      list.appendChild(li);
    }
  }
  function showCard(span) {
    const i = Number(span.dataset.i), target = C.target_id[i];
    $("card-token").textContent = visible(tokenText(target));
    $("card-id").textContent = String(target);
    $("card-ctx").textContent = String(C.context_len[i]);
    $("card-kl").textContent = `${nats(C.kl[i])} nats`;
    $("card-dp").textContent = signed(C.delta_p[i], 6);
    $("card-key-row").hidden = C.key === undefined;
    if (C.key !== undefined) $("card-key").textContent = C.key[i] ? "yes" : "no";
    for (const side of ["ref", "cand"]) {
      const lp = C[`${side}_logprob`][i], top1 = C[`${side}_top1`][i];
      $(`card-${side}-logprob`).textContent = fmt(lp, 3);
      $(`card-${side}-prob`).textContent = pct(Math.exp(lp));
      $(`card-${side}-rank`).textContent = String(C[`${side}_rank`][i]);
      $(`card-${side}-top1`).textContent = `${visible(tokenText(top1))} (id ${top1})`;
      if (K > 0) topkList($(`card-${side}-topk`), C[`${side}_topk_ids`], C[`${side}_topk_lp`], i, target);
    }
    placeCard($("card"), span);
  }
  function focusToken(i) { focusTokenIn($("tokens"), i); }
  const jumpTo = wireWindowKeys(state, {
    span: (w) => [W.start[w], W.count[w]], worst: worstOf, same: (a, b) => a === b, open: selectWindow,
    renderTokens, focusToken, tokensPerPage: TOKENS_PER_PAGE, windowsPerPage: WINDOWS_PER_PAGE, card: $("card"),
  });
  const tokens = $("tokens");
  wireTokenCard(tokens, $("card"), showCard);
  tokens.addEventListener("click", (e) => { if (e.target.classList.contains("tok")) focusToken(Number(e.target.dataset.i)); });

  $("f-text").addEventListener("input", filterWindows);
  $("w-prev").addEventListener("click", () => { state.page -= 1; renderWindowList(); });
  $("w-next").addEventListener("click", () => { state.page += 1; renderWindowList(); });
  $("t-prev").addEventListener("click", () => { if (state.current !== null) { state.tokenPage -= 1; renderTokens(); } });
  $("t-next").addEventListener("click", () => { if (state.current !== null) { state.tokenPage += 1; renderTokens(); } });

  legend();
  filterWindows();
  if (state.list.length) selectWindow(DATA.open ?? state.list[0]);
  window.ctxevalDiff = { selectWindow, state };
  performance.mark("ctxeval-interactive");
})();
