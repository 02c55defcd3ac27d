// herd dashboard: the page. It keeps one group's state from the server's
// events (a "state", then "delta"s) and draws it; it never writes.
"use strict";

const $ = (id) => document.getElementById(id);
const NOBODY = 0xff9a9a9a; // ABGR: grey, a partition nobody runs

// S is the group shown. owner[i] indexes sessions (-1: no session);
// live maps a live session to its member.
let S = null;
let source = null;
let dirty = false;
// herdDash is for tests and the curious: what is drawn, and when.
// mapDrawnAt is when the first map was drawn, in ms since navigation;
// renderMs how long the last redraw took.
// mismatches lists the partitions whose cell is not drawn in the colour
// of their owner.
const herdDash = { version: "", mapDrawnAt: 0, stateAt: 0, renderMs: 0, ownerOf: ownerOf, mismatches: mismatches };
window.herdDash = herdDash;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function setStatus(text, problem) {
  $("status").textContent = text;
  $("status").className = problem ? "problem" : "";
}

function currentGroup() {
  const m = /^#group=(.+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : "";
}

async function loadGroups() {
  const nav = $("groups");
  try {
    const r = await fetch("api/groups", { cache: "no-store" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.status);
    nav.replaceChildren();
    for (const g of body.groups) {
      const a = el("a", g);
      a.href = "#group=" + encodeURIComponent(g);
      a.dataset.group = g;
      nav.append(a);
    }
    if (!currentGroup() && body.groups.length === 1) location.hash = "#group=" + encodeURIComponent(body.groups[0]);
  } catch (e) {
    setStatus("listing the groups failed: " + e.message, true);
  }
  markCurrent();
}

function markCurrent() {
  for (const a of $("groups").children) a.classList.toggle("current", a.dataset.group === currentGroup());
}

function open() {
  markCurrent();
  if (source) source.close();
  S = null;
  const g = currentGroup();
  $("group").hidden = !g;
  $("empty").hidden = !!g;
  if (!g) return;
  $("title").textContent = g;
  setStatus("connecting");
  source = new EventSource("api/events?group=" + encodeURIComponent(g));
  source.addEventListener("state", (e) => { applyState(JSON.parse(e.data)); });
  source.addEventListener("delta", (e) => { if (S) applyDelta(JSON.parse(e.data)); });
  source.addEventListener("problem", (e) => setStatus(JSON.parse(e.data).error, true));
  source.onerror = () => setStatus("disconnected: reconnecting", true);
}

function sessionIndex(id) {
  if (!id) return -1;
  let k = S.sessionIdx.get(id);
  if (k === undefined) {
    k = S.sessions.length;
    S.sessions.push(id);
    S.sessionIdx.set(id, k);
    S.colors.push(colorOf(k));
  }
  return k;
}

function colorOf(k) {
  // Golden-angle hues: neighbouring sessions get distant colours.
  const h = (k * 137.508) % 360, s = 0.62, l = 0.5;
  const f = (n) => {
    const a = s * Math.min(l, 1 - l), x = (n + h / 30) % 12;
    return Math.round(255 * (l - a * Math.max(-1, Math.min(x - 3, 9 - x, 1))));
  };
  return (0xff << 24 | f(4) << 16 | f(8) << 8 | f(0)) >>> 0; // ABGR for a little-endian ImageData
}

function applyState(st) {
  if (!herdDash.stateAt) herdDash.stateAt = performance.now();
  const n = st.partitions.length;
  S = { group: st.group, kind: st.kind, ids: st.partitions, index: new Map(), owner: new Int32Array(n),
    epoch: new Float64Array(n), sessions: [], sessionIdx: new Map(), colors: [], live: new Map(),
    malformed: st.malformed, version: st.version, highlight: -1, full: true, changed: [] };
  for (let i = 0; i < n; i++) S.index.set(st.partitions[i], i);
  const local = st.sessions.map((id) => sessionIndex(id));
  for (let i = 0; i < n; i++) {
    S.owner[i] = st.owner[i] < 0 ? -1 : local[st.owner[i]];
    S.epoch[i] = st.epoch[i];
  }
  setMembers(st.members);
  schedule();
}

function applyDelta(d) {
  const before = [...S.live.keys()].join(" ");
  setMembers(d.members);
  // A session that ended or began recolours cells the delta does not
  // name: redraw the whole map. Otherwise only the cells it names.
  if ([...S.live.keys()].join(" ") !== before) S.full = true;
  for (const p of d.parts) {
    const i = S.index.get(p.id);
    if (i === undefined) continue; // a record of a partition not in the set
    S.owner[i] = sessionIndex(p.session);
    S.epoch[i] = p.epoch;
    S.changed.push(i);
  }
  S.version = d.version;
  schedule();
}

function setMembers(ms) {
  S.live = new Map();
  for (const m of ms) { sessionIndex(m.session); S.live.set(m.session, m); }
  markAlive();
}

function schedule() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(render);
}

// markAlive fills S.alive: 1 for the index of each live session.
function markAlive() {
  S.alive = new Uint8Array(S.sessions.length);
  for (const id of S.live.keys()) S.alive[S.sessionIdx.get(id)] = 1;
}

function liveOwner(i) {
  const k = S.owner[i];
  return k >= 0 && S.alive[k] === 1 ? k : -1;
}

function reason(i) {
  if (S.owner[i] < 0) return S.epoch[i] === 0 ? "never claimed" : "released, not claimed again yet";
  return "its owner's session ended";
}

