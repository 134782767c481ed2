// attnkit explain: the explorer page. Plain JavaScript, no framework, no network (the
// served page may ask its own server for a new text). It reads the trace(s) embedded in
// its "trace-data" element (layout: attnkit.app.explain.schema) and draws every panel from
// those numbers: nothing is recomputed here except what a control asks for (a weighted
// sum from the captured weights and values; the next-token bars at another temperature).
"use strict";

const $ = (id) => document.getElementById(id);
const PAYLOAD = JSON.parse($("trace-data").textContent);
const S = {
  alt: 0, // which trace (e.g. greedy / beam)
  stack: 0, layer: 0, attn: 0, head: 0, query: 0, // the head of section 3
  emb: 0, pos: 0, // section 2
  hv: "0.0.0", hvHeads: null, // section 4's head view
  resTok: 0, // section 5
  lmStep: 0, s2sStep: 1, // section 6
};
const trace = () => PAYLOAD.traces[S.alt].trace;

// ---------------------------------------------------------------------------- numbers
function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

const DECODED = new WeakMap();

// An Array of the trace ({dtype, shape, data: base64}) as {shape, values}, decoded once.
function arr(a) {
  if (!a) return null;
  let d = DECODED.get(a);
  if (d) return d;
  const bin = atob(a.data);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  let values;
  if (a.dtype === "float32") values = new Float32Array(bytes.buffer);
  else if (a.dtype === "uint8" && a.scale) values = Float32Array.from(bytes, (x) => x * a.scale);
  else if (a.dtype === "uint8") values = bytes;
  else values = Float32Array.from(new Uint16Array(bytes.buffer), halfToFloat);
  d = { shape: a.shape, values };
  DECODED.set(a, d);
  return d;
}

// The matrix at `prefix` of an array's last two dimensions (a vector: one row).
function mat(a, ...prefix) {
  const d = arr(a);
  const shape = d.shape.length === 1 ? [1, d.shape[0]] : d.shape;
  const rows = shape[shape.length - 2];
  const cols = shape[shape.length - 1];
  let offset = 0;
  prefix.forEach((p, i) => {
    offset = offset * shape[i] + p;
  });
  offset *= rows * cols;
  return { rows, cols, get: (i, j) => d.values[offset + i * cols + j] };
}

// A vector: the last dimension at `prefix`.
function vec(a, ...prefix) {
  const m = mat(a, ...prefix.slice(0, -1));
  const row = prefix.length ? prefix[prefix.length - 1] : 0;
  return Array.from({ length: m.cols }, (_, j) => m.get(prefix.length ? row : 0, j));
}

const fmt = (x, digits = 3) => (Number.isFinite(x) ? x.toFixed(digits) : String(x));
const pct = (p) => `${(100 * p).toFixed(1)}%`;

// A token as shown: whitespace made visible, BERT's "##" continuation kept.
function showTok(t) {
  if (t === undefined || t === null) return "";
  return String(t).replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/^ $/, "␣")
    .replace(/^Ġ/, "␣").replace(/^▁/, "␣");
}

// ---------------------------------------------------------------------------- DOM helpers
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

// ---------------------------------------------------------------------------- language
// Every explanatory note is written twice: <span data-l="en"> and <span data-l="ko">. The
// page's <html lang> picks which one shows (CSS); the default is the browser's language,
// the switch in the header changes it (and is remembered where the browser allows).
const LANGS = ["ko", "en"];
function tr(en, ko) {
  const both = document.createDocumentFragment();
  both.append(el("span", { "data-l": "en" }, ...[en].flat()), el("span", { "data-l": "ko" }, ...[ko].flat()));
  return both;
}
// Replace a node's content by a note in both languages.
function say(node, en, ko) {
  node.replaceChildren(tr(en, ko));
  return node;
}
const lang = () => document.documentElement.lang;
function setLang(value) {
  const chosen = LANGS.includes(value) ? value : "en";
  document.documentElement.lang = chosen;
  $("lang").value = chosen;
  try {
    localStorage.setItem("attnkit-lang", chosen);
  } catch (err) { /* a file:// page may not keep it: the browser's language next time */ }
}
function initialLang() {
  try {
    const kept = localStorage.getItem("attnkit-lang");
    if (LANGS.includes(kept)) return kept;
  } catch (err) { /* no storage: fall back to the browser's language */ }
  const wanted = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ""];
  return /^ko\b/i.test(wanted[0] || "") ? "ko" : "en";
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  return node;
}

