// attnkit explain, sections 1-2: the input tokens and the embeddings.
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

// ---------------------------------------------------------------------------- 1 input
function renderInput() {
  const box = $("input-tables");
  box.replaceChildren();
  for (const input of trace().inputs) {
    const chips = input.tokens.map((tok, i) => {
      const seg = input.segments ? input.segments[i] : 0;
      const chip = el("span", {
        class: `chip${seg ? " seg1" : ""}${tok === "[MASK]" ? " mask" : ""}`,
        "data-pos": i, "data-id": input.ids[i], title: `position ${i}, id ${input.ids[i]}${input.segments ? `, segment ${seg}` : ""}`,
        onclick: () => choosePosition(input.name, i),
      }, el("span", { class: "t", text: showTok(tok) }), el("small", { text: String(input.ids[i]) }));
      return chip;
    });
    const n = input.tokens.length;
    const title = tr(`${input.name} · ${n} tokens${input.truncated ? ` (cut to ${input.bound})` : ""}`,
      `${input.name} · 토큰 ${n}개${input.truncated ? ` (${input.bound}개로 자름)` : ""}`);
    box.append(el("h3", {}, title), el("p", { class: "tokrow", "data-input": input.name }, ...chips));
    if (input.segments && input.segments.some((s) => s)) {
      box.append(trace().family === "qa"
        ? say(el("p", { class: "note" }), "Blue-edged tokens are the context (segment B, 1); the others the question (segment A, 0).",
          "파란 테두리 토큰은 지문(세그먼트 B, 1)이고, 나머지는 질문(세그먼트 A, 0)입니다.")
        : say(el("p", { class: "note" }), "Blue-edged tokens are sentence B (segment 1); the others sentence A (segment 0).",
          "파란 테두리 토큰은 문장 B(세그먼트 1)이고, 나머지는 문장 A(세그먼트 0)입니다(세그먼트 임베딩)."));
    }
  }
}

function choosePosition(name, i) {
  const e = trace().embeddings.findIndex((x) => x.input === name);
  if (e >= 0) {
    S.emb = e;
    S.pos = i;
    renderEmbeddings();
  }
  const a = attention();
  if (a && a.query === name) {
    S.query = i;
    renderHead();
  }
  const elmo = (trace().view || {}).elmo;
  if (elmo && name === trace().inputs[0].name) {
    S.pos = i;
    renderELMo(elmo);
  }
}

