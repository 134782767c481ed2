// attnkit explain, sections 3-4: one attention head step by step (masks, soft /
// hard attention, the score functions), then every head at once.
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

// ---------------------------------------------------------------------------- 3 one head
function setupHeadPickers() {
  const ss = stacks();
  S.stack = Number(fillSelect($("pick-stack"), ss.map((s, i) => [i, `${s.name} (${s.kind})`]), S.stack));
  const stack = ss[S.stack];
  if (!stack) return;
  S.layer = Number(fillSelect($("pick-layer"), stack.layers.map((l, i) => [i, `layer ${l.index}`]), S.layer));
  const layer = stack.layers[S.layer];
  S.attn = Number(fillSelect($("pick-attn"), layer.attention.map((a, i) => [i, ROLE[a.role] || a.role]), S.attn));
  const a = layer.attention[S.attn];
  if (!a) return;
  S.head = Number(fillSelect($("pick-head"), Array.from({ length: a.num_heads }, (_, h) => [h, `head ${h}`]), S.head));
  const Tq = arr(a.weights).shape[1];
  const q = rowLabelsOf(a.query, Tq);
  S.query = Number(fillSelect($("pick-query"), q.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.query, Tq - 1)));
}

function renderHead() {
  const any = hasAttention();
  $("no-attention").hidden = any;
  $("head-steps").hidden = !any;
  $("head-pickers").hidden = !any;
  renderScoreFunctions();
  if (!any) return;
  setupHeadPickers();
  const a = attention();
  if (!a) return;
  const h = S.head;
  const W = mat(a.weights, h);
  const Tq = W.rows;
  const Tk = W.cols;
  const qt = rowLabelsOf(a.query, Tq);
  const kt = tokensOf(a.key, Tk);
  const qi = S.query;
  const M = mat(a.mask.array);
  const masked = (i, j) => !M.get(i, j);
  const lstm = stacks()[S.stack].kind === "lstm";
  $("query-name").textContent = `"${qt[qi]}" (position ${qi})`;
  // a. Q, K, V
  const qkv = $("qkv-maps");
  const small = { maxWidth: 300, cellH: Math.max(4, Math.min(16, Math.floor(320 / Math.max(Tq, Tk)))) };
  if (a.q) {
    if (lstm) {
      say($("qkv-note"), "The decoder state s_t is the query; the encoder outputs h_i are the keys and the values (rows: tokens, columns: dimensions).",
        "디코더의 은닉 상태 s_t가 쿼리이고, 인코더의 출력 h_i가 키이자 밸류입니다(행: 토큰, 열: 차원).");
    } else {
      say($("qkv-note"), `Q = X W^Q, K = X W^K, V = X W^V, split into ${a.num_heads} heads of d_k = ${a.d_head}; shown: head ${h} (rows: tokens, columns: its dimensions).`,
        `Q = X W^Q, K = X W^K, V = X W^V를 d_k = ${a.d_head}인 헤드 ${a.num_heads}개로 나눕니다. 보이는 것은 헤드 ${h}입니다(행: 토큰, 열: 그 헤드의 차원).`);
    }
    const caps = lstm ? ["s_t (decoder states: queries)", "h_i (encoder outputs: keys)", "h_i (encoder outputs: values)"]
      : ["Q (queries)", "K (keys)", "V (values)"];
    qkv.replaceChildren(...[[caps[0], a.q, qt, qi], [caps[1], a.k, kt], [caps[2], a.v, kt]].map(([cap, x, labels, strong]) => {
      const c = el("canvas", { "data-map": cap });
      const m = mat(x, h);
      heatmap(c, m, { ...small, rowLabels: labels, strongRow: strong, tip: (i, j) => `${labels[i]} · dim ${j}: ${fmt(m.get(i, j))}` });
      return figure(cap, c);
    }));
  } else {
    if (lstm) {
      say($("qkv-note"), "The decoder state s_t is the query; the encoder outputs h_i are the keys and the values. Shown: their lengths (norms).",
        "디코더의 은닉 상태 s_t가 쿼리이고, 인코더의 출력 h_i가 키이자 밸류입니다. 보이는 것은 각 벡터의 길이(노름)입니다.");
    } else {
      say($("qkv-note"), `Q = X W^Q, K = X W^K, V = X W^V, split into ${a.num_heads} heads of d_k = ${a.d_head}. This trace keeps each vector's length (norm) only (a large model: the full matrices would make the page too big).`,
        `Q = X W^Q, K = X W^K, V = X W^V를 d_k = ${a.d_head}인 헤드 ${a.num_heads}개로 나눕니다. 이 트레이스에는 각 벡터의 길이(노름)만 저장되어 있습니다(큰 모델: 행렬 전체를 담으면 페이지가 너무 커집니다).`);
    }
    const norms = [["‖q‖", a.q_norms, qt, Tq], ["‖k‖", a.k_norms, kt, Tk], ["‖v‖", a.v_norms, kt, Tk]];
    qkv.replaceChildren(...norms.map(([cap, x, labels, n]) => {
      const c = el("canvas", { "data-map": cap });
      const v = vec(x, h);
      heatmap(c, { rows: n, cols: 1, get: (i) => v[i] }, { rowLabels: labels, scale: "seq", cell: 40, cellH: small.cellH, maxWidth: 200, text: true,
        tip: (i) => `${labels[i]}: ${fmt(v[i])}` });
      return figure(cap, c);
    }));
  }
  // b. scores, c. mask, d. weights
  const score = a.score || {};
  const scale = score.scale ? `  (1/√d_k = ${fmt(score.scale, 4)})` : "";
  $("formula").textContent = `${score.name || "score"}: ${score.formula || ""}${scale}`;
  // scores are dropped beyond a stack's first layer when the page would be too big
  const Sc = a.scores ? mat(a.scores, h) : null;
  $("scores-note").hidden = !!Sc;
  if (Sc) $("scores-note").replaceChildren();
  else {
    say($("scores-note"), "The scores of this layer are not stored (the page would be over its size budget: see the notes above); pick layer 0, the first of its stack, to see a layer's scores.",
      "이 층의 어텐션 스코어는 저장되지 않았습니다(페이지가 크기 한도를 넘기 때문입니다: 위의 안내 참고). 스코어를 보려면 스택의 첫 층인 layer 0을 고르세요.");
  }
  $("scores-map").hidden = !Sc;
  const pick = (i) => { S.query = i; renderHead(); };
  const tip = (name, m) => (i, j) => `${qt[i]} → ${kt[j]}\n${name} ${fmt(m.get(i, j), 4)}${masked(i, j) ? " (masked)" : ""}`;
  const common = { rowLabels: qt, colLabels: kt, strongRow: qi, text: true, pick };
  if (Sc) heatmap($("scores-map"), Sc, { ...common, scale: "div", masked, tip: tip("score", Sc) });
  maskNote(a, Tk);
  renderPadForm();
  heatmap($("mask-map"), M, { ...common, scale: "mask", text: "mask", tip: (i, j) => `${qt[i]} → ${kt[j]}: ${M.get(i, j) ? "may attend" : "masked"}` });
  heatmap($("weights-map"), W, { ...common, scale: "seq", tip: tip("weight", W) });
  // d'. soft or hard attention at β: the weights the weighted sum below uses
  const sh = softHard(a, h, qi);
  renderSoftHard(a, sh, kt, qt[qi]);
  const A = sh.weights;
  const own = sh.own;
  // e. the weighted sum for the chosen query
  const V = a.v ? mat(a.v, h) : null;
  const dims = V ? Math.min(6, V.cols) : 0;
  const vn = vec(a.v_norms, h);
  const head = ["key", "score", "mask", "weight α"];
  if (!own) head.push("model's α");
  head.push("‖v‖", "α·‖v‖");
  for (let d = 0; d < dims; d++) head.push(`α·v[${d}]`);
  const rows = kt.map((k, j) => {
    const w = A[j];
    const cells = [k, Sc ? fmt(Sc.get(qi, j)) : "—", masked(qi, j) ? "✗" : "✓", fmt(w)];
    if (!own) cells.push(fmt(W.get(qi, j)));
    cells.push(fmt(vn[j]), fmt(w * vn[j]));
    for (let d = 0; d < dims; d++) cells.push(fmt(w * V.get(j, d)));
    return { cells, cls: masked(qi, j) ? "masked" : null };
  });
  const sumW = A.reduce((s, w) => s + w, 0);
  const outNorm = vec(a.head_out_norms, h)[qi];
  let mixed = null; // ‖Σ a_j v_j‖ over every dimension, when V is stored
  if (V) {
    const total = Array(head.length - dims).fill("");
    total[0] = "= Σ α_j v_j";
    total[3] = fmt(sumW);
    for (let d = 0; d < dims; d++) total.push(fmt(kt.reduce((s, _, j) => s + A[j] * V.get(j, d), 0)));
    rows.push({ cells: total, cls: "chosen" });
    if (a.head_out) {
      const O = mat(a.head_out, h);
      const got = Array(head.length - dims).fill("");
      got[0] = "head output (captured)";
      for (let d = 0; d < dims; d++) got.push(fmt(O.get(qi, d)));
      rows.push({ cells: got });
    }
    let sq = 0;
    for (let d = 0; d < V.cols; d++) {
      const x = kt.reduce((s, _, j) => s + A[j] * V.get(j, d), 0);
      sq += x * x;
    }
    mixed = Math.sqrt(sq);
  } else {
    const total = Array(head.length).fill("");
    total[0] = "Σ";
    total[3] = fmt(sumW);
    total[head.length - 1] = fmt(A.reduce((s, w, j) => s + w * vn[j], 0));
    rows.push({ cells: total, cls: "chosen" });
  }
  tableRows($("query-table"), head, rows);
  if (lstm) {
    say($("sum-formula"), "c_t = Σ_i α_t,i h_i: the context vector, the encoder outputs weighted by the attention distribution",
      "c_t = Σ_i α_t,i h_i: 컨텍스트 벡터, 어텐션 분포로 가중합한 인코더 출력(어텐션 값)");
  } else {
    say($("sum-formula"), "attention value = Σ_j α_j v_j (softmax(QK^T/√d_k) V, one row): the values weighted by the attention distribution",
      "어텐션 값 = Σ_j α_j v_j (softmax(QK^T/√d_k) V의 한 행): 어텐션 분포로 가중합한 밸류");
  }
  const out = a.output_norms ? `; after concatenating the ${a.num_heads} heads and W^O: ‖output‖ = ${fmt(vec(a.output_norms)[qi])}` : "";
  const outKo = a.output_norms ? `; 헤드 ${a.num_heads}개를 이어 붙이고 W^O를 곱한 뒤: ‖output‖ = ${fmt(vec(a.output_norms)[qi])}` : "";
  let en = `‖head ${h} output‖ = ${fmt(outNorm)} for "${qt[qi]}"${out}`;
  let ko = `"${qt[qi]}"에 대한 ‖헤드 ${h} 출력‖ = ${fmt(outNorm)}${outKo}`;
  if (!own) {
    const what = sh.mode === "hard" ? "hard attention" : `soft attention at β = ${fmt(sh.beta, 2)}`;
    const whatKo = sh.mode === "hard" ? "하드 어텐션" : `β = ${fmt(sh.beta, 2)}인 소프트 어텐션`;
    if (mixed !== null) {
      en += `. With ${what} instead: ‖Σ α_j v_j‖ = ${fmt(mixed)}`;
      ko += `. ${whatKo}이라면: ‖Σ α_j v_j‖ = ${fmt(mixed)}`;
    } else if (sh.mode === "hard" && sh.argmax !== null) {
      en += `. With hard attention the output is the value of "${kt[sh.argmax]}" alone: ‖v‖ = ${fmt(vn[sh.argmax])}`;
      ko += `. 하드 어텐션이라면 출력은 "${kt[sh.argmax]}"의 밸류 그 자체입니다: ‖v‖ = ${fmt(vn[sh.argmax])}`;
    } else {
      en += `. With ${what} instead: ‖Σ α_j v_j‖ ≤ Σ α_j ‖v_j‖ = ${fmt(A.reduce((s, w, j) => s + w * vn[j], 0))} (only the norms of V are stored)`;
      ko += `. ${whatKo}이라면: ‖Σ α_j v_j‖ ≤ Σ α_j ‖v_j‖ = ${fmt(A.reduce((s, w, j) => s + w * vn[j], 0))} (V는 노름만 저장되어 있습니다)`;
    }
  }
  say($("head-out"), en, ko);
  const d = trace().dropout || {};
  say($("dropout-note"), `dropout: off at inference (eval mode)${d.p ? `; during training p = ${d.p} of these weights were zeroed` : ""}.`,
    `드롭아웃: 추론(평가 모드)에서는 꺼져 있습니다${d.p ? `; 학습 때는 이 가중치의 p = ${d.p}가 0이 되었습니다` : ""}.`);
  markThumb();
}

