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
  shMode: "soft", beta: 1, // section 3's soft / hard attention at inverse temperature β
  emb: 0, pos: 0, // section 2
  hv: "0.0.0", hvHeads: null, // section 4's head view
  resTok: 0, anNorm: 0, anTok: 0, anStack: null, // section 5
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
// The PNGs' colour maps (attnkit.runtime.viz, matplotlib): "viridis" for weights and other
// values >= 0 (0..max), "RdBu" for signed values (-max..max: the positional encoding, -1..1).
// 256 colours each, as matplotlib's tables, looked up the way matplotlib does (floor(t * 256)).
const LUT = {
  viridis: (
  "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769" +
  "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a" +
  "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85" +
  "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b" +
  "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d" +
  "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e" +
  "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e" +
  "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d" +
  "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88" +
  "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81" +
  "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74" +
  "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863" +
  "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d" +
  "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32" +
  "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a" +
  "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725"
  ),
  RdBu: (
  "67001f6a011f6d02207003207304217605217906227c07227f0823810823840924870a248a0b258d0c25900d26930e26" +
  "960f279910279c11279f1228a21328a51429a81529ab162aae172ab1182bb3192cb41c2db61f2eb72230b82531ba2832" +
  "bb2a34bd2d35be3036bf3338c13639c2383ac43b3cc53e3dc6413ec84440c94741cb4942cc4c44ce4f45cf5246d05548" +
  "d25849d35a4ad55d4cd6604dd7634fd86551da6853db6b55dc6e57dd7059de735cdf765ee17860e27b62e37e64e48066" +
  "e58368e6866ae8896ce98b6eea8e70eb9172ec9374ee9677ef9979f09c7bf19e7df2a17ff3a481f4a683f5a886f5aa89" +
  "f5ac8bf6af8ef6b191f6b394f7b596f7b799f7b99cf8bb9ef8bda1f8bfa4f9c2a7f9c4a9f9c6acfac8affacab1fbccb4" +
  "fbceb7fbd0b9fcd3bcfcd5bffcd7c2fdd9c4fddbc7fddcc9fdddcbfcdecdfcdfcffce0d0fce2d2fbe3d4fbe4d6fbe5d8" +
  "fbe6dafae7dcfae8defae9dffaeae1f9ebe3f9ede5f9eee7f9efe9f9f0ebf8f1edf8f2eff8f3f0f8f4f2f7f5f4f7f6f6" +
  "f6f7f7f5f6f7f3f5f6f2f5f6f0f4f6eff3f5edf2f5ecf2f5eaf1f5e9f0f4e7f0f4e6eff4e4eef4e3edf3e1edf3e0ecf3" +
  "deebf2ddebf2dbeaf2dae9f2d8e9f1d7e8f1d5e7f1d4e6f1d2e6f0d1e5f0cfe4efcce2efcae1eec7e0edc5dfecc2ddec" +
  "c0dcebbddbeabbdaeab8d8e9b6d7e8b3d6e8b1d5e7aed3e6acd2e5a9d1e5a7d0e4a5cee3a2cde3a0cce29dcbe19bc9e0" +
  "98c8e096c7df93c6de90c4dd8dc2dc8ac0db87beda84bcd981bad87eb8d77bb6d678b4d575b2d471b0d36eaed26bacd1" +
  "68abd065a9cf62a7ce5fa5cd5ca3cb59a1ca569fc9529dc84f9bc74c99c64997c54695c44393c34291c2408fc13f8ec0" +
  "3e8cbf3c8abe3b88be3a87bd3885bc3783bb3681ba3480b9337eb8327cb7307ab62f79b52e77b52c75b42b73b32a71b2" +
  "2870b1276eb0266caf246aae2369ad2267ac2065ab1f63a81e61a51d5fa21c5c9f1b5a9c1a5899195696185493175290" +
  "15508d144e8a134c8712498411478110457e0f437b0e41790d3f760c3d730a3b7009386d08366a073467063264053061"
  ),
};
const RGB = Object.fromEntries(Object.entries(LUT).map(([name, hex]) =>
  [name, Array.from({ length: 256 }, (_, i) => [0, 2, 4].map((k) => parseInt(hex.substr(6 * i + k, 2), 16)))]));
