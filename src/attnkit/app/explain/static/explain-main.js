// attnkit explain, main: the header, the notes in Korean, the tour, the served page's
// form, the wiring of the controls and the start.
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

// ---------------------------------------------------------------------------- header
function renderHeader() {
  const t = trace();
  $("run-name").textContent = t.run ? `· ${t.run}` : "";
  const m = t.model || {};
  const sizes = ["num_layers", "d_model", "num_heads", "d_ff", "vocab_size"]
    .filter((k) => m[k] !== undefined && m[k] !== null).map((k) => `${k} ${m[k]}`);
  const sized = `${t.family}${sizes.length ? " · " + sizes.join(", ") : ""}`;
  say($("model-line"), `${t.task} run · arch ${t.arch} · ${sized}`, `${t.task} 실행 · 구조 ${t.arch} · ${sized}`);
  $("notes").replaceChildren(...(t.notes || []).map((n) =>
    el("li", { class: /cut|truncat|budget|잘/.test(n) ? "cut" : null }, tr(n, noteKo(n)))));
  const alts = PAYLOAD.traces;
  $("alt-row").hidden = alts.length < 2;
  fillSelect($("pick-trace"), alts.map((a, i) => [i, a.label]), S.alt);
  const api = PAYLOAD.api;
  $("ask").hidden = !api;
  $("fixed-note").hidden = !!api;
  if (api) {
    if (!$("ask-text").dataset.filled) {
      $("ask-text").value = t.text;
      $("ask-pair").value = t.pair || "";
      $("ask-target").value = (t.view && t.view.teacher_forcing && t.view.teacher_forcing.reference_text) || "";
      $("ask-text").dataset.filled = "1";
    }
    $("ask-pair").hidden = !(api.pairs || t.pair);
    fitAskForm(t.family);
  }
}

// The served page's form fields that depend on the run's family (FAMILIES).
function fitAskForm(family) {
  const fam = familyView(family) || {};
  $("ask-target").hidden = !fam.target;
  if (fam.pairPlaceholder) $("ask-pair").placeholder = fam.pairPlaceholder;
  $("ask-beam-label").hidden = !fam.beam;
  $("ask-steps-label").hidden = !fam.steps;
}

// ---------------------------------------------------------------------------- wiring
// A served page for a text the run refused (no trace): the form with the text, and why.
function renderRefused(api) {
  $("ask").hidden = false;
  $("fixed-note").hidden = true;
  $("ask-text").value = api.text || "";
  $("ask-text").dataset.filled = "1";
  $("ask-pair").value = api.pair || "";
  $("ask-pair").hidden = !(api.pairs || api.pair);
  $("ask-target").value = api.target || "";
  fitAskForm(api.family);
  if (api.family) say($("model-line"), `${api.family} run`, `${api.family} 실행`);
  else $("model-line").replaceChildren();
  $("toc").hidden = true;
  for (const card of document.querySelectorAll("main > section.card")) card.hidden = true;
  showError(`the run refused this text: ${api.error}`, `모델이 이 문장을 처리하지 못했습니다: ${api.error}`);
  renderTour();
  document.body.dataset.ready = "true";
}

function render() {
  $("toc").hidden = false;
  for (const card of document.querySelectorAll("main > section.card")) card.hidden = false;
  renderHeader();
  renderInput();
  renderEmbeddings();
  renderHead();
  renderModelView();
  renderHeadView();
  renderResidual();
  renderFamily();
  renderTour();
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  document.body.dataset.ready = "true";
}

// The error line: a message in English and Korean (ko left out: the same text in both).
function showError(message, ko) {
  if (message) say($("error"), message, ko ?? message);
  else $("error").replaceChildren();
  $("error").hidden = !message;
}

