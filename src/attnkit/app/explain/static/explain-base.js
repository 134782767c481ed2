// attnkit explain: the explorer page. Plain JavaScript, no framework, no network (the
// served page may ask its own server for a new text). It reads the trace(s) embedded in
// its "trace-data" element (layout: attnkit.app.explain.schema) and draws every panel from
// those numbers: nothing is recomputed here except what a control asks for (a weighted
// sum from the captured weights and values; the next-token bars at another temperature).
// The script is several files (static/explain-*.js), joined in a fixed order into the
// page's one inline script (page.py SCRIPTS: base, draw, input, attention, residual,
// families, main), so they share one top-level scope. This first one holds the state, the
// numbers' decoding, the DOM and language helpers and the trace's lookups.
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