function lutRGB(name, t) {
  const x = Number.isFinite(t) ? Math.max(0, Math.min(1, t)) : 0;
  return RGB[name][Math.min(255, Math.floor(x * 256))];
}
const rgbText = ([r, g, b]) => `rgb(${r},${g},${b})`;
// sequential, t in 0..1 (value / max): viridis; diverging, t in -1..1 (value / max): RdBu
function seqColor(t) {
  return rgbText(lutRGB("viridis", t));
}
function divColor(t) {
  return rgbText(lutRGB("RdBu", (Math.max(-1, Math.min(1, t)) + 1) / 2));
}
// dark text on a light cell, white on a dark one
function inkOn(color) {
  const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(color);
  if (!m) return /^#(?:49|[0-3])/.test(color) ? "#fff" : "#1d2330";
  const [r, g, b] = m.slice(1).map(Number);
  return 0.299 * r + 0.587 * g + 0.114 * b < 140 ? "#fff" : "#1d2330";
}
const HEAD_COLORS = ["#d9480f", "#1c7ed6", "#2b8a3e", "#ae3ec9", "#f08c00", "#0c8599",
  "#c2255c", "#5c940d", "#364fc7", "#862e9c", "#e8590c", "#087f5b"];

// ---------------------------------------------------------------------------- heatmap
// Draw matrix m ({rows, cols, get}) on a canvas. opts: rowLabels, colLabels, scale
// ("seq" | "div" | "mask"), max, strongRow, strongCol, rows (highlighted row indices),
// masked(i, j), text (numbers in the cells when they fit), tip(i, j), pick(i, j), maxWidth,
// cell, cellH, minCell, minRow;
// axes: [rows, columns], what the rows and the columns are (each "text" or [en, ko]);
// legend: {title: "text" | [en, ko], max} or false for none. The colour range is the PNGs'
// (attnkit.runtime.viz): seq = viridis over 0..max, div = RdBu over -max..max; max is
// opts.max, else legend.max, else the largest |value| not masked (a legend.min is ignored).
// The axes and the colour bar are drawn beside the canvas (a .hm-legend element after it),
// never inside it; the canvases of a .model-view grid, or of any element marked
// data-legend-group, share one legend, after that element (the last canvas drawn sets it).
// Without axes or legend.title, the defaults of the canvas's id (HEATMAP_TEXT) are used.
const QK = [["queries", "쿼리"], ["keys", "키"]];
const HEATMAP_TEXT = {
  "pe-map": { axes: [["position", "위치"], ["dimension", "차원"]], title: ["PE value", "포지셔널 인코딩 값"] },
  "scores-map": { axes: QK, title: ["attention score", "어텐션 스코어"] },
  "mask-map": { axes: QK, title: ["mask", "마스크"] },
  "weights-map": { axes: QK, title: ["attention weight α", "어텐션 가중치 α"] },
  "model-view": { axes: QK, title: ["attention weight", "어텐션 가중치"] },
  "sf-maps": { axes: [["one query, each score function", "쿼리 하나, 스코어 함수마다"], ["keys (source tokens)", "키(입력 토큰)"]],
    title: ["attention weight", "어텐션 가중치"] },
  "s2s-align": { axes: [["output tokens (decoder)", "출력 토큰(디코더)"], ["source tokens (encoder)", "입력 토큰(인코더)"]],
    title: ["attention weight", "어텐션 가중치"] },
  "pool-map": { axes: [["the pooled vector (one row)", "풀링된 벡터(한 행)"], ["dimension", "차원"]], title: ["value", "값"] },
  "qa-map": { axes: [["start / end", "시작 / 끝"], ["token", "토큰"]], title: ["probability", "확률"] },
  "elmo-map": { axes: [["biLM layer j", "biLM 층 j"], ["token", "토큰"]], title: ["‖γ softmax(s)_j h_j‖", "‖γ softmax(s)_j h_j‖"] },
};
const TOKEN_DIMS = [["token", "토큰"], ["dimension", "차원"]];
const both = (x) => (Array.isArray(x) ? x : [x, x]);
// a legend's number: 3 significant digits or so
function fmtRange(x) {
  const a = Math.abs(x);
  return a === 0 ? "0" : a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : a >= 0.01 ? x.toFixed(2) : x.toExponential(1);
}

