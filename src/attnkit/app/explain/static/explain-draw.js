// attnkit explain, draw: colours, heatmaps and their legends, SVG axes, bars.
// One of the page's script files, joined in a fixed order into its one inline script
// (page.py SCRIPTS: base, draw, input, attention, residual, families, main): they
// share one top-level scope.

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