// ---------------------------------------------------------------------------- 2 embeddings
function renderEmbeddings() {
  const embs = trace().embeddings || [];
  $("emb-none").hidden = embs.length > 0;
  $("emb-body").hidden = !embs.length;
  if (!embs.length) return;
  S.emb = Number(fillSelect($("emb-input"), embs.map((e, i) => [i, e.input]), S.emb));
  const e = embs[S.emb];
  const T = arr(e.sum).shape[0];
  const tokens = tokensOf(e.input, T);
  S.pos = Number(fillSelect($("emb-pos"), tokens.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.pos, T - 1)));
  const pos = e.position;
  const scaled = e.token_scale !== 1 ? ` × √d_model (${fmt(e.token_scale, 2)})` : "";
  const parts = [[`token embedding${scaled}`, `토큰 임베딩${scaled}`]];
  if (pos) parts.push(pos.kind === "sinusoidal" ? ["positional encoding", "포지셔널 인코딩"] : ["learned position embedding", "학습된 위치 임베딩"]);
  if (e.segment) parts.push(["segment embedding", "세그먼트 임베딩"]);
  const sum = (k) => `${e.layer_norm ? "LayerNorm(" : ""}${parts.map((p) => p[k]).join(" + ")}${e.layer_norm ? ")" : ""}   (d_model = ${e.d_model})`;
  say($("emb-formula"), `input of layer 0 = ${sum(0)}`, `층 0의 입력 = ${sum(1)}`);
  const maps = [[["token embedding" + (e.token_scale !== 1 ? " × scale" : ""), "토큰 임베딩" + (e.token_scale !== 1 ? " × 스케일" : "")], e.token]];
  if (pos) maps.push([pos.kind === "sinusoidal" ? ["positional encoding rows", "포지셔널 인코딩 행"] : ["learned position rows", "학습된 위치 임베딩 행"], pos.rows]);
  if (e.segment) maps.push([["segment embedding rows", "세그먼트 임베딩 행"], e.segment]);
  maps.push([e.layer_norm ? ["sum, after LayerNorm", "합, 층 정규화 후"] : ["sum (what layer 0 reads)", "합 (층 0이 읽는 입력)"], e.sum]);
  const width = Math.max(300, Math.floor(($("emb-maps").clientWidth || 900) / Math.min(2, maps.length)) - 20);
  $("emb-maps").replaceChildren(...maps.map(([caption, a]) => {
    const canvas = el("canvas", { "data-map": caption[0] });
    heatmap(canvas, mat(a), {
      rowLabels: tokens, strongRow: S.pos, maxWidth: width, cellH: Math.max(4, Math.min(18, Math.floor(360 / T))),
      tip: (i, j) => `${tokens[i]} · dim ${j}: ${fmt(mat(a).get(i, j))}`,
      pick: (i) => { S.pos = i; renderEmbeddings(); },
    });
    return figure(caption, canvas);
  }));
  // the course's PE heatmap, each token's row outlined, the chosen one in orange
  $("pe-box").hidden = !pos;
  if (pos) {
    const table = pos.table ? mat(pos.table) : mat(pos.rows);
    const rowsOf = pos.table ? pos.positions : pos.positions.map((_, i) => i);
    const p = pos.positions[S.pos];
    const formula = "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))";
    if (pos.kind === "sinusoidal") {
      say($("pe-note"),
        `${formula}; rows: positions 0-${table.rows - 1}, columns: dimensions; colours from −1 (red) to +1 (blue), as the PNG of attnkit.runtime.viz. Position ${p} (token "${tokens[S.pos]}") is outlined in orange; the other tokens' rows in grey.`,
        `${formula}. 행은 위치 0-${table.rows - 1}, 열은 차원이고, 색은 −1(빨강)부터 +1(파랑)까지입니다(attnkit.runtime.viz의 PNG와 같은 색). 위치 ${p}(토큰 "${tokens[S.pos]}")의 행은 주황색, 나머지 토큰의 행은 회색 테두리입니다.`);
    } else {
      say($("pe-note"),
        `Learned position embeddings: one trained row per position (rows: the positions of this text, columns: dimensions). Position ${p} is outlined in orange.`,
        `학습된 위치 임베딩: 위치마다 학습한 행이 하나씩 있습니다(행: 이 문장의 위치, 열: 차원). 위치 ${p}의 행이 주황색 테두리입니다.`);
    }
    const labels = Array.from({ length: table.rows }, (_, i) => `pos ${i}`);
    heatmap($("pe-map"), table, {
      rowLabels: labels, rows: rowsOf, strongRow: rowsOf[S.pos], cellH: Math.max(2, Math.min(16, Math.floor(400 / table.rows))),
      max: pos.kind === "sinusoidal" ? 1 : undefined, // -1..1, as viz.plot_positional_encoding
      axes: pos.table ? [["position", "위치"], ["dimension", "차원"]] : [["position of this text", "이 문장의 위치"], ["dimension", "차원"]],
      tip: (i, j) => `position ${i} · dim ${j}: ${fmt(table.get(i, j))}`,
      pick: (i) => {
        const k = rowsOf.indexOf(i);
        if (k >= 0) { S.pos = k; renderEmbeddings(); }
      },
    });
  }
  const n = Math.min(8, e.d_model);
  const row = (label, a) => ({ cells: [label, ...Array.from({ length: n }, (_, j) => fmt(mat(a).get(S.pos, j)))] });
  const rows = [row(`token "${tokens[S.pos]}"${e.token_scale !== 1 ? " × scale" : ""}`, e.token)];
  if (pos) rows.push(row(`+ position ${pos.positions[S.pos]}`, pos.rows));
  if (e.segment) rows.push(row("+ segment", e.segment));
  rows.push({ ...row(e.layer_norm ? "= sum, LayerNorm" : "= sum", e.sum), cls: "chosen" });
  tableRows($("emb-table"), ["", ...Array.from({ length: n }, (_, j) => `dim ${j}`)], rows);
}
