// herd dashboard: the partitions nobody runs and why, checkpoint ages,
// and the ownership history as the dashboard saw it, at the store's times.
"use strict";

const MAX_LISTED = 200;

// clock is a time of day of a Unix millisecond time: the store's time of
// a change (or the dashboard's receipt time), shown as it is (never
// compared with the browser's clock).
function clock(ms) {
  // By hand: the first call of toLocaleTimeString loads the locale's data,
  // tens of milliseconds the first draw should not wait for.
  const d = new Date(ms), p = (v, n) => String(v).padStart(n || 2, "0");
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// day is clock with the date before it.
function day(ms) {
  const d = new Date(ms), p = (v) => String(v).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${clock(ms)}`;
}

function reason(i) {
  const id = S.ids[i], k = S.owner[i], f = H && H.freed.get(id);
  if (S.badRecord && S.badRecord.has(id)) return "its record is malformed: no member claims it until it is repaired";
  const ended = f && (f.how === "expire" || f.how === "close") ?
    `its owner ${f.member}'s session ${f.how === "expire" ? "expired" : "closed (it left)"} at ${clock(f.at)}` : "";
  if (S.live.size === 0) return "no member is alive" + (ended ? ` (${ended})` : "");
  if (k >= 0) return (ended || "its owner's session ended") + "; not claimed again yet";
  if (S.epoch[i] === 0) return "never claimed: no member has placed it yet";
  const gb = S.givenBack.get(id);
  if (gb && S.live.has(gb)) return `given back by ${S.live.get(gb).member}, which lives: waiting for another member`;
  if (f) return `${f.how === "giveback" ? "given back" : "released"} by ${f.member || "its owner"} at ${clock(f.at)}; not claimed again yet`;
  return "released; not claimed again yet";
}

function drawNobody(nobody) {
  if (!S.badRecord) S.badRecord = new Set((S.malformed || []).filter((m) => m.Kind === "ownership").map((m) => m.ID));
  $("unownedCount").textContent = `(${nobody.length})`;
  const items = nobody.slice(0, MAX_LISTED).map((i) => el("li", `${S.ids[i]}: ${reason(i)}`));
  if (nobody.length > MAX_LISTED) items.push(el("li", `… and ${nobody.length - MAX_LISTED} more`));
  $("unowned").replaceChildren(...items);
  const bad = (S.malformed || []).map((m) => el("li", `${m.Kind} ${m.ID}: ${m.Reason}`));
  $("malformedTitle").hidden = bad.length === 0;
  $("malformed").replaceChildren(...bad);
  drawStale();
}

// drawStale lists the partitions still owned by a session whose TTL ran
// out by the last refresh: its member stopped renewing (crashed, stopped,
// or fencing itself before the store expires it), so nobody may run them.
function drawStale() {
  const stale = [];
  for (const [session, m] of S.live) {
    const left = ttlLeft(session);
    if (left === undefined || left > 0) continue;
    const k = S.sessionIdx.get(session);
    let count = 0;
    for (let i = 0; i < S.ids.length; i++) if (S.owner[i] === k) count++;
    const when = left === -Infinity ? "it was not alive in the last read" : `its TTL ran out ${fmtAge(-left)} ago by the last read`;
    const li = el("li", `${m.member} (session ${session}): ${count} partitions; ${when}: it stopped renewing (crashed, stopped, or fencing itself), and the store has not logged its expiry yet`);
    li.dataset.member = m.member;
    li.dataset.count = count;
    stale.push(li);
  }
  $("staleTitle").hidden = stale.length === 0;
  $("stale").replaceChildren(...stale);
}

// drawCheckpoints shows the oldest checkpoints and a count per age.
function drawCheckpoints() {
  const box = $("checkpoints");
  if (!S || !R) { box.textContent = "waiting for the first read of the checkpoints…"; return; }
  if (ageOf(0) === undefined && S.ids.length) { box.textContent = "the last read is of another partition set: waiting for the next"; return; }
  const n = S.ids.length, buckets = new Array(AGE_COLOURS.length).fill(0);
  let none = 0, unknown = 0;
  const oldest = [];
  for (let i = 0; i < n; i++) {
    const a = R.ages[i];
    if (a === -1) { none++; continue; }
    if (a === -2) { unknown++; continue; }
    let k = 0;
    while (k < AGE_STEPS.length && a >= AGE_STEPS[k]) k++;
    buckets[k]++;
    if (oldest.length < 10 || a > R.ages[oldest[oldest.length - 1]]) {
      oldest.push(i);
      oldest.sort((x, y) => R.ages[y] - R.ages[x]);
      if (oldest.length > 10) oldest.pop();
    }
  }
  const names = ["under 10 s", "10 s to 1 min", "1 to 10 min", "10 min to 1 h", "over 1 h"];
  const parts = buckets.map((c, k) => `${c} ${names[k]}`).filter((s) => !s.startsWith("0 "));
  if (none) parts.push(`${none} without a checkpoint`);
  if (unknown) parts.push(`${unknown} of unknown age`);
  const head = el("p", `Read ${fmtAge(performance.now() - R.receivedAt)} ago (the read took ${R.readMs} ms; next in about ${fmtAge(Math.max(0, R.nextMs - (performance.now() - R.receivedAt)))}): ` + (parts.join(", ") || "no partitions"));
  const rows = oldest.map((i) => {
    const tr = el("tr"), k = liveOwner(i);
    tr.append(el("td", S.ids[i], "mono"), el("td", k < 0 ? "nobody" : S.live.get(S.sessions[k]).member), el("td", fmtAge(ageOf(i)), "num age"));
    return tr;
  });
  const tbl = el("table");
  tbl.id = "oldest";
  const th = el("tr");
  th.append(el("th", "partition"), el("th", "owner"), el("th", "checkpoint age"));
  tbl.append(el("thead"), el("tbody"));
  tbl.tHead.append(th);
  tbl.tBodies[0].append(...rows);
  box.replaceChildren(head, rows.length ? tbl : el("p", "no checkpoint written yet"));
}

// applyHistory keeps the history: the whole ring in a page's first
// history event (full), then the new entries.
function applyHistory(h) {
  if (h.full || !H) H = { entries: [], freed: new Map() };
  H.since = h.since; H.dropped = h.dropped; H.maxEntries = h.maxEntries; H.maxParts = h.maxParts;
  for (const e of h.entries) {
    if (H.entries.length && e.seq <= H.entries[H.entries.length - 1].seq) continue;
    H.entries.push(e);
    noteFreed(e);
  }
  let parts = 0;
  for (const e of H.entries) parts += (e.parts || []).length;
  while (H.entries.length > H.maxEntries || parts > H.maxParts && H.entries.length > 1) {
    parts -= (H.entries.shift().parts || []).length;
    H.dropped = true;
  }
  herdDash.histories++;
  // Drawn after the next render, so that a page's first map does not wait
  // for it.
  H.dirty = true;
  if (S) schedule(); // the reasons of the partitions nobody runs may say more now
  else drawHistory();
}

// noteFreed remembers how each partition's last owner let go of it, until
// it is claimed again: the reasons use it.
function noteFreed(e) {
  for (const p of e.parts || []) {
    if (e.kind === "claim") H.freed.delete(p);
    else if (["release", "giveback", "expire", "close"].includes(e.kind)) H.freed.set(p, { at: e.at, member: e.member, how: e.kind });
  }
}

const VERB = { open: "joined (session opened)", close: "left (session closed)", expire: "session expired", claim: "claimed",
  release: "released", giveback: "gave back", restore: "restored", set: "partition set stored", gap: "the dashboard read the group",
  request: "request logged" };

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// takeover describes the takeovers of a claim entry: from whom, how,
// how long after (median and range when several).
function takeover(e) {
  if (e.kind !== "claim") return ["", ""];
  const from = new Map(), waits = [];
  e.parts.forEach((p, j) => {
    if (e.from[j]) { const k = `${e.from[j]} (${e.how[j] === "expire" ? "expired" : e.how[j] === "close" ? "left" : e.how[j] === "giveback" ? "gave back" : "released"})`; from.set(k, (from.get(k) || 0) + 1); }
    if (e.waitMs[j] >= 0) waits.push(e.waitMs[j]);
  });
  const who = [...from].map(([k, c]) => (e.count > 1 ? `${c} from ` : "from ") + k).join(", ") || "no previous owner seen";
  if (!waits.length) return [who, ""];
  const lo = Math.min(...waits), hi = Math.max(...waits);
  return [who, waits.length === 1 ? fmtAge(lo) : `${fmtAge(median(waits))} (median of ${waits.length}; ${fmtAge(lo)} to ${fmtAge(hi)})`];
}

function drawHistory() {
  if (!H) return;
  H.dirty = false;
  const first = H.entries.length ? H.entries[0].at : H.since;
  const received = H.entries.filter((e) => !e.storeTime && e.kind !== "gap").length;
  $("histNote").textContent = `Times are when the store appended each change to the group's log, on the store's clock` +
    (received ? `; the ${received} marked * were written by an older herd, without a time: when this dashboard received them. ` : ". ") +
    `The history reaches back to ${day(first)}: this dashboard has followed this group since ${day(H.since)}, and keeps the last ` +
    `${H.maxEntries} entries or ${H.maxParts} partition changes` +
    (H.dropped ? `, so older ones were dropped.` : `: all it has seen.`) +
    " A takeover is the time from the previous owner's release or expiry to the new claim.";
  const q = $("histFilter").value.trim();
  const rows = [];
  for (let j = H.entries.length - 1; j >= 0 && rows.length < MAX_LISTED; j--) {
    const e = H.entries[j];
    if (q && e.member !== q && !(e.parts || []).includes(q)) continue;
    const [who, took] = takeover(e);
    const what = e.kind === "request" ? `${e.action} ${e.parts ? "key " + e.parts[0] : "member " + e.member}` :
      e.kind === "gap" ? `read a snapshot of ${e.count} partitions (changes before it are not in the history)` :
      e.kind === "set" ? `${e.count} partitions` : (e.parts || []).length ? `${e.count}: ${e.parts.slice(0, 8).join(", ")}${e.count > 8 ? ", …" : ""}` : "";
    const tr = el("tr");
    tr.dataset.kind = e.kind;
    tr.dataset.member = e.member || "";
    const at = el("td", clock(e.at) + (e.storeTime || e.kind === "gap" ? "" : " *"), "mono");
    at.title = `received by this dashboard at ${clock(e.seen || e.at)}`;
    tr.append(at, el("td", e.member || ""), el("td", VERB[e.kind] || e.kind), el("td", what), el("td", who), el("td", took, "num"));
    rows.push(tr);
  }
  $("histTable").tBodies[0].replaceChildren(...rows);
  drawTimeline();
}

// drawTimeline draws one lane per member over the time the history
// covers: claims up, releases and ends down, a line where it was read.
function drawTimeline() {
  const cv = $("timeline"), w = Math.max(300, $("mapbox").clientWidth - 2);
  const members = [...new Set(H.entries.filter((e) => e.member).map((e) => e.member))].sort();
  const lane = 26, left = 110, h = Math.max(1, members.length) * lane + 20;
  if (cv.width !== w || cv.height !== h) { cv.width = w; cv.height = h; }
  const ctx = cv.getContext("2d");
  ctx.clearRect(0, 0, w, h);
  if (!H.entries.length) return;
  const t0 = H.entries[0].at, t1 = Math.max(H.entries[H.entries.length - 1].at, t0 + 1000);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * (w - left - 10);
  ctx.font = "12px system-ui, sans-serif";
  ctx.fillStyle = "#555";
  members.forEach((m, k) => ctx.fillText(m, 4, k * lane + 17));
  ctx.fillText(clock(t0), left, h - 4);
  ctx.fillText(clock(t1), w - 90, h - 4);
  const colours = { claim: "#2e9d4a", release: "#e08a1e", giveback: "#e08a1e", expire: "#d23c3c", close: "#777", open: "#3b6fd1" };
  for (const e of H.entries) {
    if (e.kind === "gap") { ctx.fillStyle = "#bbb"; ctx.fillRect(x(e.at), 0, 1, h - 16); continue; }
    const k = members.indexOf(e.member);
    if (k < 0 || !colours[e.kind]) continue;
    const mid = k * lane + 13, len = Math.min(11, 3 + Math.log2(1 + (e.count || 1)) * 2);
    ctx.fillStyle = colours[e.kind];
    if (e.kind === "claim") ctx.fillRect(x(e.at), mid - len, 2, len);
    else ctx.fillRect(x(e.at), mid, 2, len);
  }
}

addEventListener("DOMContentLoaded", () => {
  $("histFilter").addEventListener("input", drawHistory);
});
