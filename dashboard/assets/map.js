// herd dashboard: the partition map, one cell per partition in id order,
// coloured by its owner (or by its checkpoint's age), drawn into an
// ImageData in one pass.
"use strict";

const NOBODY = 0xff9a9a9a; // ABGR: grey, a partition nobody runs
const NO_CHECKPOINT = 0xffe0e0e0;
// Checkpoint ages: up to 10 s, 1 min, 10 min, 1 h, older (ABGR).
const AGE_STEPS = [10e3, 60e3, 600e3, 3600e3];
const AGE_COLOURS = [0xff5ab45a, 0xff3cc8b4, 0xff28a0f0, 0xff2864e6, 0xff3c28b4];

function ageColour(a) {
  if (a === undefined || a === -1) return NO_CHECKPOINT;
  if (a === -2) return AGE_COLOURS[0];
  let k = 0;
  while (k < AGE_STEPS.length && a >= AGE_STEPS[k]) k++;
  return AGE_COLOURS[k];
}

// cellColour is the colour partition i is drawn in.
function cellColour(i) {
  if ($("colour").value === "age") return ageColour(ageOf(i));
  const k = liveOwner(i);
  return k < 0 ? NOBODY : S.colors[k];
}

// mismatches lists the partitions whose cell is not drawn in its colour
// (null until the page has drawn what it holds).
herdDash.mismatches = function () {
  if (!S || !S.geom || dirty) return null;
  const g = S.geom, cv = $("map");
  const px = new Uint32Array(cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data.buffer);
  const bad = [], off = Math.floor((g.c - 1) / 2);
  for (let i = 0; i < S.ids.length; i++) {
    const x = (i % g.cols) * g.c + off, y = Math.floor(i / g.cols) * g.c + off;
    if (px[y * cv.width + x] !== cellColour(i)) bad.push(S.ids[i]);
  }
  return bad;
};

function drawMapOrCells() {
  if (S.full || !S.geom || S.changed.length > 5000) drawMap();
  else drawCells(S.changed);
  S.full = false;
  S.changed = [];
}

// geometry is the map's layout: cell size c (pixels), cols, rows.
function geometry() {
  const n = Math.max(S.ids.length, 1);
  const w = Math.max(200, $("mapbox").clientWidth - 2);
  let c = Math.floor(Math.sqrt((w * 480) / n));
  c = Math.max(1, Math.min(28, c));
  const cols = Math.max(1, Math.floor(w / c));
  return { c, cols, rows: Math.ceil(n / cols) };
}

// colours returns a colour per partition: by owner through a table of
// the sessions' colours (a dead session's is grey), else one by one.
function colours() {
  const n = S.ids.length, out = new Uint32Array(n);
  if ($("colour").value === "age") {
    for (let i = 0; i < n; i++) out[i] = ageColour(ageOf(i));
    return out;
  }
  const lut = new Uint32Array(S.sessions.length + 1), owner = S.owner;
  lut[0] = NOBODY;
  for (let k = 0; k < S.sessions.length; k++) lut[k + 1] = S.alive[k] === 1 ? S.colors[k] : NOBODY;
  for (let i = 0; i < n; i++) out[i] = lut[owner[i] + 1];
  return out;
}

function drawMap() {
  const cv = $("map"), g = geometry(), n = S.ids.length;
  const w = g.cols * g.c, h = Math.max(g.rows * g.c, 1);
  if (cv.width !== w || cv.height !== h) { cv.width = w; cv.height = h; }
  S.geom = g;
  const ctx = cv.getContext("2d");
  const img = ctx.createImageData(w, h), px = new Uint32Array(img.data.buffer);
  const col = colours(), gap = g.c >= 6 ? 1 : 0, side = g.c - gap;
  if (g.c === 1) {
    px.set(col);
  } else if (side === 2) {
    for (let r = 0; r < g.rows; r++) {
      const y0 = r * g.c * w, first = r * g.cols, last = Math.min(first + g.cols, n);
      for (let i = first, o = y0; i < last; i++, o += g.c) { px[o] = col[i]; px[o + 1] = col[i]; }
      px.copyWithin(y0 + w, y0, y0 + (last - first) * g.c);
    }
  } else {
    // One row of pixels per row of cells, copied down the cell's height.
    for (let r = 0; r < g.rows; r++) {
      const y0 = r * g.c * w, first = r * g.cols, last = Math.min(first + g.cols, n);
      for (let i = first; i < last; i++) px.fill(col[i], y0 + (i - first) * g.c, y0 + (i - first) * g.c + side);
      for (let y = 1; y < side; y++) px.copyWithin(y0 + y * w, y0, y0 + (last - first) * g.c);
    }
  }
  ctx.putImageData(img, 0, 0);
  if (S.highlight >= 0) drawHighlight(ctx, g);
}

