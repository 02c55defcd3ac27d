// herd dashboard: the actions (herd dashboard --allow-actions). Each button
// posts a request that the server logs in the group; the key's owner, or
// the member, acts on it when it reads the group's log. The page shows the
// buttons only when the server says actions are on.
"use strict";

let actionsOn = false;

async function loadSettings() {
  try {
    const r = await fetch("api/settings", { cache: "no-store" });
    if (r.ok) actionsOn = !!(await r.json()).actions;
  } catch (e) {
    actionsOn = false;
  }
  document.body.classList.toggle("actions", actionsOn);
  if (S) schedule();
  drawJobs();
}

// actionCell is a cell with a button per [label, request] (empty when
// actions are off).
function actionCell(buttons) {
  const td = el("td", undefined, "act");
  if (!actionsOn) return td;
  for (const [label, req] of buttons) {
    const b = el("button", label);
    b.type = "button";
    b.dataset.action = req.action;
    b.addEventListener("click", () => sendAction(req, b));
    td.append(b);
  }
  return td;
}

async function sendAction(req, button) {
  const body = { group: S.group, ...req };
  const what = `${req.action} ${req.key ? "key " + req.key : "member " + req.member}`;
  button.disabled = true;
  try {
    const r = await fetch("api/action", {
      method: "POST", cache: "no-store", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    const answer = await r.json();
    if (!r.ok) throw new Error(answer.error || r.status);
    $("actionNote").textContent = `requested at ${clock(Date.now()).slice(0, 8)}: ${what}. ${answer.note}.`;
    herdDash.actions = (herdDash.actions || 0) + 1;
  } catch (e) {
    $("actionNote").textContent = `${what} failed: ${e.message}`;
  } finally {
    button.disabled = false;
  }
}

addEventListener("DOMContentLoaded", loadSettings);
