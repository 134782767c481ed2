// attnkit explain, section 6: each family's own view (the FAMILIES table).
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

// ---------------------------------------------------------------------------- 6 family views
// What each family's page renders, one entry per family (a trace's "family"): section 6's
// title, how its panel (#fam-NAME in explain.html) is drawn, and what the served page's
// form asks of its run: pads (the pad-to form, /v1/explain's pad_to: the families of
// attnkit.app.explain.families.PADDED), target (a reference output: teacher forcing),
// beam (the beam width), steps (the tokens to generate), pairPlaceholder (the second
// text's hint). A new family is one entry here and its renderer below. ELMo's layer mix
// (#fam-elmo) is drawn for any view that has one (an ELMo classifier, a biLM).
const FAMILIES = {
  classifier: {
    title: "6 · Classifier: pooled vector and class probabilities · 분류",
    render: (v) => renderClassifier(v),
    pads: true,
  },
  lm: {
    title: "6 · GPT: the next token, one step at a time · 다음 토큰 예측",
    render: (v) => renderLM(v, true),
    steps: true,
  },
  seq2seq: {
    title: "6 · Decoding: the alignment at each step · 디코딩과 정렬",
    render: (v) => renderSeq2Seq(v, true),
    pads: true, target: true, beam: true,
  },
  mlm: {
    title: "6 · BERT: filling in [MASK] · 마스크드 언어 모델",
    render: (v) => renderMLM(v),
    pads: true,
  },
  bilm: {
    title: "6 · ELMo's biLM: both directions and the layer mix · 양방향 언어 모델",
    render: (v) => renderBiLM(v),
  },
  tag: {
    title: "6 · Tagging: a label for every word · 개체명 인식",
    render: (v) => renderTag(v),
    pads: true,
  },
  qa: {
    title: "6 · Question answering: the answer span · 질의응답",
    render: (v) => renderQA(v),
    pairPlaceholder: "context · 지문",
  },
};

// The FAMILIES entry of a family name (a trace's, or a refused page's), or null.
function familyView(name) {
  return Object.prototype.hasOwnProperty.call(FAMILIES, name) ? FAMILIES[name] : null;
}

function renderFamily() {
  const t = trace();
  const v = t.view || {};
  const fam = familyView(t.family);
  $("family-title").textContent = fam ? fam.title : "6 · Output";
  for (const f of Object.keys(FAMILIES)) $(`fam-${f}`).hidden = t.family !== f;
  $("fam-elmo").hidden = !v.elmo;
  if (fam) fam.render(v);
  if (v.elmo) renderELMo(v.elmo);
}

function renderTag(v) {
  $("tag-words").replaceChildren(...v.words.map((w) => el("span", {
    class: `chip${w.label !== "O" ? " ent" : ""}`, "data-label": w.label,
    title: w.position === null ? "cut off: labelled O" : `label of position ${w.position}`,
  }, el("span", { class: "t", text: showTok(w.word) }), el("small", { text: w.label }))));
  $("tag-entities").textContent = v.entities.length
    ? `entities: ${v.entities.map((e) => `${e.text} (${e.type})`).join(", ")}`
    : "entities: none";
  const P = mat(v.probabilities);
  const tokens = trace().inputs[0].tokens;
  const used = new Set(v.words.map((w) => w.position).filter((p) => p !== null));
  tableRows($("tag-table"), ["position", "token", "predicted", "probability", "runner-up"],
    v.predicted.map((label, i) => {
      const order = v.labels.map((_, c) => c).sort((a, b) => P.get(i, b) - P.get(i, a));
      const second = order[1] !== undefined ? `${v.labels[order[1]]} ${pct(P.get(i, order[1]))}` : "";
      return { cells: [String(i), showTok(tokens[i]), label, pct(P.get(i, order[0])), second],
        cls: used.has(i) ? "chosen" : null };
    }));
}