function fillSelect(select, options, keep) {
  select.replaceChildren(...options.map(([value, label]) => new Option(label, String(value))));
  const values = options.map(([value]) => String(value));
  select.value = values.includes(String(keep)) ? String(keep) : values[0] ?? "";
  return select.value;
}

function tableRows(table, head, rows) {
  const thead = el("thead", {}, el("tr", {}, ...head.map((h, i) =>
    el("th", { class: i === 0 ? "tok" : null, text: h }))));
  const tbody = el("tbody");
  for (const row of rows) {
    const tr = el("tr", { class: row.cls || null });
    row.cells.forEach((c, i) => tr.append(el("td", { class: i === 0 ? "tok" : null, text: c })));
    tbody.append(tr);
  }
  table.replaceChildren(thead, tbody);
}

const TIP = $("tip");
function tipAt(event, text) {
  if (!text) {
    TIP.hidden = true;
    return;
  }
  TIP.textContent = text;
  TIP.hidden = false;
  TIP.style.left = `${event.clientX + 12}px`;
  TIP.style.top = `${event.clientY + 12}px`;
}

// ---------------------------------------------------------------------------- colours
// sequential: white -> orange (weights, probabilities); diverging: blue - white - red
function seqColor(t) {
  const x = Math.max(0, Math.min(1, t));
  return `rgb(${Math.round(255 - 38 * x)},${Math.round(255 - 183 * x)},${Math.round(255 - 240 * x)})`;
}
function divColor(t) {
  const x = Math.max(-1, Math.min(1, t));
  if (x >= 0) return `rgb(${Math.round(255 - 38 * x)},${Math.round(255 - 183 * x)},${Math.round(255 - 240 * x)})`;
  return `rgb(${Math.round(255 + 227 * x)},${Math.round(255 + 129 * x)},${Math.round(255 + 41 * x)})`;
}
const HEAD_COLORS = ["#d9480f", "#1c7ed6", "#2b8a3e", "#ae3ec9", "#f08c00", "#0c8599",
  "#c2255c", "#5c940d", "#364fc7", "#862e9c", "#e8590c", "#087f5b"];