// The note of step c: which mask, and what it hides. Padding (Input.padded: the [PAD]
// tokens added to fill a batch, pad_to) is hidden; a [PAD] typed in the text is not
// padding: the mask comes from each text's length in its batch (pad_batch), not from the
// token's id, so the model reads it like any other token (✓, a weight), as the marks show.
function maskNote(a, Tk) {
  const kinds = a.mask.kinds || [];
  const input = inputNamed(a.key);
  const padded = Math.min(Tk, input.padded || 0);
  const start = Tk - padded;
  const typed = [];
  if (input.pad_id !== undefined && input.pad_id !== null) {
    for (let j = 0; j < start; j++) if (input.ids[j] === input.pad_id) typed.push(j);
  }
  const en = [];
  const ko = [];
  const span = padded === 1 ? `position ${start}` : `positions ${start}-${Tk - 1}`;
  const spanKo = padded === 1 ? `위치 ${start}` : `위치 ${start}-${Tk - 1}`;
  if (padded) {
    en.push(`padding mask: the last ${padded} keys (${span}) are [PAD] tokens added to fill the batch to ${Tk} tokens (pad_to): they are hidden from every query (✗), their weights are exactly 0, and the output is the unpadded text's`);
    ko.push(`패딩 마스크: 마지막 키 ${padded}개(${spanKo})는 배치를 ${Tk} 토큰으로 맞추려고 덧붙인 [PAD]입니다(pad_to). 모든 쿼리에게서 가려지고(✗) 어텐션 가중치는 정확히 0이며, 출력은 패딩 없는 문장과 같습니다`);
  } else if (kinds.includes("padding")) {
    en.push("padding mask: this text is read alone, so nothing is padded and every key is visible; padding appears when texts of different lengths share a batch: attnkit explain RUN TEXT --pad-to N (Python: pad_to=N) pads this one to N tokens as in such a batch");
    ko.push("패딩 마스크: 이 문장은 혼자 읽히므로 패딩이 없고 모든 키가 보입니다. 길이가 다른 문장들이 한 배치에 들어갈 때 패딩이 생깁니다. attnkit explain RUN TEXT --pad-to N(파이썬: pad_to=N)으로 이 문장을 그런 배치처럼 N 토큰까지 채워 볼 수 있습니다");
  }
  if (typed.length) {
    en.push(`[PAD] typed in the text (position${typed.length > 1 ? "s" : ""} ${typed.join(", ")}) is not padding: the mask comes from each text's length in its batch (data/batching.py pad_batch), not from the token's id, so the model reads it like any other token: ✓, with a weight`);
    ko.push(`문장에 직접 쓴 [PAD](위치 ${typed.join(", ")})는 패딩이 아닙니다. 마스크는 토큰 id가 아니라 배치 안에서 각 문장의 길이로 만들어지므로(data/batching.py pad_batch), 모델은 이것을 다른 토큰처럼 읽습니다: ✓, 가중치도 받습니다`);
  }
  if (kinds.includes("look_ahead")) {
    en.push("look-ahead mask: a query sees only keys at or before its position (no peeking at the future)");
    ko.push("룩어헤드 마스크: 쿼리는 자기 위치와 그 앞의 키만 봅니다(미래를 엿보지 않습니다)");
  }
  if (!en.length || (!kinds.length && !padded)) {
    en.push("no mask: every query may attend to every key");
    ko.push("마스크 없음: 모든 쿼리가 모든 키에 어텐션할 수 있습니다");
  }
  en.push("Green ✓ = may attend, dark ✗ = masked: a very negative number is added to its score, so softmax gives it exactly 0.");
  ko.push("초록 ✓ = 어텐션 가능, 어두운 ✗ = 마스킹: 스코어에 아주 큰 음수를 더하므로 소프트맥스 뒤 정확히 0이 됩니다.");
  say($("mask-note"), en.join("; ").replace(/; Green/, ". Green"), ko.join("; ").replace(/; 초록/, ". 초록"));
  $("mask-note").dataset.padded = String(padded);
  $("mask-note").dataset.typed = typed.join(",");
}