function renderQA(v) {
  const a = v.answer;
  $("qa-answer").textContent = `answer: "${a.text}" (score ${fmt(a.score)} = start logit + end logit)`;
  const ctx = v.context;
  $("qa-context").replaceChildren(el("span", { class: "prompt", text: ctx.slice(0, a.start) }),
    el("span", { class: "now", id: "qa-span", text: ctx.slice(a.start, a.end) }),
    el("span", { class: "prompt", text: ctx.slice(a.end) }));
  say($("qa-note"), `Question: "${v.question}". The model reads [CLS] question [SEP] context [SEP] (segments A and B)${v.windows > 1 ? `; the context is read in ${v.windows} windows, this is window ${v.window + 1}` : ""}. Start / end probability = softmax of the start / end logits over the positions; the answer is the span i ≤ j of context tokens with the largest start_logit[i] + end_logit[j] (tokens ${a.start_token}-${a.end_token}, outlined).`,
    `질문: "${v.question}". 모델은 [CLS] 질문 [SEP] 지문 [SEP]을 읽습니다(세그먼트 A와 B)${v.windows > 1 ? `; 지문은 ${v.windows}개의 창으로 나누어 읽으며, 이것은 ${v.window + 1}번째 창입니다` : ""}. 시작 / 끝 확률 = 위치에 대한 시작 / 끝 로짓의 소프트맥스. 정답은 start_logit[i] + end_logit[j]가 가장 큰 지문 토큰 구간 i ≤ j입니다(토큰 ${a.start_token}-${a.end_token}, 테두리 표시).`);
  const S0 = vec(v.start_probabilities);
  const E0 = vec(v.end_probabilities);
  const tokens = trace().inputs[0].tokens.map(showTok);
  const rows = ["start", "end"];
  const m = { rows: 2, cols: S0.length, get: (i, j) => (i ? E0[j] : S0[j]) };
  heatmap($("qa-map"), m, { rowLabels: rows, colLabels: tokens, scale: "seq", max: 1, text: true,
    strongCol: a.start_token, tip: (i, j) => `${rows[i]} at ${tokens[j]}: ${pct(m.get(i, j))}` });
  tableRows($("qa-table"), ["span", "characters", "score"], v.candidates.map((c, k) => ({
    cells: [c.text, `${c.start}-${c.end}`, fmt(c.score)], cls: k === 0 ? "chosen" : null })));
}

function renderClassifier(v) {
  const best = v.probabilities.indexOf(Math.max(...v.probabilities));
  $("cls-pred").textContent = `predicted: ${v.predicted} (${pct(v.probabilities[best])})`;
  bars($("cls-bars"), v.labels.map((label, i) => ({
    label, value: v.probabilities[i], text: pct(v.probabilities[i]), chosen: i === best,
  })));
  const logitsText = v.logits.map((x) => fmt(x)).join(", ");
  say($("cls-note"), `probabilities = softmax(logits / T), T = ${fmt(v.temperature, 3)}${v.temperature !== 1 ? " (the run's calibrated temperature)" : ""}; logits: ${logitsText}`,
    `확률 = softmax(로짓 / T), T = ${fmt(v.temperature, 3)}${v.temperature !== 1 ? " (모델의 보정된 온도)" : ""}; 로짓: ${logitsText}`);
  const pooled = v.pooled ? arr(v.pooled) : null;
  $("pool-box").hidden = !pooled;
  const how = { mean: "the mean of the last layer's token vectors", max: "the max over tokens", cls: "the [CLS] token's last-layer vector", last: "the last token's vector", pooler: "BERT's pooler: tanh(W h_[CLS] + b)", "n-grams": "a bag of n-grams (no vector)" };
  const howKo = { mean: "마지막 층 토큰 벡터들의 평균", max: "토큰들에 대한 최댓값", cls: "[CLS] 토큰의 마지막 층 벡터", last: "마지막 토큰의 벡터", pooler: "BERT의 풀러: tanh(W h_[CLS] + b)", "n-grams": "n-gram 가방(벡터 없음)" };
  say($("pool-note"), `pooling: ${v.pooling} — ${how[v.pooling] || v.pooling}${pooled ? `; ${pooled.shape[0]} numbers, what the linear head nn.Linear(d, ${v.labels.length}) reads` : ""}.`,
    `풀링: ${v.pooling} — ${howKo[v.pooling] || v.pooling}${pooled ? `; 선형 분류 헤드 nn.Linear(d, ${v.labels.length})가 읽는 ${pooled.shape[0]}개의 수` : ""}.`);
  if (pooled) {
    const n = pooled.shape[0];
    heatmap($("pool-map"), mat(v.pooled), { cellH: 24, minCell: 3, tip: (_, j) => `dim ${j}: ${fmt(pooled.values[j])}` });
    $("pool-map").dataset.length = n;
  }
}