// ---------------------------------------------------------------------------- heatmap
// Draw matrix m ({rows, cols, get}) on a canvas. opts: rowLabels, colLabels, scale
// ("seq" | "div" | "mask"), max, strongRow, strongCol, rows (highlighted row indices),
// masked(i, j), text (numbers in the cells when they fit), tip(i, j), pick(i, j), maxWidth.
function heatmap(canvas, m, opts = {}) {
  const ctx = canvas.getContext("2d");
  const font = '12px "Noto Sans KR", "NanumGothic", system-ui, "attnkit-ko", "attnkit-ko-all", sans-serif';
  ctx.font = font;
  const rowLabels = opts.rowLabels || [];
  const colLabels = opts.colLabels || [];
  const maxWidth = opts.maxWidth || Math.max(320, (canvas.parentElement?.clientWidth || 900) - 10);
  const labelW = rowLabels.length ? Math.min(140, Math.max(...rowLabels.map((l) => ctx.measureText(l).width)) + 8) : 0;
  let cw = Math.floor((maxWidth - labelW) / Math.max(1, m.cols));
  cw = Math.max(opts.minCell || 1, Math.min(opts.cell || 30, cw));
  let ch = opts.cellH || Math.max(cw, opts.minRow || 1);
  if (opts.cellH === undefined && cw < 4) ch = Math.max(2, Math.min(6, Math.floor(300 / m.rows)));
  const showCols = colLabels.length && cw >= 10;
  const labelH = showCols ? Math.min(110, Math.max(...colLabels.map((l) => ctx.measureText(l).width)) * 0.75 + 14) : 4;
  const showRows = rowLabels.length && ch >= 9;
  canvas.width = labelW + cw * m.cols + 2;
  canvas.height = labelH + ch * m.rows + 2;
  ctx.font = font;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  let max = opts.max;
  if (max === undefined) {
    max = 1e-12;
    for (let i = 0; i < m.rows; i++) {
      for (let j = 0; j < m.cols; j++) {
        const v = Math.abs(m.get(i, j));
        if (Number.isFinite(v) && !(opts.masked && opts.masked(i, j))) max = Math.max(max, v);
      }
    }
  }
  const scale = opts.scale || "div";
  for (let i = 0; i < m.rows; i++) {
    for (let j = 0; j < m.cols; j++) {
      const v = m.get(i, j);
      let color;
      if (opts.masked && opts.masked(i, j)) color = "#ced4da";
      else if (scale === "mask") color = v ? "#d3f9d8" : "#495057";
      else if (scale === "seq") color = seqColor(Math.sqrt(Math.max(0, v) / max));
      else color = divColor(v / max);
      ctx.fillStyle = color;
      ctx.fillRect(labelW + j * cw, labelH + i * ch, cw, ch);
    }
  }
  if (opts.text && cw >= 30 && ch >= 16) {
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.font = "10px system-ui, sans-serif";
    for (let i = 0; i < m.rows; i++) {
      for (let j = 0; j < m.cols; j++) {
        const v = m.get(i, j);
        const text = opts.text === "mask" ? (v ? "✓" : "✗") : fmt(v, 2);
        ctx.fillStyle = scale === "mask" && !v ? "#fff" : "#1d2330";
        ctx.fillText(text, labelW + j * cw + cw / 2, labelH + i * ch + ch / 2);
      }
    }
    ctx.font = font;
  }
  ctx.fillStyle = "#1d2330";
  if (showRows) {
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    rowLabels.forEach((l, i) => {
      ctx.fillStyle = i === opts.strongRow ? "#d9480f" : "#1d2330";
      ctx.fillText(l, labelW - 4, labelH + i * ch + ch / 2, labelW - 6);
    });
  }
  if (showCols) {
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    colLabels.forEach((l, j) => {
      ctx.save();
      ctx.translate(labelW + j * cw + cw / 2, labelH - 4);
      ctx.rotate(-Math.PI / 3);
      ctx.fillStyle = j === opts.strongCol ? "#d9480f" : "#1d2330";
      ctx.fillText(l, 0, 0);
      ctx.restore();
    });
  }
  ctx.lineWidth = 1;
  for (const r of opts.rows || []) {
    ctx.strokeStyle = "rgba(28,126,214,0.6)";
    ctx.strokeRect(labelW + 0.5, labelH + r * ch + 0.5, cw * m.cols - 1, Math.max(1, ch - 1));
  }
  ctx.lineWidth = 2;
  ctx.strokeStyle = "#d9480f";
  if (opts.strongRow !== undefined && opts.strongRow !== null && opts.strongRow < m.rows) {
    ctx.strokeRect(labelW + 1, labelH + opts.strongRow * ch + 1, cw * m.cols - 2, Math.max(2, ch - 2));
  }
  if (opts.strongCol !== undefined && opts.strongCol !== null && opts.strongCol < m.cols) {
    ctx.strokeRect(labelW + opts.strongCol * cw + 1, labelH + 1, Math.max(2, cw - 2), ch * m.rows - 2);
  }
  const cellAt = (event) => {
    const box = canvas.getBoundingClientRect();
    const x = ((event.clientX - box.left) * canvas.width) / box.width - labelW;
    const y = ((event.clientY - box.top) * canvas.height) / box.height - labelH;
    const i = Math.floor(y / ch);
    const j = Math.floor(x / cw);
    return i >= 0 && j >= 0 && i < m.rows && j < m.cols ? [i, j] : null;
  };
  canvas.onmousemove = (event) => {
    const c = cellAt(event);
    tipAt(event, c && opts.tip ? opts.tip(c[0], c[1]) : c ? fmt(m.get(c[0], c[1])) : "");
  };
  canvas.onmouseleave = () => tipAt(null, "");
  canvas.onclick = (event) => {
    const c = cellAt(event);
    if (c && opts.pick) opts.pick(c[0], c[1]);
  };
  canvas.style.cursor = opts.pick ? "pointer" : "default";
}

function figure(caption, canvas) {
  return el("figure", {}, el("figcaption", { text: caption }), canvas);
}