// A served page of a classify, mlm, tag or seq2seq run (FAMILIES' pads): the text padded
// to a length, asked anew (/v1/explain's pad_to), to see the padding mask at work.
function renderPadForm() {
  const t = trace();
  const form = $("pad-form");
  const fam = familyView(t.family);
  form.hidden = !PAYLOAD.api || !(fam && fam.pads);
  const input = t.inputs[0];
  if (!form.hidden && !$("pad-to").dataset.filled) {
    $("pad-to").value = input.padded ? String(input.tokens.length) : "";
    $("pad-to").dataset.filled = "1";
  }
}

// Lecture 004: a = [soft](arg)max_β(Kᵀq). The weights of query row qi of head h: soft =
// softmax(β · scores) over the keys it may see (β = 1: the model's own softmax, its scores
// being QKᵀ/√d_k already), hard = a one-hot on the argmax key. Without stored scores
// (coarsened) they come from the stored weights: softmax(β s) = α^β / Σ α^β (softmax drops
// a constant per row, so these are the same numbers).
function softHard(a, h, qi) {
  const W = mat(a.weights, h);
  const M = mat(a.mask.array);
  const Sc = a.scores ? mat(a.scores, h) : null;
  const Tk = W.cols;
  const mode = S.shMode;
  const beta = S.beta;
  const visible = Array.from({ length: Tk }, (_, j) => !!M.get(qi, j));
  const s = Array.from({ length: Tk }, (_, j) => (Sc ? Sc.get(qi, j) : Math.log(W.get(qi, j))));
  let best = null;
  for (let j = 0; j < Tk; j++) if (visible[j] && (best === null || s[j] > s[best])) best = j;
  let weights;
  if (mode === "hard") {
    weights = visible.map((_, j) => (j === best ? 1 : 0));
  } else {
    const z = s.map((x, j) => (!visible[j] ? -Infinity : beta === 0 ? 0 : beta * x));
    const top = Math.max(...z);
    const e = z.map((x) => (Number.isFinite(top) && x !== -Infinity ? Math.exp(x - top) : 0));
    const sum = e.reduce((p, q) => p + q, 0);
    weights = e.map((x) => (sum > 0 ? x / sum : 0));
  }
  const own = mode === "soft" && beta === 1;
  return { weights: own ? Array.from({ length: Tk }, (_, j) => W.get(qi, j)) : weights, computed: weights,
    own, mode, beta, argmax: best, fromWeights: !Sc, visible };
}