// next-token bars at the page's temperature and top-k. Exact: at the trace's own settings
// (the distribution the token was drawn from), at temperature 1 and top-k 0 (the model's
// softmax), at temperature 0, and otherwise when the trace stores every logit (a small
// vocabulary) or top-k keeps only stored tokens; else renormalised over the stored top-N.
// The ids the sampler never draws (view.banned: [PAD] ...) are left out, as it does.
function lmDistribution(step, temp, topk, v) {
  const top = step.top;
  if (temp === v.temperature && topk === v.top_k) {
    return { probs: top.map((c) => c.filtered), exact: true };
  }
  if (temp === 1 && topk === 0) return { probs: top.map((c) => c.probability), exact: true };
  const d = step.distribution;
  const logits = d ? Array.from(arr(d.logits).values) : top.map((c) => c.logit);
  const ids = d ? d.ids || logits.map((_, i) => i) : top.map((c) => c.id);
  const complete = !!(d && d.complete);
  const banned = new Set(v.banned || []);
  const n = logits.length;
  let z = logits.map((x, i) => (banned.has(ids[i]) ? -Infinity : x));
  if (temp === 0) {
    const best = z.indexOf(Math.max(...z));
    return { probs: top.map((c) => (c.id === ids[best] ? 1 : 0)), exact: true };
  }
  z = z.map((x) => x / temp);
  if (topk > 0 && topk < n) {
    const kth = [...z].sort((a, b) => b - a)[topk - 1];
    z = z.map((x) => (x < kth ? -Infinity : x));
  }
  const mx = Math.max(...z);
  const e = z.map((x) => (Number.isFinite(x) ? Math.exp(x - mx) : 0));
  const s = e.reduce((a, b) => a + b, 0);
  const at = new Map(ids.map((id, i) => [id, i]));
  return {
    probs: top.map((c) => (at.has(c.id) ? e[at.get(c.id)] / s : 0)),
    exact: complete || (topk > 0 && topk <= n),
    stored: n,
    mass: d ? d.mass : top.reduce((a, c) => a + c.probability, 0),
  };
}

function renderLM(v, fresh) {
  const steps = v.steps || [];
  const slider = $("lm-step");
  slider.max = String(Math.max(0, steps.length - 1));
  if (fresh) {
    S.lmStep = Math.min(S.lmStep, Math.max(0, steps.length - 1));
    $("lm-temp").value = String(v.temperature);
    $("lm-topk").value = String(v.top_k);
  }
  slider.value = String(S.lmStep);
  $("lm-prev").disabled = S.lmStep <= 0;
  $("lm-next").disabled = S.lmStep >= steps.length - 1;
  const input = trace().inputs[0];
  const box = $("lm-text");
  box.replaceChildren();
  if (!steps.length) {
    $("lm-step-label").textContent = "no tokens were generated";
    return;
  }
  const step = steps[S.lmStep];
  $("lm-step-label").textContent = `step ${S.lmStep + 1} of ${steps.length}: predicting position ${step.position + 1} from tokens 0-${step.position}`;
  const p = v.prompt_length;
  input.tokens.slice(0, p).forEach((t) => box.append(el("span", { class: "prompt", text: t })));
  v.generated.slice(0, S.lmStep).forEach((t) => box.append(el("span", { class: "gen", text: t })));
  box.append(el("span", { class: "now", id: "lm-chosen", text: step.chosen.token }));
  const temp = Number($("lm-temp").value);
  const topk = Math.max(0, Math.floor(Number($("lm-topk").value) || 0));
  const { probs, exact, stored, mass } = lmDistribution(step, temp, topk, v);
  const seedText = v.seed !== null && v.seed !== undefined ? `, seed ${v.seed}` : "";
  say($("lm-note"), `${exact ? "" : `Renormalised over the ${stored} most likely tokens this trace stores (they hold ${pct(mass)} at temperature 1): approximate. `}softmax(logits / temperature)${topk ? `, only the ${topk} best kept (top-k)` : ""}${temp === 0 ? "; temperature 0 = greedy: the most likely token" : ""}. Entropy at temperature 1: ${fmt(step.entropy)} nats. Generated with temperature ${v.temperature}, top-k ${v.top_k || "off"}${seedText}.`,
    `${exact ? "" : `이 기록이 저장한 가장 가능성 높은 ${stored}개 토큰(온도 1에서 확률의 ${pct(mass)})만으로 다시 정규화한 근삿값입니다. `}softmax(로짓 / 온도)${topk ? `, 상위 ${topk}개만 남김(top-k)` : ""}${temp === 0 ? "; 온도 0 = 탐욕적 선택: 가장 가능성 높은 토큰" : ""}. 온도 1에서의 엔트로피: ${fmt(step.entropy)} nats. 생성 설정: 온도 ${v.temperature}, top-k ${v.top_k || "끔"}${seedText}.`);
  const best = Math.max(...probs, 1e-9);
  bars($("lm-bars"), step.top.map((c, i) => ({
    label: showTok(c.token), value: probs[i] / best, text: pct(probs[i]),
    chosen: c.id === step.chosen.id, cut: probs[i] === 0,
  })));
  // the head panel follows: its query row is the position that made this prediction
  const si = stacks().findIndex((s) => s.input === input.name);
  if (si >= 0) {
    if (S.stack !== si) Object.assign(S, { stack: si, layer: 0, attn: 0 });
    S.query = step.position;
    renderHead();
  }
}