// Horizontal bars: items [{label, value (0..1), text, chosen, cut}]
function bars(box, items) {
  box.replaceChildren(...items.map((it) => el("div", {
    class: `bar-row${it.chosen ? " chosen" : ""}${it.cut ? " cut" : ""}`,
    "data-token": it.label,
  },
  el("span", { class: "lab", text: it.label }),
  (() => {
    const track = el("span", { class: "track" });
    const fill = el("span", { class: "fill" });
    fill.style.display = "block";
    fill.style.width = `${Math.max(0, Math.min(1, it.value)) * 100}%`;
    track.append(fill);
    return track;
  })(),
  el("span", { class: "val", text: it.text }))));
}

// ---------------------------------------------------------------------------- lookups
const inputNamed = (name) => trace().inputs.find((i) => i.name === name) || trace().inputs[0];
function tokensOf(name, n) {
  const input = inputNamed(name);
  const tokens = input ? input.tokens.map(showTok) : [];
  return Array.from({ length: n }, (_, i) => tokens[i] ?? `#${i}`);
}
const stacks = () => trace().stacks || [];
const hasAttention = () => stacks().some((s) => s.layers.some((l) => l.attention.length));
function attention() {
  const stack = stacks()[S.stack];
  const layer = stack && stack.layers[S.layer];
  return layer ? layer.attention[S.attn] : null;
}
const ROLE = { self: "self-attention", causal_self: "masked self-attention", cross: "encoder-decoder attention" };