function renderSoftHard(a, sh, kt, qname) {
  $("sh-soft").checked = sh.mode === "soft";
  $("sh-hard").checked = sh.mode === "hard";
  for (const id of ["sh-beta", "sh-beta-num"]) if (Number($(id).value) !== sh.beta) $(id).value = String(sh.beta);
  $("sh-beta").disabled = sh.mode === "hard";
  $("sh-beta-num").disabled = sh.mode === "hard";
  const h = S.head;
  const W = mat(a.weights, h);
  const qi = S.query;
  const en = [];
  const ko = [];
  if (sh.mode === "hard") {
    en.push(`hard: a one-hot vector on the key with the largest score${sh.argmax !== null ? ` ("${kt[sh.argmax]}")` : ""}: the output is that key's value alone (argmax has no gradient: the model was trained with soft attention).`);
    ko.push(`하드: 스코어가 가장 큰 키${sh.argmax !== null ? `("${kt[sh.argmax]}")` : ""}에만 1인 원-핫 벡터입니다. 출력은 그 키의 밸류 하나입니다(argmax는 미분할 수 없어서 모델은 소프트 어텐션으로 학습했습니다).`);
  } else {
    en.push(`soft: a = softmax(β · scores) over the keys this query may see. β = 1 is the model's own softmax (its scores are already Kᵀq/√d_k: lecture 004's β = 1/√d). Larger β sharpens the weights towards hard attention; β → 0 gives a plain average of the visible keys.${sh.own ? " Now: the model's own weights." : ""}`);
    ko.push(`소프트: 이 쿼리가 볼 수 있는 키들에 대해 a = softmax(β · 스코어)입니다. β = 1이 모델 자신의 소프트맥스입니다(스코어가 이미 Kᵀq/√d_k: 004강의 β = 1/√d). β가 커지면 가중치가 하드 어텐션 쪽으로 뾰족해지고, β → 0이면 보이는 키들의 단순 평균이 됩니다.${sh.own ? " 지금은 모델 자신의 가중치입니다." : ""}`);
  }
  if (sh.fromWeights) {
    en.push("This layer's scores are not stored (the page's size budget): computed from the stored weights, softmax(β s) = α^β / Σ α^β (the same numbers: softmax drops a constant per row).");
    ko.push("이 층의 스코어는 저장되지 않았습니다(페이지 크기 한도): 저장된 가중치로 계산합니다. softmax(β s) = α^β / Σ α^β (소프트맥스는 행마다 상수를 지우므로 같은 값입니다).");
    if (a.weights.scale) {
      en.push("The weights are stored in steps of 1/255: a key whose weight rounds to 0 stays 0 at any β.");
      ko.push("가중치는 1/255 단위로 저장되어 있어, 0으로 반올림된 키는 어떤 β에서도 0입니다.");
    }
  }
  if (!a.v) {
    en.push("Only the norms of V are stored: the weighted sum's vector cannot be recomputed here (hard attention's output is the argmax key's value, whose norm is shown).");
    ko.push("V는 노름만 저장되어 있어 가중합 벡터를 여기서 다시 계산할 수 없습니다(하드 어텐션의 출력은 argmax 키의 밸류이므로 그 노름을 보여 줍니다).");
  }
  if (!sh.own) {
    en.push("The weighted sum below (step e) uses these weights; the model's own are beside them.");
    ko.push("아래 가중합(e 단계)은 이 가중치를 씁니다. 모델 자신의 가중치는 옆 열에 있습니다.");
  }
  say($("sh-note"), en.join(" "), ko.join(" "));
  const Tk = W.cols;
  const rowsM = { rows: 2, cols: Tk, get: (i, j) => (i === 0 ? W.get(qi, j) : sh.computed[j]) };
  const label = sh.mode === "hard" ? "hard" : `soft β=${fmt(sh.beta, 2)}`;
  heatmap($("sh-map"), rowsM, { rowLabels: ["model α", label], colLabels: kt, scale: "seq", max: 1, text: true,
    masked: (_, j) => !sh.visible[j], axes: [["weights", "가중치"], ["keys", "키"]], legend: { title: ["attention weight", "어텐션 가중치"], min: 0, max: 1 },
    tip: (i, j) => `${i === 0 ? "model α" : label} · ${qname} → ${kt[j]}: ${fmt(rowsM.get(i, j), 4)}` });
  tableRows($("sh-table"), ["", ...kt], [
    { cells: ["model α", ...kt.map((_, j) => fmt(W.get(qi, j)))] },
    { cells: [label, ...kt.map((_, j) => fmt(sh.computed[j]))], cls: "chosen" },
  ]);
}

