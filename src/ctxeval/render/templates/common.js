// Helpers shared by the report pages (explorer.js, diff.js): decoding the embedded columns,
// colours, and numbers and token texts written for people (docs/report.md gives the formats).
"use strict";
const ctxevalCommon = (function () {
  function decode(b64, Type) {
    const bin = atob(b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Type(bytes.buffer);
  }
  const clamp = (x, lo, hi) => Math.min(hi, Math.max(lo, x));
  const mix = (a, b, t) => [0, 1, 2].map((i) => Math.round(a[i] + (b[i] - a[i]) * t));
  const css = (rgb) => `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
  function visible(text) {
    const out = text.replace(/ /g, "␣").replace(/\t/g, "⇥").replace(/\r/g, "␍").replace(/\n/g, "⏎");
    return out === "" ? "∅" : out;
  }
  // log-probabilities and nats with 3 decimals, probabilities as percentages
  const fmt = (x, d) => (Number.isFinite(x) ? x.toFixed(d) : "—");
  function pct(p) {
    if (!Number.isFinite(p)) return "—";
    const v = 100 * p;
    return (v >= 10 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v >= 0.001 ? v.toPrecision(2) : v > 0 ? "<0.001" : "0") + " %";
  }
  const signed = (x, d = 3) => (Number.isFinite(x) ? (x > 0 ? "+" : "") + x.toFixed(d) : "—");
  // the token card opens below its token, kept inside the viewport
  function placeCard(card, span) {
    const r = span.getBoundingClientRect();
    card.hidden = false;
    card.style.left = `${Math.max(0, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - card.offsetWidth - 8))}px`;
    card.style.top = `${window.scrollY + r.bottom + 4}px`;
  }
  // roving tabindex: only the focused token of `container` is in the tab order
  function focusTokenIn(container, i) {
    const span = container.querySelector(`.tok[data-i="${i}"]`);
    if (!span) return;
    for (const s of container.querySelectorAll(".tok[tabindex='0']")) s.tabIndex = -1;
    span.tabIndex = 0;
    span.focus();
  }
  // hovering or focusing a token shows its card; leaving the tokens hides it unless one has focus
  function wireTokenCard(tokens, card, showCard) {
    tokens.addEventListener("mouseover", (e) => { if (e.target.classList.contains("tok")) showCard(e.target); });
    tokens.addEventListener("focusin", (e) => { if (e.target.classList.contains("tok")) showCard(e.target); });
    tokens.addEventListener("mouseleave", () => { if (!tokens.contains(document.activeElement)) card.hidden = true; });
  }
  // one page of a window list as table rows: `cells(item)` gives a row's values, `data(item)` its
  // data attributes, `selected(item)` marks the open one, `select(item)` opens one (click or
  // Enter); `label` gets the page's range. Returns the page, kept within the list.
  function renderPage({ body, label, items, page, perPage, cells, data, selected, select }) {
    body.replaceChildren();
    page = clamp(page, 0, Math.max(1, Math.ceil(items.length / perPage)) - 1);
    for (const item of items.slice(page * perPage, (page + 1) * perPage)) {
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      Object.assign(tr.dataset, data(item));
      for (const cell of cells(item)) {
        const td = document.createElement("td");
        td.textContent = String(cell);
        tr.appendChild(td);
      }
      if (selected(item)) tr.classList.add("selected");
      tr.addEventListener("click", () => select(item));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") select(item); });
      body.appendChild(tr);
    }
    label.textContent = `windows ${items.length ? page * perPage + 1 : 0}–${Math.min(items.length, (page + 1) * perPage)} of ${items.length}`;
    return page;
  }
  // the keyboard over the open window of a page's list: ←/→/Home/End move between its tokens
  // (turning token pages), w cycles through its worst tokens, ] and [ open the next and previous
  // listed window, Escape hides the card; keys typed into a form field are left alone. What
  // differs between pages: `span(item)` gives a window's [first token, token count],
  // `worst(item)` its worst tokens, `same(a, b)` compares items, `open(item)` opens one.
  // Returns `jumpTo(i)`: focus token i of the open window, on its page.
  function wireWindowKeys(state, { span, worst, same, open, renderTokens, focusToken, tokensPerPage, windowsPerPage, card }) {
    function jumpTo(i) {
      const page = Math.floor((i - span(state.current)[0]) / tokensPerPage);
      if (page !== state.tokenPage) { state.tokenPage = page; renderTokens(); }
      focusToken(i);
    }
    function move(step) {
      const [start, count] = span(state.current), end = start + count;
      const at = document.activeElement && document.activeElement.classList.contains("tok") ? Number(document.activeElement.dataset.i) : start - 1;
      jumpTo(step === "home" ? start : step === "end" ? end - 1 : clamp(at + step, start, end - 1));
    }
    function stepWindow(d) {
      if (!state.list.length) return;
      let k = state.current === null ? -1 : state.list.findIndex((item) => same(item, state.current));
      k = clamp(k + d, 0, state.list.length - 1);
      state.page = Math.floor(k / windowsPerPage);
      open(state.list[k]);
      focusToken(span(state.list[k])[0]);
    }
    const steps = { ArrowRight: 1, ArrowLeft: -1, Home: "home", End: "end" };
    document.addEventListener("keydown", (e) => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
      if (e.key in steps && state.current !== null) { e.preventDefault(); move(steps[e.key]); }
      else if (e.key === "w" && state.current !== null) {
        const tokens = worst(state.current);
        state.worstAt = (state.worstAt + 1) % tokens.length;
        jumpTo(tokens[state.worstAt]);
      } else if (e.key === "]") stepWindow(1);
      else if (e.key === "[") stepWindow(-1);
      else if (e.key === "Escape") card.hidden = true;
    });
    return jumpTo;
  }
  return { decode, clamp, mix, css, visible, fmt, pct, signed, placeCard, focusTokenIn, wireTokenCard, renderPage, wireWindowKeys };
})();
