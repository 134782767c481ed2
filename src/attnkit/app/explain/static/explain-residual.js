// attnkit explain, section 5: the residual stream, the FFN, Add & Norm.
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

// ---------------------------------------------------------------------------- 5 residual
// The FFN's formula for the run's activation (Residual.activation; the model's config else)
const FFN_FORMULA = {
  relu: {
    formula: "FFN(x) = max(0, xW1 + b1) W2 + b2",
    act: ["ReLU(z) = max(0, z)", "ReLU(z) = max(0, z)"],
    active: ["FFN units > 0 (ReLU)", "FFN 유닛 > 0 (ReLU)"],
    note: ["ReLU keeps a unit where x W1 + b1 > 0 and sets every other unit to exactly 0: the column \"FFN units > 0\" is the share of the d_ff units left on for the chosen token.",
      "ReLU는 x W1 + b1 > 0인 유닛만 남기고 나머지는 정확히 0으로 만듭니다. \"FFN 유닛 > 0\" 열은 선택한 토큰에서 켜져 있는 d_ff 유닛의 비율입니다."],
  },
  gelu: {
    formula: "FFN(x) = GELU(xW1 + b1) W2 + b2",
    act: ["GELU(z) = z · Φ(z) = z · ½(1 + erf(z/√2))", "GELU(z) = z · Φ(z) = z · ½(1 + erf(z/√2))"],
    def: ["Φ is the standard normal CDF. ", "Φ는 표준 정규 분포의 누적 분포 함수입니다. "],
    active: ["FFN units with GELU > 0", "GELU > 0인 FFN 유닛"],
    note: ["GELU is a smooth ReLU: GELU(z) > 0 exactly where z = x W1 + b1 > 0, but a negative z gives a small negative value (down to about −0.17), not 0: the column counts the units with GELU(z) > 0.",
      "GELU는 매끄러운 ReLU입니다. z = x W1 + b1 > 0일 때에만 GELU(z) > 0이고, 음수 z는 0이 아니라 작은 음수(최소 약 −0.17)가 됩니다. 이 열은 GELU(z) > 0인 유닛의 비율입니다."],
  },
  gelu_tanh: {
    formula: "FFN(x) = GELU(xW1 + b1) W2 + b2",
    act: ["GELU(z) ≈ ½ z (1 + tanh(√(2/π) (z + 0.044715 z³)))", "GELU(z) ≈ ½ z (1 + tanh(√(2/π) (z + 0.044715 z³)))"],
    def: ["gelu_tanh is GPT-2's tanh approximation of GELU(z) = z · Φ(z), Φ the standard normal CDF. ", "gelu_tanh는 GELU(z) = z · Φ(z)(Φ는 표준 정규 분포의 누적 분포 함수)의 tanh 근사로, GPT-2의 방식입니다. "],
    active: ["FFN units with GELU > 0", "GELU > 0인 FFN 유닛"],
    note: ["GELU is a smooth ReLU: GELU(z) > 0 exactly where z = x W1 + b1 > 0, but a negative z gives a small negative value (down to about −0.17), not 0: the column counts the units with GELU(z) > 0.",
      "GELU는 매끄러운 ReLU입니다. z = x W1 + b1 > 0일 때에만 GELU(z) > 0이고, 음수 z는 0이 아니라 작은 음수(최소 약 −0.17)가 됩니다. 이 열은 GELU(z) > 0인 유닛의 비율입니다."],
  },
};
const SUBLAYER_NAME = { attention: ["attention", "어텐션"], cross_attention: ["cross-attention", "인코더-디코더 어텐션"], ffn: ["FFN", "FFN"] };

// The label of each row of an input: its token; a seq2seq decoder's rows (input "target")
// are labelled "input ⇒ predicted output" (the token it reads ⇒ the token predicted there),
// the same in sections 3, 5 and 6.
function rowLabelsOf(name, n) {
  const tokens = tokensOf(name, n);
  const t = trace();
  if (t.family !== "seq2seq" || name !== "target") return tokens;
  const out = (t.view && t.view.output_tokens) || [];
  return tokens.map((tok, i) => (out[i] !== undefined ? `${tok} ⇒ ${showTok(out[i])}` : tok));
}