function renderSeq2Seq(v, fresh) {
  const steps = v.steps || [];
  const n = Math.max(1, steps.length);
  const slider = $("s2s-step");
  slider.max = String(n);
  if (fresh) S.s2sStep = Math.min(Math.max(1, S.s2sStep), n);
  slider.value = String(S.s2sStep);
  $("s2s-prev").disabled = S.s2sStep <= 1;
  $("s2s-next").disabled = S.s2sStep >= n;
  $("s2s-output").textContent = `output (${v.search}${v.search === "beam" ? ` ${v.beam}` : ""}): ${v.output_text}`;
  const source = trace().inputs.find((i) => i.name === "source") || trace().inputs[0];
  const step = steps[S.s2sStep - 1];
  // a decoder row: "input ⇒ predicted output", as section 3 labels the decoder's queries
  const rowsAll = rowLabelsOf("target", Math.max(steps.length, v.output_tokens.length));
  $("s2s-step-label").textContent = step ? `step ${step.step} of ${steps.length}: ${rowsAll[S.s2sStep - 1]}` : "";
  $("s2s-step-label").dataset.row = step ? rowsAll[S.s2sStep - 1] : "";
  const sc = v.score ? `; score function ${v.score.name}: ${v.score.formula}` : "";
  const how = v.alignment ? ["Transformer: the last layer's cross-attention, mean over heads; LSTM: α_t", "트랜스포머: 마지막 층의 인코더-디코더 어텐션, 헤드 평균; LSTM: α_t"] : ["no attention", "어텐션 없음"];
  say($("s2s-note"),
    `Rows: the decoder's steps (input ⇒ predicted output), columns: source tokens; row t is where the decoder looked while producing token t (${how[0]})${sc}. The current step is outlined; click a row to choose it.`,
    `행: 디코더의 단계(입력 ⇒ 예측한 출력), 열: 입력 문장의 토큰. t번째 행은 디코더가 t번째 토큰을 만들 때 어디를 보았는지입니다(${how[1]})${sc}. 현재 단계에 테두리가 있고, 행을 누르면 그 단계로 갑니다.`);
  if (v.alignment) {
    const A = mat(v.alignment);
    const rows = rowsAll.slice(0, A.rows);
    const cols = Array.from({ length: A.cols }, (_, j) => showTok(source.tokens[j] ?? `#${j}`));
    heatmap($("s2s-align"), A, { rowLabels: rows, colLabels: cols, scale: "seq", text: true, strongRow: S.s2sStep - 1,
      axes: [["decoder steps: input ⇒ predicted output", "디코더 단계: 입력 ⇒ 예측한 출력"], ["source tokens (encoder)", "입력 토큰(인코더)"]],
      tip: (i, j) => `${rows[i]} ← ${cols[j]}: ${fmt(A.get(i, j))}`, pick: (i) => { S.s2sStep = i + 1; renderSeq2Seq(v, false); } });
  }
  $("s2s-align").hidden = !v.alignment;
  if (step) {
    bars($("s2s-bars"), step.top.map((c) => ({
      label: showTok(c.token), value: c.probability, text: pct(c.probability), chosen: c.id === step.chosen.id,
    })));
  } else $("s2s-bars").replaceChildren();
  renderTeacherForcing(v);
  // the head panel follows: the decoder's cross-attention, query = the step's input row
  {
    const si = stacks().findIndex((s) => s.name === "decoder");
    if (si >= 0) {
      const layer = stacks()[si].layers[S.stack === si ? S.layer : stacks()[si].layers.length - 1];
      const ai = layer.attention.findIndex((a) => a.role === "cross");
      Object.assign(S, { stack: si, layer: layer.index, attn: ai >= 0 ? ai : 0, query: S.s2sStep - 1 });
      renderHead();
    }
  }
}