// ---------------------------------------------------------------------------- header
function renderHeader() {
  const t = trace();
  $("run-name").textContent = t.run ? `· ${t.run}` : "";
  const m = t.model || {};
  const sizes = ["num_layers", "d_model", "num_heads", "d_ff", "vocab_size"]
    .filter((k) => m[k] !== undefined && m[k] !== null).map((k) => `${k} ${m[k]}`);
  $("model-line").textContent = `${t.task} run · arch ${t.arch} · ${t.family}${sizes.length ? " · " + sizes.join(", ") : ""}`;
  $("notes").replaceChildren(...(t.notes || []).map((n) =>
    el("li", { class: /cut|truncat|budget|잘/.test(n) ? "cut" : null, text: n })));
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
      $("ask-text").dataset.filled = "1";
    }
    $("ask-pair").hidden = !(api.pairs || t.pair);
    if (t.family === "qa") $("ask-pair").placeholder = "context · 지문";
    $("ask-beam-label").hidden = t.family !== "seq2seq";
    $("ask-steps-label").hidden = t.family !== "lm";
  }
}

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
    const title = `${input.name} · ${input.tokens.length} tokens${input.truncated ? ` (cut to ${input.bound})` : ""}`;
    box.append(el("h3", { text: title }), el("p", { class: "tokrow", "data-input": input.name }, ...chips));
    if (input.segments && input.segments.some((s) => s)) {
      box.append(el("p", { class: "note", text: trace().family === "qa"
        ? "Blue-edged tokens are the context (segment B, 1); the others the question (segment A, 0)."
        : "Blue-edged tokens are sentence B (segment 1); the others sentence A (segment 0)." }));
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
  const parts = [`token embedding${e.token_scale !== 1 ? ` × √d_model (${fmt(e.token_scale, 2)})` : ""}`];
  if (pos) parts.push(pos.kind === "sinusoidal" ? "positional encoding" : "learned position embedding");
  if (e.segment) parts.push("segment embedding");
  $("emb-formula").textContent = `input of layer 1 = ${e.layer_norm ? "LayerNorm(" : ""}${parts.join(" + ")}${e.layer_norm ? ")" : ""}   (d_model = ${e.d_model})`;
  const maps = [["token embedding" + (e.token_scale !== 1 ? " × scale" : ""), e.token]];
  if (pos) maps.push([pos.kind === "sinusoidal" ? "positional encoding rows" : "learned position rows", pos.rows]);
  if (e.segment) maps.push(["segment embedding rows", e.segment]);
  maps.push([e.layer_norm ? "sum, after LayerNorm" : "sum (what layer 1 reads)", e.sum]);
  const width = Math.max(300, Math.floor(($("emb-maps").clientWidth || 900) / Math.min(2, maps.length)) - 20);
  $("emb-maps").replaceChildren(...maps.map(([caption, a]) => {
    const canvas = el("canvas", { "data-map": caption });
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
    $("pe-note").textContent = pos.kind === "sinusoidal"
      ? `PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)); rows: positions 0-${table.rows - 1}, columns: dimensions. Position ${pos.positions[S.pos]} (token "${tokens[S.pos]}") is outlined in orange; the other tokens' rows in blue.`
      : `Learned position embeddings: one trained row per position (rows: the positions of this text). Position ${pos.positions[S.pos]} is outlined in orange.`;
    const labels = Array.from({ length: table.rows }, (_, i) => `pos ${i}`);
    heatmap($("pe-map"), table, {
      rowLabels: labels, rows: rowsOf, strongRow: rowsOf[S.pos], cellH: Math.max(2, Math.min(16, Math.floor(400 / table.rows))),
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
  const q = tokensOf(a.query, Tq);
  S.query = Number(fillSelect($("pick-query"), q.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.query, Tq - 1)));
}

function renderHead() {
  const any = hasAttention();
  $("no-attention").hidden = any;
  $("head-steps").hidden = !any;
  $("head-pickers").hidden = !any;
  if (!any) return;
  setupHeadPickers();
  const a = attention();
  if (!a) return;
  const h = S.head;
  const W = mat(a.weights, h);
  const Tq = W.rows;
  const Tk = W.cols;
  const qt = tokensOf(a.query, Tq);
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
    $("qkv-note").textContent = lstm
      ? "The decoder state s_t is the query; the encoder outputs h_i are the keys and the values (rows: tokens, columns: dimensions)."
      : `Q = X W^Q, K = X W^K, V = X W^V, split into ${a.num_heads} heads of d_k = ${a.d_head}; shown: head ${h} (rows: tokens, columns: its dimensions).`;
    const caps = lstm ? ["s_t (decoder states: queries)", "h_i (encoder outputs: keys)", "h_i (encoder outputs: values)"]
      : ["Q (queries)", "K (keys)", "V (values)"];
    qkv.replaceChildren(...[[caps[0], a.q, qt, qi], [caps[1], a.k, kt], [caps[2], a.v, kt]].map(([cap, x, labels, strong]) => {
      const c = el("canvas", { "data-map": cap });
      const m = mat(x, h);
      heatmap(c, m, { ...small, rowLabels: labels, strongRow: strong, tip: (i, j) => `${labels[i]} · dim ${j}: ${fmt(m.get(i, j))}` });
      return figure(cap, c);
    }));
  } else {
    $("qkv-note").textContent = lstm
      ? "The decoder state s_t is the query; the encoder outputs h_i are the keys and the values. Shown: their lengths (norms)."
      : `Q = X W^Q, K = X W^K, V = X W^V, split into ${a.num_heads} heads of d_k = ${a.d_head}. This trace keeps each vector's length (norm) only (a large model: the full matrices would make the page too big).`;
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
  $("scores-note").textContent = Sc ? "" : "The scores of this layer are not stored (the page would be over its size budget: see the notes above); pick layer 1 to see a layer's scores.";
  $("scores-map").hidden = !Sc;
  const pick = (i) => { S.query = i; renderHead(); };
  const tip = (name, m) => (i, j) => `${qt[i]} → ${kt[j]}\n${name} ${fmt(m.get(i, j), 4)}${masked(i, j) ? " (masked)" : ""}`;
  const common = { rowLabels: qt, colLabels: kt, strongRow: qi, text: true, pick };
  if (Sc) heatmap($("scores-map"), Sc, { ...common, scale: "div", masked, tip: tip("score", Sc) });
  const kinds = a.mask.kinds || [];
  const says = [];
  if (kinds.includes("padding")) says.push("padding mask: [PAD] keys are hidden from every query");
  if (kinds.includes("look_ahead")) says.push("look-ahead mask: a query sees only keys at or before its position (no peeking at the future)");
  if (!kinds.length) says.push("no mask: every query may attend to every key");
  $("mask-note").textContent = `${says.join("; ")}. Green ✓ = may attend, dark ✗ = masked: a very negative number is added to its score, so softmax gives it 0.`;
  heatmap($("mask-map"), M, { ...common, scale: "mask", text: "mask", tip: (i, j) => `${qt[i]} → ${kt[j]}: ${M.get(i, j) ? "may attend" : "masked"}` });
  heatmap($("weights-map"), W, { ...common, scale: "seq", max: 1, tip: tip("weight", W) });
  // e. the weighted sum for the chosen query
  const V = a.v ? mat(a.v, h) : null;
  const dims = V ? Math.min(6, V.cols) : 0;
  const vn = vec(a.v_norms, h);
  const head = ["key", "score", "mask", "weight α", "‖v‖", "α·‖v‖"];
  for (let d = 0; d < dims; d++) head.push(`α·v[${d}]`);
  const rows = kt.map((k, j) => {
    const w = W.get(qi, j);
    const cells = [k, Sc ? fmt(Sc.get(qi, j)) : "—", masked(qi, j) ? "✗" : "✓", fmt(w), fmt(vn[j]), fmt(w * vn[j])];
    for (let d = 0; d < dims; d++) cells.push(fmt(w * V.get(j, d)));
    return { cells, cls: masked(qi, j) ? "masked" : null };
  });
  const sumW = kt.reduce((s, _, j) => s + W.get(qi, j), 0);
  const outNorm = vec(a.head_out_norms, h)[qi];
  if (V) {
    const total = ["= Σ α_j v_j", "", "", fmt(sumW), "", ""];
    for (let d = 0; d < dims; d++) total.push(fmt(kt.reduce((s, _, j) => s + W.get(qi, j) * V.get(j, d), 0)));
    rows.push({ cells: total, cls: "chosen" });
    if (a.head_out) {
      const O = mat(a.head_out, h);
      const got = ["head output (captured)", "", "", "", "", ""];
      for (let d = 0; d < dims; d++) got.push(fmt(O.get(qi, d)));
      rows.push({ cells: got });
    }
  } else {
    rows.push({ cells: ["Σ", "", "", fmt(sumW), "", ""], cls: "chosen" });
  }
  tableRows($("query-table"), head, rows);
  $("sum-formula").textContent = lstm
    ? "c_t = Σ_i α_t,i h_i: the context vector, the encoder outputs weighted by the attention distribution"
    : "attention value = Σ_j α_j v_j (softmax(QK^T/√d_k) V, one row): the values weighted by the attention distribution";
  const out = a.output_norms ? `; after concatenating the ${a.num_heads} heads and W^O: ‖output‖ = ${fmt(vec(a.output_norms)[qi])}` : "";
  $("head-out").textContent = `‖head ${h} output‖ = ${fmt(outNorm)} for "${qt[qi]}"${out}`;
  const d = trace().dropout || {};
  $("dropout-note").textContent = `dropout: off at inference (eval mode)${d.p ? `; during training p = ${d.p} of these weights were zeroed` : ""}.`;
  markThumb();
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

// ---------------------------------------------------------------------------- 5 residual
function renderResidual() {
  const layers = [];
  stacks().forEach((s) => s.layers.forEach((l) => { if (l.residual) layers.push([s, l]); }));
  $("res-none").hidden = layers.length > 0;
  $("res-body").hidden = !layers.length;
  if (!layers.length) return;
  const [s0] = layers[0];
  const T = arr(layers[0][1].residual.input).shape[0];
  // tokens of the stack shown first (a seq2seq has two streams: encoder then decoder)
  const stackNames = [...new Set(layers.map(([s]) => s.name))];
  const tokenSets = Object.fromEntries(stackNames.map((n) => {
    const s = stacks().find((x) => x.name === n);
    const len = arr(s.layers[0].residual.input).shape[0];
    return [n, tokensOf(s.input, len)];
  }));
  const first = tokenSets[s0.name];
  S.resTok = Number(fillSelect($("res-token"), first.map((t, i) => [i, `${i}: ${t}`]), Math.min(S.resTok, T - 1)));
  const norm = s0.norm_first
    ? "pre-norm (GPT): x + Sublayer(LayerNorm(x)); the stream itself is normalised only at the end"
    : "post-norm (the paper, BERT): LayerNorm(x + Sublayer(x)) after each sublayer";
  $("res-note").textContent = `The residual stream: each token's vector ‖x‖ (its length) entering each layer and after each sublayer's Add & Norm, ${norm}. The FFN is position-wise: FFN(x) = max(0, x W1 + b1) W2 + b2 (ReLU; GELU in BERT/GPT).`;
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
      const name = { attention: "attention", cross_attention: "cross-attention", ffn: "FFN" }[sub.name] || sub.name;
      stages.push({ label: `${s.name} ${l.index} ${name}`, stack: s.name, tok: pick(sub.after), mean: mean(sub.after) });
      rows.push({ cells: [`${s.name} layer ${l.index}`, name,
        i === null ? "" : fmt(pick(sub.sublayer)), i === null ? "" : fmt(pick(sub.after)), fmt(mean(sub.after)),
        sub.name === "ffn" && active && i !== null ? pct(active[i]) : ""] });
    }
  }
  tableRows($("res-table"), ["layer", "sublayer", "‖sublayer(x)‖", "‖stream after Add & Norm‖", "mean over tokens", "FFN units > 0"], rows);
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
}

// ---------------------------------------------------------------------------- 6 family views
const FAMILY_TITLE = {
  classifier: "6 · Classifier: pooled vector and class probabilities · 분류",
  lm: "6 · GPT: the next token, one step at a time · 다음 토큰 예측",
  seq2seq: "6 · Decoding: the alignment at each step · 디코딩과 정렬",
  mlm: "6 · BERT: filling in [MASK] · 마스크드 언어 모델",
  bilm: "6 · ELMo's biLM: both directions and the layer mix · 양방향 언어 모델",
  tag: "6 · Tagging: a label for every word · 개체명 인식",
  qa: "6 · Question answering: the answer span · 질의응답",
};

function renderFamily() {
  const t = trace();
  const v = t.view || {};
  $("family-title").textContent = FAMILY_TITLE[t.family] || "6 · Output";
  for (const f of ["classifier", "lm", "seq2seq", "mlm", "bilm", "tag", "qa"]) $(`fam-${f}`).hidden = t.family !== f;
  $("fam-elmo").hidden = !v.elmo;
  if (t.family === "classifier") renderClassifier(v);
  else if (t.family === "lm") renderLM(v, true);
  else if (t.family === "seq2seq") renderSeq2Seq(v, true);
  else if (t.family === "mlm") renderMLM(v);
  else if (t.family === "bilm") renderBiLM(v);
  else if (t.family === "tag") renderTag(v);
  else if (t.family === "qa") renderQA(v);
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
  $("qa-note").textContent = `Question: "${v.question}". The model reads [CLS] question [SEP] context [SEP] (segments A and B)${v.windows > 1 ? `; the context is read in ${v.windows} windows, this is window ${v.window + 1}` : ""}. Start / end probability = softmax of the start / end logits over the positions; the answer is the span i ≤ j of context tokens with the largest start_logit[i] + end_logit[j] (tokens ${a.start_token}-${a.end_token}, outlined).`;
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
  $("cls-note").textContent = `probabilities = softmax(logits / T), T = ${fmt(v.temperature, 3)}${v.temperature !== 1 ? " (the run's calibrated temperature)" : ""}; logits: ${v.logits.map((x) => fmt(x)).join(", ")}`;
  const pooled = v.pooled ? arr(v.pooled) : null;
  $("pool-box").hidden = !pooled;
  const how = { mean: "the mean of the last layer's token vectors", max: "the max over tokens", cls: "the [CLS] token's last-layer vector", last: "the last token's vector", pooler: "BERT's pooler: tanh(W h_[CLS] + b)", "n-grams": "a bag of n-grams (no vector)" };
  $("pool-note").textContent = `pooling: ${v.pooling} — ${how[v.pooling] || v.pooling}${pooled ? `; ${pooled.shape[0]} numbers, what the linear head nn.Linear(d, ${v.labels.length}) reads` : ""}.`;
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
  $("lm-note").textContent = `${exact ? "" : `Renormalised over the ${stored} most likely tokens this trace stores (they hold ${pct(mass)} at temperature 1): approximate. `}softmax(logits / temperature)${topk ? `, only the ${topk} best kept (top-k)` : ""}${temp === 0 ? "; temperature 0 = greedy: the most likely token" : ""}. Entropy at temperature 1: ${fmt(step.entropy)} nats. Generated with temperature ${v.temperature}, top-k ${v.top_k || "off"}${v.seed !== null && v.seed !== undefined ? `, seed ${v.seed}` : ""}.`;
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
  $("s2s-step-label").textContent = step ? `step ${step.step} of ${steps.length}: "${showTok(step.chosen.token)}"` : "";
  const sc = v.score ? `; score function ${v.score.name}: ${v.score.formula}` : "";
  $("s2s-note").textContent = `Rows: output tokens, columns: source tokens; row t is where the decoder looked while producing token t (${v.alignment ? "Transformer: the last layer's cross-attention, mean over heads; LSTM: α_t" : "no attention"})${sc}. The current step is outlined.`;
  if (v.alignment) {
    const A = mat(v.alignment);
    const rows = Array.from({ length: A.rows }, (_, i) => showTok(v.output_tokens[i] ?? `#${i}`));
    const cols = Array.from({ length: A.cols }, (_, j) => showTok(source.tokens[j] ?? `#${j}`));
    heatmap($("s2s-align"), A, { rowLabels: rows, colLabels: cols, scale: "seq", max: 1, text: true, strongRow: S.s2sStep - 1,
      tip: (i, j) => `${rows[i]} ← ${cols[j]}: ${fmt(A.get(i, j))}`, pick: (i) => { S.s2sStep = i + 1; renderSeq2Seq(v, false); } });
  }
  $("s2s-align").hidden = !v.alignment;
  if (step) {
    bars($("s2s-bars"), step.top.map((c) => ({
      label: showTok(c.token), value: c.probability, text: pct(c.probability), chosen: c.id === step.chosen.id,
    })));
  } else $("s2s-bars").replaceChildren();
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

function renderMLM(v) {
  const box = $("mlm-masks");
  const tokens = trace().inputs[0].tokens;
  box.replaceChildren(...(v.masks || []).map((m, k) => {
    const context = tokens.map((t, i) => (i === m.position ? `[${showTok(t)}]` : showTok(t))).join(" ");
    const bx = el("div", { class: "bars" });
    const best = m.top.length ? m.top[0].probability : 1;
    bars(bx, m.top.map((c, i) => ({ label: showTok(c.token), value: c.probability / best, text: pct(c.probability), chosen: i === 0 })));
    return el("div", { class: "mask-box", "data-position": m.position },
      el("h3", { text: `[MASK] ${k + 1} at position ${m.position}` }), el("p", { class: "note", text: context }), bx);
  }));
  if (!(v.masks || []).length) box.append(el("p", { class: "note", text: "The text has no [MASK] token: write [MASK] where BERT should fill in a word." }));
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

// ---------------------------------------------------------------------------- wiring
// A served page for a text the run refused (no trace): the form with the text, and why.
function renderRefused(api) {
  $("ask").hidden = false;
  $("fixed-note").hidden = true;
  $("ask-text").value = api.text || "";
  $("ask-text").dataset.filled = "1";
  $("ask-pair").value = api.pair || "";
  $("ask-pair").hidden = !(api.pairs || api.pair);
  if (api.family === "qa") $("ask-pair").placeholder = "context · 지문";
  $("ask-beam-label").hidden = api.family !== "seq2seq";
  $("ask-steps-label").hidden = api.family !== "lm";
  $("model-line").textContent = api.family ? `${api.family} run` : "";
  $("toc").hidden = true;
  for (const card of document.querySelectorAll("main > section.card")) card.hidden = true;
  showError(`the run refused this text: ${api.error}`);
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
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
  document.body.dataset.ready = "true";
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

async function ask(event) {
  event.preventDefault();
  const api = PAYLOAD.api;
  const button = $("ask-btn");
  if (!api || button.disabled) return;
  const body = { model: api.model, text: $("ask-text").value };
  if (!$("ask-pair").hidden && $("ask-pair").value) body.pair = $("ask-pair").value;
  const family = PAYLOAD.traces.length ? trace().family : api.family;
  if (family === "seq2seq") body.beam = Number($("ask-beam").value) || 1;
  if (family === "lm") body.max_new_tokens = Number($("ask-steps").value) || 1;
  button.disabled = true;
  showError("");
  $("ask-status").textContent = "running the model…";
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
    $("ask-status").textContent = "";
    showError(err.message);
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
  on("hv-layer", "change", () => { S.hv = $("hv-layer").value; renderHeadView(); });
  on("res-token", "change", () => { S.resTok = Number($("res-token").value); renderResidual(); });
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
  wire();
  const fontReady = document.fonts ? document.fonts.load('12px "attnkit-ko"', "한글") : null;
  const later = new Promise((resolve) => setTimeout(resolve, 1500));
  await Promise.race([fontReady, later]).catch(() => null);
  try {
    if (!PAYLOAD.traces.length && PAYLOAD.api && PAYLOAD.api.error) renderRefused(PAYLOAD.api);
    else render();
  } catch (err) {
    showError(`the page could not draw this trace: ${err.message}`);
    document.body.dataset.ready = "error";
    throw err;
  }
}

start();