// Token labels of a stack's input, as its rows are labelled everywhere on the page.
function stackTokens(s, n) {
  return rowLabelsOf(s.input, n);
}

function renderResidual() {
  const layers = [];
  stacks().forEach((s) => s.layers.forEach((l) => { if (l.residual) layers.push([s, l]); }));
  $("res-none").hidden = layers.length > 0;
  $("res-body").hidden = !layers.length;
  if (!layers.length) return;
  const [s0] = layers[0];
  const T = arr(layers[0][1].residual.input).shape[0];
  // tokens of the stack shown first (a seq2seq has two streams: encoder then decoder)
  const first = stackTokens(s0, T);
  S.resTok = Number(fillSelect($("res-token"), first.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.resTok, T - 1)));
  const r0 = layers[0][1].residual;
  const normFirst = r0.norm_first ?? s0.norm_first;
  const activation = r0.activation || trace().model?.activation || "relu";
  const f = FFN_FORMULA[activation] || FFN_FORMULA.relu;
  say($("res-note"),
    `The residual stream: each token's vector ‖x‖ (its length) entering each layer and after each sublayer's Add & Norm; this run is ${normFirst
      ? "pre-norm (as GPT): x + Sublayer(LayerNorm(x)), the stream itself is normalised only by the final LayerNorm"
      : "post-norm (the paper, BERT): LayerNorm(x + Sublayer(x)) after each sublayer"}. The FFN is position-wise: ${f.formula} (activation: ${activation}).`,
    `잔차 연결의 흐름: 각 토큰 벡터의 길이 ‖x‖를 층에 들어갈 때와 각 서브층의 Add & Norm 뒤에서 보여 줍니다. 이 모델은 ${normFirst
      ? "Pre-LN(GPT 방식)입니다: x + Sublayer(LayerNorm(x)). 흐름 자체는 마지막 LayerNorm에서만 정규화됩니다"
      : "Post-LN(논문, BERT 방식)입니다: 각 서브층 뒤에 LayerNorm(x + Sublayer(x))"}. 포지션 와이즈 피드 포워드 신경망: ${f.formula} (활성화 함수: ${activation}).`);
  // stages for the chosen token (of the first stack) and the mean over tokens
  const stages = [];
  const rows = [];
  for (const [s, l] of layers) {
    const r = l.residual;
    const i = s.name === s0.name ? S.resTok : null;
    const mean = (a) => { const v = vec(a); return v.reduce((p, q) => p + q, 0) / v.length; };
    const pick = (a) => (i === null ? null : vec(a)[i]);
    if (!stages.length || stages[stages.length - 1].stack !== s.name) {
      stages.push({ label: `${s.name} in`, stack: s.name, tok: pick(r.input), mean: mean(r.input) });
    }
    const active = r.ffn_active ? vec(r.ffn_active) : null;
    for (const sub of r.sublayers) {
      const name = (SUBLAYER_NAME[sub.name] || [sub.name])[0];
      stages.push({ label: `${s.name} ${l.index} ${name}`, stack: s.name, tok: pick(sub.after), mean: mean(sub.after) });
      rows.push({ cells: [`${s.name} layer ${l.index}`, name,
        i === null ? "" : fmt(pick(sub.sublayer)), i === null ? "" : fmt(pick(sub.after)), fmt(mean(sub.after)),
        sub.name === "ffn" && active && i !== null ? pct(active[i]) : ""] });
    }
  }
  tableRows($("res-table"), ["layer", "sublayer", "‖sublayer(x)‖", "‖stream after Add & Norm‖", "mean over tokens", f.active[0]], rows);
  $("res-table").querySelector("thead th:last-child").replaceChildren(tr(f.active[0], f.active[1]));
  // the chart: the chosen token (orange) and the mean over tokens (blue)
  const chart = $("res-chart");
  const w = Math.max(480, 110 + 80 * stages.length);
  const h = 270;
  const axis = h - 100; // the rotated stage labels hang below it
  chart.setAttribute("width", w);
  chart.setAttribute("height", h);
  chart.replaceChildren();
  const values = stages.flatMap((s) => [s.tok, s.mean]).filter((v) => v !== null);
  const top = Math.max(...values) * 1.1 || 1;
  const x = (k) => 110 + (k * (w - 140)) / Math.max(1, stages.length - 1);
  const y = (v) => axis - (v / top) * (axis - 24);
  chart.append(svg("line", { x1: 100, y1: axis, x2: w - 20, y2: axis, stroke: "#adb5bd" }));
  chart.append(svg("line", { x1: 100, y1: 24, x2: 100, y2: axis, stroke: "#adb5bd" }));
  for (const v of [0, top / 1.1 / 2, top / 1.1]) {
    chart.append(svg("text", { x: 96, y: y(v) + 4, "font-size": 10, "text-anchor": "end", fill: "#5b6475", text: fmt(v, 1) }));
  }
  chart.append(svg("text", { x: 2, y: 14, "font-size": 11, fill: "#5b6475", text: `‖x‖ (max ${fmt(top / 1.1, 2)})` }));
  for (const [key, color, dash] of [["mean", "#1c7ed6", "4 3"], ["tok", "#d9480f", ""]]) {
    const pts = stages.map((s, k) => [k, s[key]]).filter(([, v]) => v !== null);
    if (!pts.length) continue;
    chart.append(svg("polyline", { points: pts.map(([k, v]) => `${x(k)},${y(v)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": dash }));
    for (const [k, v] of pts) chart.append(svg("circle", { cx: x(k), cy: y(v), r: 3, fill: color, "data-stage": k, "data-series": key, "data-value": fmt(v) }));
  }
  stages.forEach((s, k) => {
    const t = svg("text", { x: x(k), y: axis + 14, "font-size": 10, "text-anchor": "end", transform: `rotate(-35 ${x(k)} ${axis + 14})`, text: s.label });
    chart.append(t);
  });
  chart.append(svg("text", { x: w - 260, y: 14, "font-size": 11, fill: "#d9480f", text: `— token "${first[S.resTok]}"` }));
  chart.append(svg("text", { x: w - 130, y: 14, "font-size": 11, fill: "#1c7ed6", text: "- - mean over tokens" }));
  renderFFN(activation, f);
  renderAddNorm(layers, normFirst);
}

function renderFFN(activation, f) {
  $("ffn-formula").textContent = `${f.formula},  ${f.act[0]}`;
  $("ffn-formula").dataset.activation = activation;
  say($("ffn-note"),
    `Position-wise: the same two linear maps (d_model → d_ff → d_model) are applied to every token on its own. This run's activation is ${activation} (model.activation). ${f.def ? f.def[0] : ""}${f.note[0]}`,
    `포지션 와이즈: 같은 두 선형 변환(d_model → d_ff → d_model)을 각 토큰에 따로 적용합니다. 이 모델의 활성화 함수는 ${activation}입니다(model.activation). ${f.def ? f.def[1] : ""}${f.note[1]}`);
}

// Every LayerNorm of the blocks, [{s, l, sub, norm}], in order.
function layerNorms(layers) {
  const out = [];
  for (const [s, l] of layers) {
    for (const sub of l.residual.sublayers) if (sub.norm) out.push({ s, l, sub, norm: sub.norm });
  }
  return out;
}

function renderAddNorm(layers, normFirst) {
  $("an-formula").textContent = normFirst
    ? "pre-norm: x + Sublayer(LayerNorm(x)),   LayerNorm(x) = γ ⊙ (x − μ) / √(σ² + ε) + β"
    : "post-norm: LayerNorm(x + Sublayer(x)),   LayerNorm(z) = γ ⊙ (z − μ) / √(σ² + ε) + β";
  $("an-formula").dataset.norm = normFirst ? "pre" : "post";
  const all = layerNorms(layers);
  $("add-norm").hidden = !all.length;
  if (!all.length) return;
  S.anNorm = Number(fillSelect($("an-norm"), all.map((n, k) => [k,
    `${n.s.name} ${n.l.index} · ${(SUBLAYER_NAME[n.sub.name] || [n.sub.name])[0]}`]), Math.min(S.anNorm || 0, all.length - 1)));
  const { s, sub, norm } = all[S.anNorm];
  const mu = vec(norm.mean);
  const sd = vec(norm.std);
  const T = mu.length;
  const tokens = stackTokens(s, T);
  if (S.anStack !== s.name) S.anTok = s.name === layers[0][0].name ? S.resTok : 0;
  S.anStack = s.name;
  S.anTok = Number(fillSelect($("an-token"), tokens.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.anTok, T - 1)));
  const i = S.anTok;
  const eps = norm.eps;
  const denom = Math.sqrt(sd[i] * sd[i] + eps);
  const gamma = vec(norm.gamma);
  const beta = vec(norm.beta);
  const X = mat(norm.x);
  const Y = mat(norm.normalized);
  const what = normFirst ? "x" : "z = x + Sublayer(x)";
  const stats = $("an-stats");
  stats.replaceChildren();
  const items = [["μ", mu[i], "mean"], ["σ", sd[i], "std"], ["ε", eps, "eps"], ["√(σ² + ε)", denom, "denom"],
    ["‖γ‖", norm.gamma_norm, "gamma-norm"], ["‖β‖", norm.beta_norm, "beta-norm"]];
  items.forEach(([name, value, key], k) => {
    if (k) stats.append(" · ");
    stats.append(el("span", { class: "stat", "data-stat": key, "data-value": String(value) },
      `${name} = ${key === "eps" ? String(value) : fmt(value, 4)}`));
  });
  const d = gamma.length;
  say($("an-note"),
    `For the token "${tokens[i]}": μ and σ are the mean and the standard deviation of its ${d} numbers (over d_model; σ² the biased variance, as torch.nn.LayerNorm), ε = ${eps} keeps the division safe. Each number of ${what} is centred and scaled to (x − μ)/√(σ² + ε), then multiplied by the learned γ and shifted by the learned β (${d} of each; the table shows the first ${X.cols} dimensions).${normFirst ? " Pre-norm: this LayerNorm's output is what the sublayer reads; the stream itself goes on unnormalised (x + Sublayer(LayerNorm(x)))." : " Post-norm: this LayerNorm's output is the stream after the Add & Norm."}`,
    `토큰 "${tokens[i]}"에 대해: μ와 σ는 그 ${d}개 수(d_model 방향)의 평균과 표준편차입니다(σ²는 편향 분산, torch.nn.LayerNorm과 같음). ε = ${eps}는 0으로 나누는 것을 막습니다. ${what}의 각 값을 (x − μ)/√(σ² + ε)로 정규화한 뒤, 학습된 γ를 곱하고 학습된 β를 더합니다(각각 ${d}개, 표는 앞쪽 ${X.cols}개 차원). ${normFirst ? "Pre-LN: 이 층 정규화의 출력은 서브층이 읽는 값이고, 흐름 자체는 정규화되지 않은 채 이어집니다(x + Sublayer(LayerNorm(x)))." : "Post-LN: 이 층 정규화의 출력이 Add & Norm 뒤의 흐름입니다."}`);
  const head = ["dimension", normFirst ? "x" : "z = x + Sublayer(x)", "(x − μ)/√(σ²+ε)", "γ", "β", "γ ⊙ (x − μ)/√(σ²+ε) + β", "LayerNorm (captured)"];
  const rows = Array.from({ length: X.cols }, (_, j) => {
    const hat = (X.get(i, j) - mu[i]) / denom;
    return { cells: [String(j), fmt(X.get(i, j), 4), fmt(hat, 4), fmt(gamma[j], 4), fmt(beta[j], 4), fmt(gamma[j] * hat + beta[j], 4), fmt(Y.get(i, j), 4)] };
  });
  tableRows($("an-table"), head, rows);
  $("an-table").dataset.sublayer = sub.name;
}