// Teacher forcing: the decoder's input at training time (the reference shifted right) beside
// its input at inference (its own previous output), and P(reference token) under each.
function renderTeacherForcing(v) {
  const tf = v.teacher_forcing;
  const ratioText = (r) => (r === null || r === undefined ? "" : r >= 1
    ? [` This run was trained with training.teacher_forcing_ratio = ${r}: every training step fed the gold previous token.`,
      ` 이 모델은 training.teacher_forcing_ratio = ${r}로 학습했습니다: 훈련의 모든 단계에서 정답의 이전 토큰을 넣었습니다.`]
    : [` This run was trained with training.teacher_forcing_ratio = ${r}: at each step the gold previous token was fed with probability ${r}, else the model's own prediction (scheduled sampling), a step towards what inference does.`,
      ` 이 모델은 training.teacher_forcing_ratio = ${r}로 학습했습니다: 각 단계에서 확률 ${r}로 정답의 이전 토큰을, 아니면 모델 자신의 예측을 넣었습니다(scheduled sampling). 추론 때의 상황에 한 걸음 가까운 방식입니다.`]);
  const general = ["Teacher forcing: in training the decoder reads the reference shifted right, [BOS] y1 … y(t−1), and is asked for y_t at every step (all steps at once, in parallel in a Transformer); at inference there is no reference, so it reads its own previous output, and one early mistake is fed back into every later step (exposure bias). training.teacher_forcing_ratio (the seq2seq recipes, e.g. multi30k-lstm: 1.0) is the probability of feeding the gold token during training; below 1 (LSTM runs only) the model's own prediction is fed instead, sometimes.",
    "교사 강요(teacher forcing): 훈련 때 디코더는 정답을 오른쪽으로 한 칸 민 [BOS] y1 … y(t−1)을 입력으로 읽고, 매 단계 y_t를 맞히도록 학습합니다(트랜스포머에서는 모든 단계를 한 번에 병렬로). 추론 때에는 정답이 없으므로 자신의 직전 출력을 읽고, 초반의 실수 하나가 이후 모든 단계에 다시 들어갑니다(노출 편향, exposure bias). training.teacher_forcing_ratio(seq2seq 레시피, 예: multi30k-lstm: 1.0)는 훈련 중 정답 토큰을 넣을 확률입니다. 1보다 작으면(LSTM 모델만) 가끔 모델 자신의 예측을 대신 넣습니다."];
  const box = $("teacher-forcing");
  if (!tf) {
    say($("tf-note"), `${general[0]} Give a reference target to compare the two: attnkit explain RUN SOURCE --target "REFERENCE" (attnkit.explain(run, source, target=...)).`,
      `${general[1]} 둘을 비교하려면 정답 문장을 주세요: attnkit explain RUN SOURCE --target "정답" (attnkit.explain(run, source, target=...)).`);
    $("tf-summary").textContent = "";
    $("tf-table").replaceChildren();
    box.dataset.reference = "";
    return;
  }
  const r = ratioText(tf.ratio);
  say($("tf-note"), `${general[0]}${r ? r[0] : ""}`, `${general[1]}${r ? r[1] : ""}`);
  const matched = tf.steps.filter((s) => s.free && s.free.id === s.reference.id).length;
  $("tf-summary").replaceChildren(tr(
    `reference: ${tf.reference.map(showTok).join(" ")}${tf.truncated ? " (cut to the run's max_len)" : ""} · loss under teacher forcing ${fmt(tf.loss)} nats · free decoding agrees with the reference at ${matched} of ${tf.steps.length} steps`,
    `정답: ${tf.reference.map(showTok).join(" ")}${tf.truncated ? " (max_len으로 잘림)" : ""} · 교사 강요 손실 ${fmt(tf.loss)} nats · 자유 디코딩이 정답과 같은 단계: ${tf.steps.length}개 중 ${matched}개`));
  box.dataset.reference = tf.reference.join(" ");
  const head = ["step", "training input", "reference y_t", "P(y_t) forced", "inference input", "chosen", "P(chosen)", "P(y_t) free"];
  const rows = tf.steps.map((s) => ({
    cells: [String(s.step), showTok(s.input_train.token), showTok(s.reference.token), pct(s.reference.probability),
      s.input_free ? showTok(s.input_free.token) : "—", s.free ? showTok(s.free.token) : "—",
      s.free ? pct(s.free.probability) : "—", s.free_reference_probability === null ? "—" : pct(s.free_reference_probability)],
    cls: s.step === S.s2sStep ? "chosen" : (s.free && s.free.id !== s.reference.id ? "differs" : null),
  }));
  tableRows($("tf-table"), head, rows);
  const ko = ["단계", "훈련 때 입력", "정답 y_t", "교사 강요 P(y_t)", "추론 때 입력", "선택", "P(선택)", "추론 때 P(y_t)"];
  const tips = [["", ""], ["the reference shifted right: [BOS] y1 … y(t−1)", "오른쪽으로 한 칸 민 정답: [BOS] y1 … y(t−1)"], ["", ""],
    ["P(y_t | source, [BOS] y1 … y(t−1)): the decoder fed the reference", "정답을 입력한 디코더의 P(y_t)"],
    ["the model's own previous output ([BOS] first)", "모델 자신의 직전 출력(처음에는 [BOS])"], ["what free decoding chose", "자유 디코딩이 고른 토큰"], ["", ""],
    ["P(y_t) when the decoder reads its own previous outputs", "디코더가 자신의 직전 출력을 읽을 때의 P(y_t)"]];
  $("tf-table").querySelectorAll("thead th").forEach((th, k) => {
    th.replaceChildren(tr(head[k], ko[k]));
    th.title = tips[k][0] ? `${tips[k][0]} · ${tips[k][1]}` : "";
  });
}

