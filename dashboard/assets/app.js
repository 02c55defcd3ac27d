// herd dashboard: the page. It keeps one group's state from the server's
// events ("state", then "delta"s; "history" and "refresh" beside them) and
// draws it; it never writes (actions.js posts the actions, when they are
// on). map.js draws the map, views.js the lists and the history, jobs.js
// the blackboard.
"use strict";

const $ = (id) => document.getElementById(id);

// S is the group shown. owner[i] indexes sessions (-1: no session); live
// maps a live session to its member. R is the last refresh (TTLs and
// checkpoint ages), H the history.
let S = null, R = null, H = null;
let source = null;
let dirty = false;
// herdDash is for tests and the curious: what is drawn, and when.
// stateAt is when the first state arrived and mapDrawnAt when the first
// map was drawn (ms since navigation); timings what the first state cost
// (decode, draw, in ms); renderMs how long the last redraw took.
const herdDash = { version: "", mapDrawnAt: 0, stateAt: 0, renderMs: 0, timings: null, refreshes: 0, histories: 0, events: [] };
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

// currentGroup is the group the address names: ?group=NAME (the server
// starts reading the group when it serves the page). An address of
// #group=NAME is rewritten so.
function currentGroup() {
  const m = /^#group=(.+)$/.exec(location.hash);
  if (m) history.replaceState(null, "", groupHref(decodeURIComponent(m[1])));
  return new URLSearchParams(location.search).get("group") || "";
}

function groupHref(g) { return "?group=" + encodeURIComponent(g); }

// show opens group g in the page, without loading it again.
function show(g) {
  history.pushState(null, "", groupHref(g));
  open();
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
      a.href = groupHref(g);
      a.dataset.group = g;
      a.addEventListener("click", (e) => {
        if (e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return; // a new tab or window
        e.preventDefault();
        show(g);
      });
      nav.append(a);
    }
    if (!currentGroup() && body.groups.length === 1) show(body.groups[0]);
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
  S = null; R = null; H = null;
  const g = currentGroup();
  $("group").hidden = !g;
  $("empty").hidden = !!g;
  if (!g) return;
  $("title").textContent = g;
  setStatus("connecting");
  source = new EventSource("api/events?group=" + encodeURIComponent(g));
  on("state", (e) => applyState(e.data));
  on("delta", (e) => { if (S) applyDelta(JSON.parse(e.data)); });
  on("history", (e) => applyHistory(JSON.parse(e.data)));
  on("refresh", (e) => applyRefresh(JSON.parse(e.data)));
  source.addEventListener("problem", (e) => setStatus(JSON.parse(e.data).error, true));
  source.onerror = () => setStatus("disconnected: reconnecting", true);
}

// on handles the events named name, noting when the first few came and
// how long they took in herdDash.events.
function on(name, f) {
  source.addEventListener(name, (e) => {
    const t0 = performance.now();
    f(e);
    if (herdDash.events.length < 12) herdDash.events.push({ name, at: Math.round(t0), ms: Math.round(performance.now() - t0), bytes: e.data.length });
  });
}

// bytesOf decodes base64 into a fresh, aligned ArrayBuffer.
function bytesOf(b64) {
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(b64).buffer;
  const s = atob(b64), n = s.length, b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = s.charCodeAt(i);
  return b.buffer;
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

function css(c) { return `rgb(${c & 255},${c >> 8 & 255},${c >> 16 & 255})`; }

function applyState(data) {
  const t0 = performance.now();
  if (!herdDash.stateAt) herdDash.stateAt = t0;
  const st = JSON.parse(data), n = st.n;
  // Each partition's owner and epoch: its slot's, or (slotBytes 0) its own
  // (see the state event).
  let owner = new Int32Array(bytesOf(st.slotOwner)), epoch = new Float64Array(bytesOf(st.slotEpoch));
  if (st.slotBytes === 2) {
    const slot = new Uint16Array(bytesOf(st.slot)), slotOwner = owner, slotEpoch = epoch;
    owner = new Int32Array(n);
    epoch = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const j = slot[i];
      owner[i] = slotOwner[j];
      epoch[i] = slotEpoch[j];
    }
  }
  S = { group: st.group, kind: st.kind, ids: n ? st.partitions.split("\n") : [], idx: null, owner, epoch,
    sessions: [], sessionIdx: new Map(), colors: [], live: new Map(), givenBack: new Map(), seenAt: new Map(),
    malformed: st.malformed, version: st.version, highlight: -1, full: true, changed: [] };
  for (const id of st.sessions) sessionIndex(id); // in order: the state's indexes are S's
  for (const g of st.givenBack) S.givenBack.set(g.id, g.session);
  setMembers(st.members);
  if (!herdDash.timings) herdDash.timings = { decodeMs: performance.now() - t0, bytes: data.length, serverReadMs: st.readMs };
  schedule();
}