// The five score functions of lecture 002 on one decoder query (Seq2SeqView.score_functions):
// the run's own (trained), the ones without parameters on the run's own queries and keys,
// and the others with freshly initialised parameters (untrained illustrations).
const SF_LABEL = {
  trained: ["the run's own, trained", "이 모델의 함수(학습됨)"],
  none: ["no parameters: on the run's own queries and keys", "파라미터 없음: 이 모델의 쿼리와 키로 계산"],
  untrained: ["untrained illustration", "학습되지 않은 예시"],
};
function renderScoreFunctions() {
  const t = trace();
  const sf = (t.view || {}).score_functions;
  const box = $("sf-maps");
  box.replaceChildren();
  $("sf-body").hidden = !sf;
  if (!sf) {
    say($("sf-note"), t.family === "seq2seq"
      ? "This run's decoder has no attention: no score to compare."
      : "The five score functions of lecture 002 (dot, scaled dot, general, concat, location) score a decoder state s_t against the encoder outputs h_i: a translate or chat run shows them here side by side, on its own query (this run's attention is scaled dot, QKᵀ/√d_k).",
    t.family === "seq2seq"
      ? "이 모델의 디코더에는 어텐션이 없어 비교할 스코어가 없습니다."
      : "002강의 어텐션 스코어 함수 다섯 가지(dot, scaled dot, general, concat, location)는 디코더 상태 s_t와 인코더 출력 h_i 사이의 점수입니다. 번역(translate)이나 챗(chat) 실행에서 그 모델의 쿼리로 나란히 보여 줍니다(이 모델의 어텐션은 scaled dot, QKᵀ/√d_k입니다).");
    return;
  }
  const first = arr(sf.functions[0].weights);
  const [heads, T, Sn] = first.shape;
  const a = attention();
  const onCross = a && a.query === sf.query && a.key === sf.key;
  const qi = Math.min(onCross ? S.query : S.s2sStep - 1, T - 1);
  const h = onCross && a.module === sf.module ? Math.min(S.head, heads - 1) : 0;
  const qt = rowLabelsOf(sf.query, T);
  const kt = tokensOf(sf.key, Sn);
  const transformer = sf.own === "scaled_dot" && !sf.functions.some((f) => f.parameters === "trained");
  const en = `Query: the decoder's row ${qi} ("${qt[qi]}")${heads > 1 || sf.num_heads > 1 ? `, head ${h}` : ""} against the ${Sn} source tokens (module ${sf.module}). ${transformer
    ? "A Transformer: its queries and keys are the trained projections q = W^Q s, k = W^K h of this head; its own score is scaled dot."
    : `An LSTM: the query is the decoder state s_t, the keys the encoder outputs h_i; its own score is ${sf.own}, with its trained parameters.`} The functions marked "untrained illustration" have freshly initialised parameters (seed ${sf.seed}): they show how each formula scores, not what a model would learn. The query follows the one picked above (or the decoding step below).`;
  const ko = `쿼리: 디코더의 ${qi}번 행("${qt[qi]}")${heads > 1 || sf.num_heads > 1 ? `, 헤드 ${h}` : ""}를 입력 토큰 ${Sn}개와 비교합니다(모듈 ${sf.module}). ${transformer
    ? "트랜스포머: 쿼리와 키는 이 헤드의 학습된 투영 q = W^Q s, k = W^K h이고, 모델 자신의 스코어 함수는 scaled dot입니다."
    : `LSTM: 쿼리는 디코더 상태 s_t, 키는 인코더 출력 h_i이고, 모델 자신의 스코어 함수는 ${sf.own}(학습된 파라미터)입니다.`} "학습되지 않은 예시"로 표시한 함수는 파라미터를 새로 초기화했습니다(seed ${sf.seed}): 각 식이 점수를 매기는 방식을 보여 줄 뿐, 모델이 학습할 값은 아닙니다. 쿼리는 위에서 고른 쿼리(또는 아래 디코딩 단계)를 따라갑니다.`;
  say($("sf-note"), en, ko);
  const head = ["function", "", ...kt];
  const rows = [];
  for (const f of sf.functions) {
    const Sm = mat(f.scores, h);
    const Wm = mat(f.weights, h);
    const [lEn, lKo] = f.own && f.parameters === "none"
      ? ["on the run's trained projections q = W^Q s, k = W^K h", "학습된 투영 q = W^Q s, k = W^K h 위에서 계산"]
      : SF_LABEL[f.parameters] || [f.parameters, f.parameters];
    const mark = f.own ? "★ " : "";
    rows.push({ cells: [`${mark}${f.name}`, "score", ...kt.map((_, j) => fmt(Sm.get(qi, j)))], cls: f.own ? "chosen" : null });
    rows.push({ cells: ["", "weight", ...kt.map((_, j) => fmt(Wm.get(qi, j)))], cls: f.own ? "chosen" : null });
    const c = el("canvas", { "data-name": f.name });
    const m = { rows: 1, cols: Sn, get: (_, j) => Wm.get(qi, j) };
    heatmap(c, m, { colLabels: kt, scale: "seq", max: 1, text: true, cellH: 24, maxWidth: 520,
      tip: (_, j) => `${f.name} · ${qt[qi]} → ${kt[j]}: score ${fmt(Sm.get(qi, j), 4)}, weight ${fmt(Wm.get(qi, j), 4)}` });
    const title = el("p", { class: "sf-title" }, el("b", { text: `${mark}${f.name}` }), " ", el("code", { text: f.formula }), " · ",
      el("span", { class: `sf-${f.parameters}` }, tr(f.own ? `${lEn} (the run's own score)` : lEn, f.own ? `${lKo} (이 모델의 스코어 함수)` : lKo)));
    box.append(el("div", { class: "sf-row", "data-name": f.name, "data-parameters": f.parameters, "data-own": f.own ? "1" : "0" },
      title, el("div", { class: "scroll" }, c)));
  }
  tableRows($("sf-table"), head, rows);
}