function renderMLM(v) {
  const box = $("mlm-masks");
  const input = trace().inputs[0];
  const tokens = input.tokens;
  box.replaceChildren(...(v.masks || []).map((m, k) => {
    const context = tokens.map((t, i) => (i === m.position ? `[${showTok(t)}]` : showTok(t))).join(" ");
    const bx = el("div", { class: "bars" });
    const best = m.top.length ? m.top[0].probability : 1;
    bars(bx, m.top.map((c, i) => ({ label: showTok(c.token), value: c.probability / best, text: pct(c.probability), chosen: i === 0 })));
    return el("div", { class: "mask-box", "data-position": m.position },
      el("h3", { text: `[MASK] ${k + 1} at position ${m.position}` }), el("p", { class: "note", text: context }), bx);
  }));
  if (!(v.masks || []).length) {
    box.append(el("p", { class: "note" }, tr("The text has no [MASK] token: write [MASK] where BERT should fill in a word.",
      "문장에 [MASK] 토큰이 없습니다. BERT가 단어를 채울 자리에 [MASK]를 쓰세요.")));
  }
  renderNSP(v, input);
}

// Next sentence prediction: [CLS] A [SEP] B [SEP], segments 0 / 1, and the NSP head's
// IsNext / NotNext (a bert-pretrain run given a pair).
function renderNSP(v, input) {
  const nsp = v.nsp;
  const box = $("nsp");
  box.dataset.available = nsp ? String(!!nsp.available) : "";
  if (!nsp) {
    say($("nsp-note"), "Next sentence prediction (BERT pretraining): give a second sentence to see how likely it is to follow the first: attnkit explain RUN \"A\" --pair \"B\" (a bert-pretrain run).",
      "다음 문장 예측(BERT 사전 훈련): 두 번째 문장을 주면 그 문장이 첫 문장 다음에 올 확률을 봅니다: attnkit explain RUN \"A\" --pair \"B\" (bert-pretrain 모델).");
    $("nsp-pair").replaceChildren();
    $("nsp-bars").replaceChildren();
    return;
  }
  const seg = input.segments || [];
  $("nsp-pair").replaceChildren(...input.tokens.map((t, i) => el("span", {
    class: `chip${seg[i] ? " seg1" : ""}`, "data-segment": String(seg[i] ?? 0), title: `segment ${seg[i] ?? 0}`,
  }, el("span", { class: "t", text: showTok(t) }), el("small", { text: seg[i] ? "B" : "A" }))));
  const how = ["The input is [CLS] A [SEP] B [SEP]: segment embedding A (0) for [CLS], A and the first [SEP], B (1) for the rest, as the run's NSP pairs were built. ",
    "입력은 [CLS] A [SEP] B [SEP]입니다: [CLS], A, 첫 [SEP]에는 세그먼트 임베딩 A(0), 나머지에는 B(1)를 더합니다. 사전 훈련의 NSP 쌍과 같은 방식입니다. "];
  if (!nsp.available) {
    say($("nsp-note"), `${how[0]}This run has no NSP head (model.arch bert-mlm learns the masked LM only, as RoBERTa): there is no IsNext probability to show; train model.arch bert-pretraining for it.`,
      `${how[1]}이 모델에는 NSP 헤드가 없습니다(model.arch bert-mlm은 RoBERTa처럼 마스크드 언어 모델만 학습합니다). 보여 줄 IsNext 확률이 없으니, model.arch bert-pretraining으로 학습하세요.`);
    $("nsp-bars").replaceChildren();
    return;
  }
  say($("nsp-note"), `${how[0]}The NSP head reads the pooled [CLS] vector, tanh(W_p h_[CLS] + b_p), and a linear layer gives two logits (${nsp.logits.map((x) => fmt(x)).join(", ")}); their softmax is P(IsNext), B follows A, and P(NotNext), B is a random sentence. In pretraining half the pairs were real next sentences.`,
    `${how[1]}NSP 헤드는 풀링된 [CLS] 벡터 tanh(W_p h_[CLS] + b_p)를 읽고, 선형 층이 로짓 두 개(${nsp.logits.map((x) => fmt(x)).join(", ")})를 냅니다. 그 소프트맥스가 P(IsNext, B가 A 다음 문장)와 P(NotNext, B가 무작위 문장)입니다. 사전 훈련에서는 쌍의 절반이 실제 다음 문장이었습니다.`);
  const best = nsp.is_next >= nsp.not_next;
  bars($("nsp-bars"), [
    { label: "IsNext", value: nsp.is_next, text: pct(nsp.is_next), chosen: best },
    { label: "NotNext", value: nsp.not_next, text: pct(nsp.not_next), chosen: !best },
  ]);
}