// The legend of a heatmap, an element: what its rows and columns are, and its colour bar
// with the value range. spec: {scale, min, max, title, axes, masked}.
function colorLegend(spec) {
  const box = el("div", { class: "hm-legend", "data-scale": spec.scale });
  if (spec.axes) {
    const [r, c] = spec.axes.map(both);
    const en = [r[0] ? `rows: ${r[0]} ↓` : "", c[0] ? `columns: ${c[0]} →` : ""].filter(Boolean).join(" · ");
    const ko = [r[1] ? `행: ${r[1]} ↓` : "", c[1] ? `열: ${c[1]} →` : ""].filter(Boolean).join(" · ");
    box.append(el("span", { class: "hm-axes" }, tr(en, ko)));
  }
  const bar = el("span", { class: "cbar", "data-min": spec.min, "data-max": spec.max });
  const title = both(spec.title || ["value", "값"]);
  bar.append(el("span", { class: "cbar-title" }, tr(title[0], title[1])));
  const swatch = (color, text, en, ko) => {
    const i = el("i", { class: "cbar-swatch" });
    i.style.background = color;
    return el("span", { class: "cbar-key" }, i, el("span", { class: "cbar-num", text }), " ", tr(en, ko));
  };
  if (spec.scale === "mask") {
    bar.append(swatch("#d3f9d8", "1", "✓ may attend", "✓ 어텐션 가능"), swatch("#495057", "0", "✗ masked", "✗ 마스킹됨"));
  } else {
    const grad = el("span", { class: "cbar-grad" });
    const color = spec.scale === "seq" ? (t) => seqColor(t) : (t) => divColor(2 * t - 1);
    grad.style.backgroundImage = `linear-gradient(to right, ${Array.from({ length: 11 }, (_, k) => color(k / 10)).join(", ")})`;
    bar.append(el("span", { class: "cbar-num cbar-lo", text: fmtRange(spec.min) }), grad,
      el("span", { class: "cbar-num cbar-hi", text: fmtRange(spec.max) }));
    if (spec.masked) bar.append(swatch("#ced4da", "", "masked", "마스킹됨"));
  }
  box.append(bar);
  return box;
}

// Put `legend` after `anchor` (a canvas, or the grid its canvases share), replacing the
// legend drawn there before.
function placeLegend(anchor, legend) {
  const old = anchor.nextElementSibling;
  if (old && old.classList.contains("hm-legend")) old.replaceWith(legend);
  else anchor.after(legend);
}

