// ctxeval RULER sample explorer. All data comes from the JSON block; every text goes into the
// page through textContent, never innerHTML. One page of samples is rendered at a time.
"use strict";
(function () {
  const SAMPLES = JSON.parse(document.getElementById("ctxeval-samples").textContent).samples;
  const PER_PAGE = 50;
  const $ = (id) => document.getElementById(id);
  const KIND_TEXT = {
    settled: "settled: greedy decoding produces the reference, so it was not generated (its generated score is exact)",
    predicted: "predicted: not drawn for generation (only its likelihood numbers)",
    "likelihood only": "not generated (a likelihood-only run)",
  };
  const state = { list: [], page: 0, current: null };
  const who = (s) => `${s.run} · ${s.model}`;
  const score = (v) => (v === null ? "—" : (100 * v).toFixed(1));
  const logp = (v) => (v === null ? "—" : v.toFixed(3));

  function option(select, value) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = value;
    select.appendChild(o);
  }
  function filter() {
    const want = { who: $("s-model").value, task: $("s-task").value, length: $("s-len").value, kind: $("s-kind").value };
    state.list = SAMPLES.map((s, i) => i).filter((i) => {
      const s = SAMPLES[i];
      return (!want.who || who(s) === want.who) && (!want.task || s.task === want.task)
        && (!want.length || String(s.length) === want.length) && (!want.kind || s.kind === want.kind);
    });
    state.page = 0;
    render();
  }
  function render() {
    const body = $("sample-list").querySelector("tbody");
    body.replaceChildren();
    const pages = Math.max(1, Math.ceil(state.list.length / PER_PAGE));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    for (const i of state.list.slice(state.page * PER_PAGE, (state.page + 1) * PER_PAGE)) {
      const s = SAMPLES[i];
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      tr.dataset.i = String(i);
      for (const cell of [who(s), s.task, s.length, s.sample, s.kind, score(s.generation_score), score(s.likelihood_score), logp(s.answer_logprob)]) {
        const td = document.createElement("td");
        td.textContent = String(cell);
        tr.appendChild(td);
      }
      if (i === state.current) tr.classList.add("selected");
      tr.addEventListener("click", () => select(i));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") select(i); });
      body.appendChild(tr);
    }
    const first = state.list.length ? state.page * PER_PAGE + 1 : 0;
    $("s-page").textContent = `samples ${first}–${Math.min(state.list.length, (state.page + 1) * PER_PAGE)} of ${state.list.length}`;
  }
  function select(i) {
    state.current = i;
    const s = SAMPLES[i];
    $("sample-title").textContent = `${who(s)} · ${s.task} · L=${s.length} · sample ${s.sample} · ${s.kind}`;
    $("sample-prompt").textContent = s.prompt_tail === null ? "— (this run's records do not keep the prompt)" : "…" + s.prompt_tail;
    $("sample-answers").textContent = s.answers.join(", ");
    $("sample-generated").textContent = s.generated !== null ? s.generated : (KIND_TEXT[s.kind] || s.kind);
    $("sample-gen-score").textContent = s.generation_score === null ? "— (not generated)" : `${score(s.generation_score)} %`;
    $("sample-lik-score").textContent = `${score(s.likelihood_score)} % (answers inside the greedy prefix of the teacher-forced reference)`;
    $("sample-logp").textContent = `${logp(s.answer_logprob)} over ${s.answer_tokens} token(s), ${logp(s.mean_logprob)} per token`;
    $("sample-ranks").textContent = s.answer_ranks === null ? `— (this run keeps the first token's only: ${s.first_rank})` : s.answer_ranks.join(" ");
    $("sample-prefix").textContent = `the model's greedy choice follows the reference for ${s.greedy_prefix} of its ${s.reference_tokens} token(s)`;
    render();
  }

  const values = (f) => [...new Set(SAMPLES.map(f))];
  values(who).forEach((v) => option($("s-model"), v));
  values((s) => s.task).forEach((v) => option($("s-task"), v));
  values((s) => s.length).sort((a, b) => a - b).forEach((v) => option($("s-len"), String(v)));
  values((s) => s.kind).forEach((v) => option($("s-kind"), v));
  for (const id of ["s-model", "s-task", "s-len", "s-kind"]) $(id).addEventListener("change", filter);
  $("s-prev").addEventListener("click", () => { state.page -= 1; render(); });
  $("s-next").addEventListener("click", () => { state.page += 1; render(); });
  filter();
  if (state.list.length) select(state.list[0]);
  window.ctxevalSamples = { select, state, samples: SAMPLES };
})();
