// herd dashboard: the blackboard of a jobs group, from the shared
// refresher's reads, with filters by owner, state and key.
"use strict";

// jobState is the state a filter matches: running, stopped mid-run,
// paused, failed, overdue, never run, unreadable, unowned or idle.
function jobState(j) {
  if (j.recordError) return "unreadable";
  if (!j.owner) return "unowned";
  if (j.running) return "running";
  if (j.stoppedMidRun) return "stopped";
  if (j.paused) return "paused";
  if (j.result === "error") return "failed";
  if (j.overdueMs > 0) return "overdue";
  if (!j.lastStart) return "never";
  return "idle";
}

// when is a writer's time of day ("-" for none).
function when(ms) { return ms ? clock(ms) : "-"; }

function drawJobs() {
  const box = $("jobs");
  box.hidden = !S || S.kind !== "keys";
  if (box.hidden || !R || !R.jobs) return;
  const owner = $("jobOwner"), state = $("jobState").value, q = $("jobKey").value.trim().toLowerCase();
  const owners = [...new Set(R.jobs.map((j) => j.owner).filter(Boolean))].sort();
  const keep = owner.value;
  owner.replaceChildren(el("option", "every owner"), ...owners.map((o) => el("option", o)));
  owner.options[0].value = "";
  owner.value = owners.includes(keep) ? keep : "";
  const counts = {};
  const rows = [];
  for (const j of R.jobs) {
    const st = jobState(j);
    counts[st] = (counts[st] || 0) + 1;
    if (owner.value && j.owner !== owner.value) continue;
    if (state && st !== state) continue;
    if (q && !j.key.toLowerCase().includes(q)) continue;
    if (rows.length >= 500) continue;
    const tr = el("tr");
    tr.dataset.key = j.key;
    tr.dataset.state = st;
    const running = j.running ? "yes" : j.stoppedMidRun ? "stopped mid-run" : "no";
    const result = j.recordError ? "unreadable record: " + j.recordError : j.result === "error" ? "error: " + (j.error || "") : j.result || "-";
    const next = j.paused ? "paused" : j.nextDue ? when(j.nextDue) + (j.retry ? " (retry)" : "") : "-";
    const late = (j.lateMs ? "started " + fmtAge(j.lateMs) + " late" : "on time") + (j.overdueMs ? `; overdue ${fmtAge(j.overdueMs)}` : "");
    tr.append(el("td", j.key, "mono"), el("td", j.owner || "-"), el("td", running, "running"), el("td", when(j.lastStart)),
      el("td", when(j.lastStop)), el("td", result, "result"), el("td", next), el("td", j.lastStart ? late : "-"),
      el("td", String(j.missed), "num"), el("td", String(j.runs), "num runs"),
      actionCell([["run now", { action: "run", key: j.key }], j.paused ? ["resume", { action: "resume", key: j.key }] : ["pause", { action: "pause", key: j.key }]]));
    rows.push(tr);
  }
  $("jobTable").tBodies[0].replaceChildren(...rows);
  const names = { running: "running", stopped: "stopped mid-run", paused: "paused", failed: "failed", overdue: "overdue", never: "never run", unreadable: "unreadable", unowned: "unowned", idle: "idle" };
  $("jobSummary").textContent = `${R.jobs.length} keys: ` + Object.keys(names).filter((k) => counts[k]).map((k) => `${counts[k]} ${names[k]}`).join(", ") +
    ` · shown ${rows.length}` + (rows.length === 500 ? " (the first 500 that match)" : "") +
    ` · read ${fmtAge(performance.now() - R.receivedAt)} ago; times are the writers' clocks`;
}

addEventListener("DOMContentLoaded", () => {
  for (const id of ["jobOwner", "jobState", "jobKey"]) $(id).addEventListener("input", drawJobs);
});