function heatmap(canvas, m, opts = {}) {
  const ctx = canvas.getContext("2d");
  const font = '12px "Noto Sans KR", "NanumGothic", system-ui, "attnkit-ko", "attnkit-ko-all", sans-serif';
  ctx.font = font;
  const rowLabels = opts.rowLabels || [];
  const colLabels = opts.colLabels || [];
  const maxWidth = opts.maxWidth || Math.max(280, (canvas.parentElement?.clientWidth || 900) - 10);
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
  const scale = opts.scale || "div";
  let max = opts.max ?? (opts.legend ? opts.legend.max : undefined);
  if (max === undefined || max === null) {
    max = 1e-12;
    for (let i = 0; i < m.rows; i++) {
      for (let j = 0; j < m.cols; j++) {
        const v = Math.abs(m.get(i, j));
        if (Number.isFinite(v) && !(opts.masked && opts.masked(i, j))) max = Math.max(max, v);
      }
    }
  }
  const min = scale === "div" ? -max : 0;
  const colorOf = (i, j, v) => {
    if (opts.masked && opts.masked(i, j)) return "#ced4da";
    if (scale === "mask") return v ? "#d3f9d8" : "#495057";
    if (scale === "seq") return seqColor(v / max);
    return divColor(v / max);
  };
  const anyMasked = !!opts.masked && Array.from({ length: m.rows }, (_, i) => i).some((i) =>
    Array.from({ length: m.cols }, (_, j) => j).some((j) => opts.masked(i, j)));
  for (let i = 0; i < m.rows; i++) {
    for (let j = 0; j < m.cols; j++) {
      ctx.fillStyle = colorOf(i, j, m.get(i, j));
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
        ctx.fillStyle = inkOn(colorOf(i, j, v));
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
    ctx.strokeStyle = "rgba(29,35,48,0.6)";
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
  // where the cells are and the colour range (read by the tests, and by anyone curious)
  Object.assign(canvas.dataset, { scale, vmin: min, vmax: max, x0: labelW, y0: labelH, cw, ch, nrows: m.rows, ncols: m.cols });
  // the legend goes after the canvas (or its grid): now, or once the canvas is placed (a
  // canvas drawn before it is appended, e.g. inside figure(), when this render is done)
  const place = () => {
    const grid = canvas.closest(".model-view, [data-legend-group]");
    const text = HEATMAP_TEXT[grid ? grid.id : canvas.id] || {};
    const legend = colorLegend({
      scale, min, max, masked: anyMasked,
      title: (opts.legend && opts.legend.title) || text.title || (scale === "div" ? ["value (signed)", "값(부호 있음)"] : ["value", "값"]),
      axes: opts.axes || text.axes || (m.cols === 1 ? [TOKEN_DIMS[0], ["its length ‖·‖", "벡터의 길이 ‖·‖"]] : TOKEN_DIMS),
    });
    legend.dataset.for = grid ? grid.id : canvas.id || canvas.dataset.map || "";
    placeLegend(grid || canvas, legend);
  };
  canvas.dataset.legend = opts.legend === false ? "off" : "on";
  if (opts.legend !== false) {
    if (canvas.isConnected) place();
    else queueMicrotask(() => { if (canvas.isConnected) place(); });
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

// A captioned canvas; caption: "text" or [en, ko].
function figure(caption, canvas) {
  const cap = Array.isArray(caption) ? el("figcaption", {}, tr(caption[0], caption[1])) : el("figcaption", { text: caption });
  return el("figure", {}, cap, canvas);
}

// Axes of an SVG chart (e.g. section 5's residual chart): the y axis at x from y = bottom
// (value min) up to y = top (value max) with `ticks` numbered ticks, the x axis from x to
// right at y = bottom, and each axis's title ("text" or [en, ko]: both written, the page's
// language shows one). Returns the group it appended to chart.
function svgAxes(chart, { x, top, bottom, right, min = 0, max, ticks = 4, yTitle, xTitle }) {
  const g = svg("g", { class: "axes" });
  g.append(svg("line", { x1: x, y1: top, x2: x, y2: bottom, stroke: "#adb5bd" }),
    svg("line", { x1: x, y1: bottom, x2: right, y2: bottom, stroke: "#adb5bd" }));
  for (let k = 0; k <= ticks; k++) {
    const y = bottom - ((bottom - top) * k) / ticks;
    g.append(svg("line", { x1: x - 4, y1: y, x2: x, y2: y, stroke: "#adb5bd" }),
      svg("text", { x: x - 6, y: y + 3.5, "text-anchor": "end", "font-size": 10, fill: "#5b6475", class: "tick",
        text: fmtRange(min + ((max - min) * k) / ticks) }));
  }
  const title = (t, attrs) => {
    const [en, ko] = both(t);
    const node = svg("text", { "font-size": 11, fill: "#5b6475", class: "axis-title", ...attrs });
    node.append(svg("tspan", { "data-l": "en", text: en }), svg("tspan", { "data-l": "ko", text: ko }));
    return node;
  };
  if (yTitle) g.append(title(yTitle, { x: Math.max(2, x - 40), y: Math.max(11, top - 10) }));
  if (xTitle) g.append(title(xTitle, { x: right, y: bottom - 6, "text-anchor": "end" }));
  chart.append(g);
  return g;
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
    $("ask-target").hidden = t.family !== "seq2seq";
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

// A served page of a classify, mlm or tag run: the text padded to a length, asked anew
// (/v1/explain's pad_to), to see the padding mask at work.
function renderPadForm() {
  const t = trace();
  const form = $("pad-form");
  form.hidden = !PAYLOAD.api || !["classifier", "mlm", "tag", "seq2seq"].includes(t.family);
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
  $("ask-target").value = api.target || "";
  $("ask-target").hidden = api.family !== "seq2seq";
  $("ask-beam-label").hidden = api.family !== "seq2seq";
  $("ask-steps-label").hidden = api.family !== "lm";
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
  const family = PAYLOAD.traces.length ? trace().family : api.family;
  if (family === "seq2seq") body.beam = Number($("ask-beam").value) || 1;
  if (family === "lm") body.max_new_tokens = Number($("ask-steps").value) || 1;
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