function ownerOf(id) {
  if (!S) return null;
  const i = S.index.get(id);
  if (i === undefined) return null;
  const k = liveOwner(i);
  return k < 0 ? "" : S.live.get(S.sessions[k]).member;
}

function mismatches() {
  if (!S || !S.geom || dirty) return null;
  const g = S.geom, cv = $("map");
  const px = new Uint32Array(cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data.buffer);
  const bad = [], off = Math.floor((g.c - 1) / 2);
  for (let i = 0; i < S.ids.length; i++) {
    const k = liveOwner(i), want = k < 0 ? NOBODY : S.colors[k];
    const x = (i % g.cols) * g.c + off, y = Math.floor(i / g.cols) * g.c + off;
    if (px[y * cv.width + x] !== want) bad.push(S.ids[i]);
  }
  return bad;
}

function render() {
  dirty = false;
  if (!S) return;
  const t0 = performance.now();
  const n = S.ids.length, owned = new Map(), nobody = [];
  for (let i = 0; i < n; i++) {
    const k = liveOwner(i);
    if (k < 0) nobody.push(i);
    else owned.set(k, (owned.get(k) || 0) + 1);
  }
  drawMembers(owned);
  if (S.full || !S.geom || S.changed.length > 5000) drawMap();
  else drawCells(S.changed);
  S.full = false;
  S.changed = [];
  drawNobody(nobody);
  if (S.highlight >= 0) $("found").textContent = describe(S.highlight).replace(/\n/g, " · ");
  $("summary").textContent = `${n} partitions, ${S.live.size} members, ${nobody.length} run by nobody` +
    (S.kind ? ` · kind ${S.kind}` : "") + ` · version ${S.version}`;
  setStatus("live · " + new Date().toLocaleTimeString());
  herdDash.version = S.version;
  herdDash.renderMs = performance.now() - t0;
  if (!herdDash.mapDrawnAt) herdDash.mapDrawnAt = performance.now();
}

function drawMembers(owned) {
  const rows = [];
  for (const m of [...S.live.values()].sort((a, b) => a.member.localeCompare(b.member) || a.session.localeCompare(b.session))) {
    const k = S.sessionIdx.get(m.session), tr = el("tr"), sw = el("span", "", "swatch");
    const c = S.colors[k];
    sw.style.background = `rgb(${c & 255},${c >> 8 & 255},${c >> 16 & 255})`;
    const td = el("td"); td.append(sw);
    tr.dataset.member = m.member;
    tr.append(td, el("td", m.member), el("td", m.session, "mono"), el("td", String(m.weight), "num"),
      el("td", String(owned.get(k) || 0), "num owned"));
    rows.push(tr);
  }
  $("members").tBodies[0].replaceChildren(...rows);
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

function drawMap() {
  const cv = $("map"), g = geometry(), n = S.ids.length;
  const w = g.cols * g.c, h = Math.max(g.rows * g.c, 1);
  if (cv.width !== w || cv.height !== h) { cv.width = w; cv.height = h; }
  S.geom = g;
  const ctx = cv.getContext("2d");
  const img = ctx.createImageData(w, h), px = new Uint32Array(img.data.buffer);
  const gap = g.c >= 6 ? 1 : 0, side = g.c - gap;
  for (let i = 0; i < n; i++) {
    const k = liveOwner(i), color = k < 0 ? NOBODY : S.colors[k];
    const x0 = (i % g.cols) * g.c, y0 = Math.floor(i / g.cols) * g.c;
    for (let y = y0; y < y0 + side; y++) {
      const row = y * w + x0;
      for (let x = 0; x < side; x++) px[row + x] = color;
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
    const k = liveOwner(i), c = k < 0 ? NOBODY : S.colors[k];
    const x = (i % g.cols) * g.c, y = Math.floor(i / g.cols) * g.c;
    ctx.clearRect(x, y, g.c, g.c);
    ctx.fillStyle = `rgb(${c & 255},${c >> 8 & 255},${c >> 16 & 255})`;
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
  const k = liveOwner(i), e = S.epoch[i] ? String(S.epoch[i]) : "none";
  if (k < 0) return `${S.ids[i]}\nnobody runs it: ${reason(i)}\nepoch ${e}`;
  const m = S.live.get(S.sessions[k]);
  return `${S.ids[i]}\nowner ${m.member} (session ${m.session})\nepoch ${e}`;
}

function drawNobody(nobody) {
  $("unownedCount").textContent = `(${nobody.length})`;
  const items = nobody.slice(0, 200).map((i) => el("li", `${S.ids[i]}: ${reason(i)}`));
  if (nobody.length > 200) items.push(el("li", `… and ${nobody.length - 200} more`));
  $("unowned").replaceChildren(...items);
  const bad = (S.malformed || []).map((m) => el("li", `${m.Kind} ${m.ID}: ${m.Reason}`));
  $("malformedTitle").hidden = bad.length === 0;
  $("malformed").replaceChildren(...bad);
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
  const id = $("search").value.trim(), i = S.index.get(id);
  S.highlight = i === undefined ? -1 : i;
  S.full = true; // the old outline must go
  $("found").textContent = !id ? "" : i === undefined ? "no such partition" : describe(i).replace(/\n/g, " · ");
  schedule();
}

addEventListener("DOMContentLoaded", () => {
  $("map").addEventListener("mousemove", hover);
  $("map").addEventListener("mouseleave", () => { $("tip").hidden = true; });
  $("search").addEventListener("input", search);
  addEventListener("hashchange", open);
  addEventListener("resize", () => { if (S) S.full = true; schedule(); });
  loadGroups();
  open();
});