// ---------------------------------------------------------------------------- 4 all heads
function allAttention() {
  const out = [];
  stacks().forEach((s, si) => s.layers.forEach((l, li) => l.attention.forEach((a, ai) => {
    out.push({ key: `${si}.${li}.${ai}`, si, li, ai, a, label: `${s.name} ${l.index} · ${ROLE[a.role] || a.role}` });
  })));
  return out;
}

function renderModelView() {
  const box = $("model-view");
  const all = allAttention();
  $("heads-none").hidden = all.length > 0;
  $("heads-body").hidden = !all.length;
  box.replaceChildren();
  if (!all.length) return;
  const H = Math.max(...all.map((x) => x.a.num_heads));
  box.style.gridTemplateColumns = `auto repeat(${H}, max-content)`;
  box.append(el("span"), ...Array.from({ length: H }, (_, h) => el("span", { class: "lbl", text: `head ${h}` })));
  const size = Math.max(48, Math.min(96, Math.floor(((box.clientWidth || 900) - 160) / H) - 8));
  for (const x of all) {
    box.append(el("span", { class: "lbl", text: x.label }));
    for (let h = 0; h < H; h++) {
      if (h >= x.a.num_heads) {
        box.append(el("span"));
        continue;
      }
      const W = mat(x.a.weights, h);
      const c = el("canvas", { class: "thumb", "data-key": x.key, "data-head": h, title: `${x.label}, head ${h}` });
      const cell = Math.max(1, Math.floor(size / Math.max(W.rows, W.cols)));
      heatmap(c, W, { scale: "seq", max: 1, cell, cellH: cell, maxWidth: size,
        pick: () => {
          Object.assign(S, { stack: x.si, layer: x.li, attn: x.ai, head: h });
          renderHead();
          $("head").scrollIntoView();
        } });
      c.onmousemove = (event) => tipAt(event, `${x.label}, head ${h}`);
      box.append(c);
    }
  }
  markThumb();
}

