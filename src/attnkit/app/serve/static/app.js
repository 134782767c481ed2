// attnkit web page: plain JavaScript, talks to the same server's /v1 API.
"use strict";

const $ = (id) => document.getElementById(id);
let MODELS = [];
let LIMITS = {};

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = data.error ? data.error.message : response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return data;
}

// Run an async action from a button: disable it meanwhile, report errors on the page.
function wire(buttonId, action) {
  const button = $(buttonId);
  const run = async (event) => {
    if (event) event.preventDefault();
    if (button.disabled) return; // still busy with the last one (e.g. Enter pressed twice)
    button.disabled = true;
    showError("");
    try {
      await action();
    } catch (err) {
      showError(err.message);
    } finally {
      button.disabled = false;
    }
  };
  button.addEventListener("click", run);
  return run;
}

function fillModels(endpoint) {
  const select = $(`${endpoint}-model`);
  const models = MODELS.filter((m) => m.endpoint === `/v1/${endpoint}`);
  select.replaceChildren(
    ...models.map((m) => new Option(`${m.name} (${m.arch}, ${m.dataset})`, m.name)),
  );
  $(endpoint).hidden = models.length === 0;
  return models;
}

const chosen = (endpoint) => MODELS.find((m) => m.name === $(`${endpoint}-model`).value);

// A word piece as shown: "##ing" continues the previous piece.
function tokenSpan(token) {
  const span = document.createElement("span");
  span.className = "tok";
  if (token.startsWith("##")) {
    span.classList.add("cont");
    token = token.slice(2);
  }
  span.textContent = token.replace(/^Ġ/, " ").replace(/^▁/, " ");
  return span;
}

// ------------------------------------------------------------------ classify
let attention = null; // {tokens, received: [layer][head][token]}

function drawAttention() {
  const box = $("classify-tokens");
  box.replaceChildren();
  if (!attention) return;
  const layer = Number($("attn-layer").value);
  const head = $("attn-head").value;
  const heads = attention.received[layer];
  const weights = attention.tokens.map((_, t) =>
    head === "mean" ? heads.reduce((s, h) => s + h[t], 0) / heads.length : heads[Number(head)][t],
  );
  const top = Math.max(...weights) || 1;
  attention.tokens.forEach((token, t) => {
    const span = tokenSpan(token);
    span.style.background = `rgba(217, 72, 15, ${(0.85 * weights[t]) / top})`;
    span.title = `${token}: ${weights[t].toFixed(3)}`;
    box.append(span);
  });
}

function setupAttentionPickers() {
  const layers = attention.received.length;
  const heads = attention.received[0].length;
  const layer = $("attn-layer");
  const head = $("attn-head");
  const keepLayer = Math.min(Number(layer.value || layers - 1), layers - 1);
  layer.replaceChildren(...[...Array(layers).keys()].map((l) => new Option(String(l), String(l))));
  layer.value = String(keepLayer);
  const keepHead = head.value || "mean";
  head.replaceChildren(
    new Option("mean", "mean"),
    ...[...Array(heads).keys()].map((h) => new Option(String(h), String(h))),
  );
  head.value = [...head.options].some((o) => o.value === keepHead) ? keepHead : "mean";
}

function classifyModelChanged() {
  const m = chosen("classify");
  $("classify-pair").hidden = !(m && m.pairs);
}

async function classify() {
  const m = chosen("classify");
  const body = { model: m.name, texts: [$("classify-text").value], attention: m.attention };
  if (m.pairs) body.pairs = [$("classify-pair").value];
  const data = await api("/v1/classify", body);
  const p = data.predictions[0];
  $("classify-label").textContent = p.label;
  $("classify-prob").textContent = `${(100 * p.probability).toFixed(1)}%`;
  $("classify-bar").style.width = `${100 * p.probability}%`;
  $("classify-result").hidden = false;
  attention = p.attention || null;
  $("classify-attn").hidden = !attention;
  if (attention) {
    setupAttentionPickers();
    drawAttention();
  }
}

// ------------------------------------------------------------------ translate
function drawAlignment(a) {
  const table = $("translate-align");
  const head = document.createElement("thead");
  const row = document.createElement("tr");
  row.append(document.createElement("th"));
  a.source.forEach((s) => {
    const th = document.createElement("th");
    th.textContent = s;
    row.append(th);
  });
  head.append(row);
  const body = document.createElement("tbody");
  a.output.forEach((o, i) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = o;
    tr.append(th);
    a.weights[i].forEach((w, j) => {
      const td = document.createElement("td");
      td.style.background = `rgba(217, 72, 15, ${w})`;
      td.title = `${o} → ${a.source[j]}: ${w.toFixed(3)}`;
      tr.append(td);
    });
    body.append(tr);
  });
  table.replaceChildren(head, body);
}

async function translate() {
  const m = chosen("translate");
  const data = await api("/v1/translate", {
    model: m.name,
    texts: [$("translate-text").value],
    beam: Number($("translate-beam").value) || 1,
    alignment: m.alignment,
  });
  $("translate-output").textContent = data.translations[0];
  $("translate-result").hidden = false;
  if (data.alignment) drawAlignment(data.alignment);
  else $("translate-align").replaceChildren();
}