// indexOf is the position of partition id in the set (undefined if none),
// by a map built on first use: a state alone never needs it.
function indexOf(id) {
  if (!S.idx) {
    S.idx = new Map();
    for (let i = 0; i < S.ids.length; i++) S.idx.set(S.ids[i], i);
  }
  return S.idx.get(id);
}

function applyDelta(d) {
  const before = [...S.live.keys()].join(" ");
  setMembers(d.members);
  // A session that ended or began recolours cells the delta does not
  // name: redraw the whole map. Otherwise only the cells it names.
  if ([...S.live.keys()].join(" ") !== before) S.full = true;
  for (const p of d.parts) {
    const i = indexOf(p.id);
    if (i === undefined) continue; // a record of a partition not in the set
    S.owner[i] = sessionIndex(p.session);
    S.epoch[i] = p.epoch;
    if (p.givenBack) S.givenBack.set(p.id, p.givenBack); else S.givenBack.delete(p.id);
    S.changed.push(i);
  }
  S.version = d.version;
  schedule();
}

function setMembers(ms) {
  S.live = new Map();
  for (const m of ms) {
    sessionIndex(m.session);
    S.live.set(m.session, m);
    if (!S.seenAt.has(m.session)) S.seenAt.set(m.session, performance.now());
  }
  S.alive = new Uint8Array(S.sessions.length);
  for (const id of S.live.keys()) S.alive[S.sessionIdx.get(id)] = 1;
}

// applyRefresh keeps the last read of TTLs and checkpoint ages, with the
// page's own time of arrival: TTLs count down from it (no clock of the
// server's is compared with the browser's).
function applyRefresh(r) {
  r.receivedAt = performance.now();
  r.ttl = new Map(r.members.map((m) => [m.session, m]));
  r.ages = r.n ? new Int32Array(bytesOf(r.ckAge)) : new Int32Array(0);
  R = r;
  herdDash.refreshes++;
  if (typeof drawJobs === "function") drawJobs();
  if (S && $("colour").value === "age") S.full = true;
  schedule();
}

// ttlLeft is session's TTL left now in ms, by the last refresh: negative
// once it ran out, -Infinity if a read begun after the page saw the
// session did not find it alive (the store has not logged its end yet),
// undefined if no read has been made since the page saw it.
function ttlLeft(session) {
  if (!R) return undefined;
  const m = R.ttl.get(session);
  if (m) return m.ttlMs - (performance.now() - R.receivedAt);
  const seen = S && S.seenAt.get(session);
  return seen !== undefined && R.receivedAt - R.readMs > seen ? -Infinity : undefined;
}

// ageOf is partition i's checkpoint age now in ms (-1: none, -2: unknown
// time, undefined: no refresh of this set yet).
function ageOf(i) {
  if (!R || R.n !== S.ids.length || (R.n && (R.first !== S.ids[0] || R.last !== S.ids[R.n - 1]))) return undefined;
  const a = R.ages[i];
  return a < 0 ? a : a + (performance.now() - R.receivedAt);
}

function schedule() {
  if (dirty) return;
  dirty = true;
  requestAnimationFrame(render);
}

function liveOwner(i) {
  const k = S.owner[i];
  return k >= 0 && S.alive[k] === 1 ? k : -1;
}