// The header's notes come from the trace in English; their Korean, by pattern (a note no
// pattern knows is shown in English in both languages).
const NOTE_KO = [
  [/^the (input|prompt|source|text|question|pair) was cut to (\d+) tokens \(its (.+?) kept\): the explainer's bound(.*)$/,
    (m) => `${{ input: "입력", prompt: "프롬프트", source: "원문", text: "문장", question: "질문", pair: "문장 쌍" }[m[1]]}을 토큰 ${m[2]}개로 잘랐습니다(${{ end: "끝부분을 남김", "longer sentence cut first": "긴 문장부터 자름" }[m[3]] || "앞부분을 남김"}): explain의 한도${m[4].replace(/\(with (\d+) new tokens\)/, "(새 토큰 $1개 포함)")}`],
  [/^the (input|source) was cut to the run's data\.max_len = (\d+) tokens$/,
    (m) => `${m[1] === "source" ? "원문" : "입력"}을 이 실행의 data.max_len = ${m[2]} 토큰으로 잘랐습니다`],
  [/^dropout is off: eval mode \(inference\)(?:; training used p = ([\d.e-]+))?$/,
    (m) => `드롭아웃은 꺼져 있습니다: 평가 모드(추론)${m[1] ? `. 학습 때는 p = ${m[1]}` : ""}`],
  [/^the scores before the mask are kept for the first layer of each stack only/,
    () => "마스크 전 어텐션 스코어는 각 스택의 첫 층에만 저장했습니다(페이지 크기 한도): 첫 층을 골라 보세요"],
  [/^the attention weights of the layers after the first are stored in steps of 1\/255/,
    () => "첫 층 다음 층들의 어텐션 가중치는 1/255 단위(uint8)로 저장했습니다(페이지 크기 한도): 행의 합은 약 0.01 안에서 1입니다"],
  [/^the trace's arrays take ([\d.]+) MB, more than its budget of ([\d.]+) MB/,
    (m) => `배열이 ${m[1]} MB로 한도 ${m[2]} MB를 넘습니다: 토큰 수(max_tokens)를 줄여 보세요`],
  [/^the text was cut to (\d+) word pieces/, (m) => `문장을 단어 조각 ${m[1]}개로 잘랐습니다: 들어가지 못한 단어는 O로 표시합니다`],
  [/^the context is read in (\d+) windows of at most (\d+) tokens; shown: window (\d+)/,
    (m) => `지문을 최대 ${m[2]} 토큰짜리 창 ${m[1]}개로 나누어 읽습니다. 보이는 것은 정답이 있는 ${m[3]}번째 창입니다`],
  [/^the question was cut to its first (\d+) tokens/, (m) => `질문을 앞 ${m[1]} 토큰으로 잘랐습니다(max_question_len)`],  [/^padded with (\d+) \[PAD\] tokens? to (\d+) tokens \(pad_to\)/,
    (m) => `[PAD] 토큰 ${m[1]}개를 덧붙여 ${m[2]} 토큰으로 맞췄습니다(pad_to). 더 긴 문장과 한 배치에 들어간 것처럼: 패딩 마스크가 이 토큰들을 가립니다`],
  [/^the logits with the padding equal the text's own, alone \(largest difference ([^)]+)\)$/,
    (m) => `패딩을 붙여도 로짓은 문장만 읽었을 때와 같습니다(최대 차이 ${m[1]})`],
  [/^the padding changes this model's logits \(by up to ([^)]+)\)/,
    (m) => `패딩이 이 모델의 로짓을 바꿉니다(최대 ${m[1]}): 이 모델은 모든 곳에서 패딩을 가리지는 않습니다`],
  [/^the output with the padding is the source's own, alone$/, () => "패딩을 붙여도 출력은 원문만 읽었을 때와 같습니다"],
  [/^the padding changes this model's output \(alone: (.*)\)$/, (m) => `패딩이 이 모델의 출력을 바꿉니다(패딩 없이: ${m[1]})`],
  [/^this run has no next-sentence \(NSP\) head/,
    () => "이 실행에는 다음 문장 예측(NSP) 헤드가 없습니다: model.arch bert-mlm은 마스크드 언어 모델만 학습합니다(RoBERTa의 선택). IsNext / NotNext를 보려면 model.arch bert-pretraining으로 학습하세요"],
];
function noteKo(note) {
  for (const [pattern, ko] of NOTE_KO) {
    const m = pattern.exec(note);
    if (m) return ko(m);
  }
  return note;
}

// ---------------------------------------------------------------------------- the tour
// A step whose panel this page does not show (hidden, absent, or its section says it has
// nothing to show for this run) says which run has it instead of linking to nothing.
const SECTION_NONE = { embed: "emb-none", head: "no-attention", heads: "heads-none", residual: "res-none" };
const TRY = {
  any: ["another run", "다른 실행"],
  transformer: ["a Transformer run (a classify, GPT, BERT or seq2seq run)", "트랜스포머 실행(분류, GPT, BERT, seq2seq)"],
  seq2seq: ["a seq2seq run (translate / chat)", "seq2seq 실행(번역 / 챗봇)"],
  bert: ["a BERT pretraining run, with a sentence pair (--pair)", "BERT 사전 학습 실행과 문장 쌍(--pair)"],
};
function panelShown(id) {
  const target = document.getElementById(id);
  if (!target || target.closest("[hidden]")) return false;
  const card = target.closest("section.card");
  const none = card && SECTION_NONE[card.id] ? $(SECTION_NONE[card.id]) : null;
  return !(none && !none.hidden);
}
function renderTour() {
  for (const step of document.querySelectorAll("#tour .tour-step")) {
    const id = step.dataset.target;
    const ok = panelShown(id);
    const link = step.querySelector("a.tour-go");
    step.classList.toggle("na", !ok);
    if (ok) {
      link.setAttribute("href", `#${id}`);
      link.removeAttribute("aria-disabled");
    } else {
      link.removeAttribute("href");
      link.setAttribute("aria-disabled", "true");
    }
    let na = step.querySelector(".tour-na");
    if (!ok && !na) {
      const [en, ko] = TRY[step.dataset.try] || TRY.any;
      na = el("span", { class: "tour-na" }, tr(` (not in this run's family — try ${en})`, ` (이 모델 계열에는 없습니다 — ${ko}에서 볼 수 있습니다)`));
      link.after(na);
    }
    if (na) na.hidden = ok;
  }
}
// open on the first visit; closed again next time if the learner closed it
function initTour() {
  const tour = $("tour");
  try {
    if (localStorage.getItem("attnkit-tour") === "closed") tour.open = false;
  } catch (err) { /* no storage: always open */ }
  tour.addEventListener("toggle", () => {
    try {
      localStorage.setItem("attnkit-tour", tour.open ? "open" : "closed");
    } catch (err) { /* not kept */ }
  });
}

async function ask(event) {
  event.preventDefault();
  const api = PAYLOAD.api;
  const button = $("ask-btn");
  if (!api || button.disabled) return;
  if (!$("ask-text").value.trim()) { // nothing to explain: say so, ask the server nothing
    $("ask-status").replaceChildren();
    showError("The text is empty: type a sentence first, then press Explain.",
      "문장이 비어 있습니다: 먼저 문장을 입력한 뒤 설명 보기를 누르세요.");
    $("ask-text").focus();
    return;
  }
  const body = { model: api.model, text: $("ask-text").value };
  if (!$("ask-pair").hidden && $("ask-pair").value) body.pair = $("ask-pair").value;
  if (!$("ask-target").hidden && $("ask-target").value.trim()) body.target = $("ask-target").value;
  const fam = familyView(PAYLOAD.traces.length ? trace().family : api.family) || {};
  if (fam.beam) body.beam = Number($("ask-beam").value) || 1;
  if (fam.steps) body.max_new_tokens = Number($("ask-steps").value) || 1;
  if (!$("pad-form").hidden && Number($("pad-to").value) > 0) body.pad_to = Number($("pad-to").value);
  button.disabled = true;
  showError("");
  say($("ask-status"), "running the model…", "모델을 실행하는 중…");
  document.body.dataset.ready = "false";
  try {
    const response = await fetch(api.endpoint, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(`${response.status}: ${data.error ? data.error.message : response.statusText}`);
    PAYLOAD.traces = data.traces;
    S.alt = 0;
    S.lmStep = 0;
    S.s2sStep = 1;
    $("ask-status").textContent = "";
    render();
  } catch (err) {
    $("ask-status").replaceChildren();
    showError(err.message, `오류 ${err.message}`);
    document.body.dataset.ready = "true";
  } finally {
    button.disabled = false;
  }
}

function wire() {
  const on = (id, ev, fn) => $(id).addEventListener(ev, fn);
  on("lang", "change", () => setLang($("lang").value));
  on("pick-trace", "change", () => { S.alt = Number($("pick-trace").value); render(); });
  on("emb-input", "change", () => { S.emb = Number($("emb-input").value); S.pos = 0; renderEmbeddings(); });
  on("emb-pos", "change", () => { S.pos = Number($("emb-pos").value); renderEmbeddings(); });
  on("pick-stack", "change", () => { S.stack = Number($("pick-stack").value); S.layer = 0; S.attn = 0; renderHead(); });
  on("pick-layer", "change", () => { S.layer = Number($("pick-layer").value); renderHead(); });
  on("pick-attn", "change", () => { S.attn = Number($("pick-attn").value); renderHead(); });
  on("pick-head", "change", () => { S.head = Number($("pick-head").value); renderHead(); });
  on("pick-query", "change", () => { S.query = Number($("pick-query").value); renderHead(); });
  on("sh-soft", "change", () => { S.shMode = "soft"; renderHead(); });
  on("pad-btn", "click", () => $("ask").requestSubmit());
  on("sh-hard", "change", () => { S.shMode = "hard"; renderHead(); });
  const beta = (id) => () => {
    const b = Number($(id).value);
    if (Number.isFinite(b) && b >= 0) { S.beta = Math.min(b, 50); renderHead(); }
  };
  on("sh-beta", "input", beta("sh-beta"));
  on("sh-beta-num", "input", beta("sh-beta-num"));
  on("hv-layer", "change", () => { S.hv = $("hv-layer").value; renderHeadView(); });
  on("res-token", "change", () => { S.resTok = Number($("res-token").value); S.anStack = null; renderResidual(); });
  on("an-norm", "change", () => { S.anNorm = Number($("an-norm").value); renderResidual(); });
  on("an-token", "change", () => { S.anTok = Number($("an-token").value); renderResidual(); });
  const lmTo = (k) => { S.lmStep = k; renderLM(trace().view, false); };
  on("lm-step", "input", () => lmTo(Number($("lm-step").value)));
  on("lm-prev", "click", () => lmTo(Math.max(0, S.lmStep - 1)));
  on("lm-next", "click", () => lmTo(Math.min(trace().view.steps.length - 1, S.lmStep + 1)));
  on("lm-temp", "input", () => renderLM(trace().view, false));
  on("lm-topk", "input", () => renderLM(trace().view, false));
  const s2sTo = (k) => { S.s2sStep = k; renderSeq2Seq(trace().view, false); };
  on("s2s-step", "input", () => s2sTo(Number($("s2s-step").value)));
  on("s2s-prev", "click", () => s2sTo(Math.max(1, S.s2sStep - 1)));
  on("s2s-next", "click", () => s2sTo(Math.min(trace().view.steps.length, S.s2sStep + 1)));
  on("ask", "submit", ask);
}

// Draw once the inline Korean font is ready (canvas text does not wait for a font).
async function start() {
  setLang(initialLang());
  initTour();
  wire();
  const fontReady = document.fonts ? document.fonts.load('12px "attnkit-ko"', "한글") : null;
  const later = new Promise((resolve) => setTimeout(resolve, 1500));
  await Promise.race([fontReady, later]).catch(() => null);
  try {
    if (!PAYLOAD.traces.length && PAYLOAD.api && PAYLOAD.api.error) renderRefused(PAYLOAD.api);
    else render();
  } catch (err) {
    showError(`the page could not draw this trace: ${err.message}`, `페이지가 이 기록(trace)을 그리지 못했습니다: ${err.message}`);
    document.body.dataset.ready = "error";
    throw err;
  }
}

start();