// ------------------------------------------------------------------ chat
function say(who, text) {
  const p = document.createElement("p");
  p.className = who;
  const span = document.createElement("span");
  span.textContent = text;
  p.append(span);
  $("chat-log").append(p);
  $("chat-log").scrollTop = $("chat-log").scrollHeight;
}

async function chat() {
  const text = $("chat-text").value;
  if (!text.trim()) return;
  say("user", text);
  $("chat-text").value = "";
  const data = await api("/v1/chat", { model: chosen("chat").name, message: text });
  say("bot", data.answer);
}

// ------------------------------------------------------------------ generate (streamed)
async function generate() {
  const out = $("generate-output");
  const prompt = $("generate-prompt").value;
  out.textContent = prompt;
  const response = await fetch("/v1/generate", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      model: chosen("generate").name,
      prompt,
      max_new_tokens: Number($("generate-n").value) || Math.min(100, LIMITS.max_new_tokens || 100),
      temperature: Number($("generate-temp").value),
      top_k: Number($("generate-topk").value) || 0,
      stream: true,
    }),
  });
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    throw new Error(`${response.status}: ${data.error ? data.error.message : response.statusText}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += decoder.decode(value, { stream: true });
    const lines = pending.split("\n");
    pending = lines.pop();
    for (const line of lines) {
      if (!line) continue;
      const item = JSON.parse(line);
      if (item.token !== undefined) out.textContent += item.token;
      if (item.error) throw new Error(item.error.message);
    }
  }
}

// ------------------------------------------------------------------ tag, answer
async function tag() {
  const data = await api("/v1/tag", { model: chosen("tag").name, texts: [$("tag-text").value] });
  const r = data.results[0];
  const box = $("tag-output");
  box.replaceChildren();
  let last = 0;
  for (const e of r.entities) {
    box.append(document.createTextNode(r.text.slice(last, e.start)));
    const span = document.createElement("span");
    span.className = "ent";
    span.textContent = e.text;
    const sub = document.createElement("sub");
    sub.textContent = e.type;
    span.append(sub);
    box.append(span);
    last = e.end;
  }
  box.append(document.createTextNode(r.text.slice(last)));
}

async function answer() {
  const data = await api("/v1/answer", {
    model: chosen("answer").name,
    context: $("answer-context").value,
    question: $("answer-question").value,
  });
  $("answer-output").textContent = `${data.text}  (score ${data.score.toFixed(2)})`;
}

// ------------------------------------------------------------------ explain links
// Each explainable run links to its explorer page; the link carries the text typed in
// that run's card (when the card has it selected).
const CARD_TEXT = {
  "/v1/classify": "classify-text", "/v1/translate": "translate-text", "/v1/chat": "chat-text",
  "/v1/generate": "generate-prompt", "/v1/tag": "tag-text", "/v1/answer": "answer-question",
};
const CARD_PAIR = { "/v1/answer": "answer-context" }; // a qa run's explorer: the context too

function explainLinks() {
  const box = $("explain-links");
  const models = MODELS.filter((m) => m.explain);
  box.hidden = models.length === 0;
  for (const m of models) {
    const a = document.createElement("a");
    a.href = m.explain;
    a.className = "explain-link";
    a.dataset.model = m.name;
    a.textContent = `explain ${m.name}`;
    a.addEventListener("click", () => {
      const endpoint = m.endpoint ? m.endpoint.slice(4) : "";
      const select = $(`${endpoint}-model`);
      const input = $(CARD_TEXT[m.endpoint]);
      const text = select && select.value === m.name && input ? input.value.trim() : "";
      const second = $(CARD_PAIR[m.endpoint]);
      const pair = text && second ? second.value.trim() : "";
      const query = (text ? `?text=${encodeURIComponent(text)}` : "") + (pair ? `&pair=${encodeURIComponent(pair)}` : "");
      a.href = `${m.explain}${query}`;
    });
    box.append(" ", a);
  }
}

// ------------------------------------------------------------------ start
async function start() {
  try {
    const response = await fetch("/v1/models");
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const body = await response.json();
    MODELS = body.models;
    LIMITS = body.limits || {};
  } catch (err) {
    $("status").textContent = `could not reach the server · 서버에 연결하지 못했습니다: ${err.message}`;
    return;
  }
  if (LIMITS.max_new_tokens) {
    $("generate-n").max = String(LIMITS.max_new_tokens);
    $("generate-n").value = String(Math.min(100, LIMITS.max_new_tokens));
  }
  $("status").textContent = `${MODELS.length} model(s) · 모델 ${MODELS.length}개: ${MODELS.map((m) => m.name).join(", ")}`;
  for (const endpoint of ["classify", "translate", "chat", "generate", "tag", "answer"]) {
    fillModels(endpoint);
  }
  explainLinks();
  $("classify-model").addEventListener("change", classifyModelChanged);
  classifyModelChanged();
  $("attn-layer").addEventListener("change", drawAttention);
  $("attn-head").addEventListener("change", drawAttention);
  wire("classify-btn", classify);
  wire("translate-btn", translate);
  const send = wire("chat-btn", chat);
  $("chat-form").addEventListener("submit", send); // Enter in the input
  wire("generate-btn", generate);
  wire("tag-btn", tag);
  wire("answer-btn", answer);
  document.body.dataset.ready = "true"; // for the browser test
}

start();