function markThumb() {
  for (const c of document.querySelectorAll("#model-view canvas.thumb")) {
    c.classList.toggle("on", c.dataset.key === `${S.stack}.${S.layer}.${S.attn}` && Number(c.dataset.head) === S.head);
  }
}

function renderHeadView() {
  const all = allAttention();
  const view = $("head-view");
  view.replaceChildren();
  if (!all.length) return;
  S.hv = fillSelect($("hv-layer"), all.map((x) => [x.key, x.label]), S.hv);
  const x = all.find((y) => y.key === S.hv);
  const H = x.a.num_heads;
  if (!S.hvHeads || [...S.hvHeads].some((h) => h >= H)) S.hvHeads = new Set(Array.from({ length: H }, (_, h) => h));
  $("hv-heads").replaceChildren(...Array.from({ length: H }, (_, h) => {
    const box = el("input", { type: "checkbox", "data-head": h, checked: S.hvHeads.has(h) });
    box.addEventListener("change", () => {
      if (box.checked) S.hvHeads.add(h);
      else S.hvHeads.delete(h);
      renderHeadView();
    });
    const swatch = el("i");
    swatch.style.background = HEAD_COLORS[h % HEAD_COLORS.length];
    return el("label", {}, box, swatch, `head ${h}`);
  }));
  const W0 = mat(x.a.weights, 0);
  const qt = tokensOf(x.a.query, W0.rows);
  const kt = tokensOf(x.a.key, W0.cols);
  const rowH = W0.rows > 40 || W0.cols > 40 ? 14 : 22;
  const left = 150;
  const right = 450;
  const height = Math.max(W0.rows, W0.cols) * rowH + 20;
  view.setAttribute("width", 600);
  view.setAttribute("height", height);
  const lines = svg("g");
  const cut = W0.cols > 40 ? 0.05 : 0.01; // long inputs: the faint lines are left out
  for (const h of S.hvHeads) {
    const W = mat(x.a.weights, h);
    for (let i = 0; i < W.rows; i++) {
      for (let j = 0; j < W.cols; j++) {
        const w = W.get(i, j);
        if (w < cut) continue;
        lines.append(svg("line", {
          x1: left + 6, y1: 14 + i * rowH, x2: right - 6, y2: 14 + j * rowH,
          stroke: HEAD_COLORS[h % HEAD_COLORS.length], "stroke-opacity": Math.min(1, w).toFixed(3),
          "stroke-width": 2, "data-q": i, "data-k": j, "data-head": h, "data-w": w.toFixed(4),
        }));
      }
    }
  }
  const only = (attr, idx) => {
    for (const line of lines.children) line.style.display = idx === null || Number(line.dataset[attr]) === idx ? "" : "none";
  };
  view.append(lines);
  qt.forEach((t, i) => {
    const text = svg("text", { x: left, y: 18 + i * rowH, "text-anchor": "end", text: t, "data-side": "q", "data-i": i });
    text.addEventListener("mouseenter", () => only("q", i));
    text.addEventListener("mouseleave", () => only("q", null));
    view.append(text);
  });
  kt.forEach((t, j) => {
    const text = svg("text", { x: right, y: 18 + j * rowH, text: t, "data-side": "k", "data-i": j });
    text.addEventListener("mouseenter", () => only("k", j));
    text.addEventListener("mouseleave", () => only("k", null));
    view.append(text);
  });
}