function renderBiLM(v) {
  const tokens = trace().inputs[0].tokens;
  const top = (list, i) => {
    const row = (list || []).find((r) => r.position === i);
    if (!row || !row.top.length) return "";
    return row.top.slice(0, 3).map((c) => `${showTok(c.token)} ${pct(c.probability)}`).join(", ");
  };
  tableRows($("bilm-table"), ["position", "token", "forward LM: next token", "backward LM: previous token"],
    tokens.map((t, i) => ({ cells: [String(i), showTok(t), top(v.forward, i), top(v.backward, i)] })));
}

function renderELMo(m) {
  $("elmo-gamma").textContent = `γ = ${fmt(m.gamma, 4)}`;
  const T = arr(m.contributions).shape[1];
  const tokens = tokensOf(trace().inputs[0].name, T);
  const L = m.scalars.length;
  const name = (j) => (j === 0 ? "layer 0 (token layer)" : `layer ${j} (biLSTM)`);
  const C = mat(m.contributions);
  const N = mat(m.layer_norms);
  const tok = Math.min(S.pos, T - 1);
  tableRows($("elmo-table"), ["layer j", "s_j", "softmax(s)_j", `‖h_j‖ "${tokens[tok]}"`, `‖γ softmax(s)_j h_j‖ "${tokens[tok]}"`],
    Array.from({ length: L }, (_, j) => ({ cells: [name(j), fmt(m.scalars[j], 4), fmt(m.weights[j], 4), fmt(N.get(j, tok)), fmt(C.get(j, tok))] })));
  heatmap($("elmo-map"), C, { rowLabels: Array.from({ length: L }, (_, j) => name(j)), colLabels: tokens, scale: "seq", text: true, strongCol: tok,
    tip: (j, i) => `${name(j)} · ${tokens[i]}: ${fmt(C.get(j, i))}`, pick: (_, i) => { S.pos = i; renderELMo(m); } });
}