function ownerOf(id) {
  if (!S) return null;
  const i = indexOf(id);
  if (i === undefined) return null;
  const k = liveOwner(i);
  return k < 0 ? "" : S.live.get(S.sessions[k]).member;
}
herdDash.ownerOf = ownerOf;

function render() {
  dirty = false;
  if (!S) return;
  const t0 = performance.now();
  const n = S.ids.length, owned = new Int32Array(S.sessions.length), nobody = [];
  const owner = S.owner, alive = S.alive;
  for (let i = 0; i < n; i++) {
    const k = owner[i];
    if (k >= 0 && alive[k] === 1) owned[k]++;
    else nobody.push(i);
  }
  const t1 = performance.now();
  drawMembers(owned);
  const t2 = performance.now();
  drawMapOrCells();
  const t3 = performance.now();
  drawNobody(nobody);
  const t4 = performance.now();
  herdDash.renderParts = { countMs: t1 - t0, membersMs: t2 - t1, mapMs: t3 - t2, nobodyMs: t4 - t3 };
  if (S.highlight >= 0) $("found").textContent = describe(S.highlight).replace(/\n/g, " · ");
  $("summary").textContent = `${n} partitions, ${S.live.size} members, ${nobody.length} run by nobody` +
    (S.kind ? ` · kind ${S.kind}` : "") + ` · version ${S.version}`;
  setStatus("live · " + clock(Date.now()).slice(0, 8));
  herdDash.version = S.version;
  herdDash.renderMs = performance.now() - t0;
  if (!herdDash.mapDrawnAt) {
    herdDash.mapDrawnAt = performance.now();
    herdDash.timings.drawMs = herdDash.renderMs;
    herdDash.timings.parts = herdDash.renderParts;
  }
  drawCheckpoints();
  if (H && H.dirty) setTimeout(drawHistory, 0); // after the frame is painted
}

function drawMembers(owned) {
  const rows = [];
  const cmp = (x, y) => (x < y ? -1 : x > y ? 1 : 0); // not localeCompare: its first call loads the locale's data
  for (const m of [...S.live.values()].sort((a, b) => cmp(a.member, b.member) || cmp(a.session, b.session))) {
    const k = S.sessionIdx.get(m.session), tr = el("tr"), sw = el("span", "", "swatch");
    sw.style.background = css(S.colors[k]);
    const td = el("td"); td.append(sw);
    tr.dataset.member = m.member;
    tr.dataset.session = m.session;
    const ttl = el("td", "", "num ttl");
    tr.append(td, el("td", m.member), el("td", m.session, "mono"), el("td", String(m.weight), "num"),
      el("td", String(owned[k] || 0), "num owned"), ttl, actionCell([["leave", { action: "leave", member: m.member }]]));
    rows.push(tr);
  }
  $("members").tBodies[0].replaceChildren(...rows);
  drawTTLs();
}

// drawTTLs writes each member's TTL left; a TTL that ran out marks the
// member: it stopped renewing (crashed, stopped, or fencing itself) and
// the store has not expired its session yet.
function drawTTLs() {
  if (!S) return;
  for (const tr of $("members").tBodies[0].rows) {
    const left = ttlLeft(tr.dataset.session), td = tr.querySelector("td.ttl");
    tr.classList.toggle("overdue", left !== undefined && left <= 0);
    td.textContent = left === undefined ? "…" : left > 0 ? (left / 1000).toFixed(1) + " s" :
      left === -Infinity ? "ran out (not alive in the last read)" : "ran out " + (-left / 1000).toFixed(1) + " s ago";
  }
}

function fmtAge(ms) {
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 120e3) return (ms / 1000).toFixed(1) + " s";
  if (ms < 7200e3) return Math.round(ms / 60e3) + " min";
  return (ms / 3600e3).toFixed(1) + " h";
}

addEventListener("DOMContentLoaded", () => {
  initMap();
  addEventListener("hashchange", open);
  addEventListener("popstate", open);
  setInterval(() => { drawTTLs(); if (S && R) { drawCheckpoints(); drawStale(); } }, 500);
  loadGroups();
  open();
});