// drawCells redraws the cells of partitions idx on the drawn map.
function drawCells(idx) {
  const ctx = $("map").getContext("2d"), g = S.geom;
  const side = g.c - (g.c >= 6 ? 1 : 0);
  for (const i of idx) {
    const x = (i % g.cols) * g.c, y = Math.floor(i / g.cols) * g.c;
    ctx.clearRect(x, y, g.c, g.c);
    ctx.fillStyle = css(cellColour(i));
    ctx.fillRect(x, y, side, side);
  }
  if (S.highlight >= 0) drawHighlight(ctx, g);
}

function drawHighlight(ctx, g) {
  const i = S.highlight;
  ctx.lineWidth = 2;
  ctx.strokeStyle = "#000";
  ctx.strokeRect((i % g.cols) * g.c - 2, Math.floor(i / g.cols) * g.c - 2, g.c + 4, g.c + 4);
}

function describe(i) {
  const k = liveOwner(i), e = S.epoch[i] ? String(S.epoch[i]) : "none", a = ageOf(i);
  const ck = a === undefined ? "" : a === -1 ? "\nno checkpoint" : a === -2 ? "\ncheckpoint (age unknown)" : "\ncheckpoint " + fmtAge(a) + " old";
  if (k < 0) return `${S.ids[i]}\nnobody runs it: ${reason(i)}\nepoch ${e}${ck}`;
  const m = S.live.get(S.sessions[k]);
  return `${S.ids[i]}\nowner ${m.member} (session ${m.session})\nepoch ${e}${ck}`;
}

function hover(ev) {
  const tip = $("tip");
  if (!S || !S.geom) return;
  const r = $("map").getBoundingClientRect(), g = S.geom;
  const col = Math.floor((ev.clientX - r.left) / g.c), row = Math.floor((ev.clientY - r.top) / g.c);
  const i = row * g.cols + col;
  if (col < 0 || col >= g.cols || row < 0 || i >= S.ids.length) { tip.hidden = true; return; }
  tip.textContent = describe(i);
  tip.style.left = (ev.clientX - r.left + 14) + "px";
  tip.style.top = (ev.clientY - r.top + 14) + "px";
  tip.hidden = false;
}

function search() {
  if (!S) return;
  const id = $("search").value.trim(), i = indexOf(id);
  S.highlight = i === undefined ? -1 : i;
  S.full = true; // the old outline must go
  $("found").textContent = !id ? "" : i === undefined ? "no such partition" : describe(i).replace(/\n/g, " · ");
  schedule();
}

function initMap() {
  $("map").addEventListener("mousemove", hover);
  $("map").addEventListener("mouseleave", () => { $("tip").hidden = true; });
  $("search").addEventListener("input", search);
  $("colour").addEventListener("change", () => { if (S) { S.full = true; schedule(); } $("ageLegend").hidden = $("colour").value !== "age"; });
  addEventListener("resize", () => { if (S) S.full = true; schedule(); });
  const legend = $("ageLegend"), names = ["< 10 s", "< 1 min", "< 10 min", "< 1 h", "older"];
  legend.replaceChildren(...AGE_COLOURS.map((c, k) => { const s = el("span", names[k]); s.style.borderLeftColor = css(c); return s; }),
    (() => { const s = el("span", "no checkpoint"); s.style.borderLeftColor = css(NO_CHECKPOINT); return s; })());
}
