// The operator page: polls ./state every two seconds and shows it; looks a
// subject up and resets its limits through the operator API. Text goes in
// with textContent only: a subject is whatever a token said.
"use strict";

const every = 2000;
const $ = (sel) => document.querySelector(sel);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    if (c instanceof Node) {
      const td = document.createElement("td");
      td.append(c);
      tr.append(td);
    } else if (typeof c === "number") {
      tr.append(el("td", fmt(c), "num"));
    } else {
      tr.append(el("td", c));
    }
  }
  return tr;
}

function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...rows);
  if (rows.length === 0) {
    const td = el("td", empty, "note");
    td.colSpan = cols;
    const tr = document.createElement("tr");
    tr.append(td);
    tbody.append(tr);
  }
}

function defs(dl, pairs) {
  const out = [];
  for (const [k, v, cls] of pairs) {
    out.push(el("dt", k));
    out.push(el("dd", v, cls));
  }
  dl.replaceChildren(...out);
}

function fmt(n) {
  if (n === null || n === undefined) return "–";
  if (Number.isInteger(n)) return n.toLocaleString("en");
  return n.toLocaleString("en", { maximumFractionDigits: n < 10 ? 2 : 1 });
}
const bound = (n) => (n === 0 ? "unlimited" : fmt(n));
const msText = (v) => (v === null || v === undefined ? "no calls" : fmt(v) + " ms");
const pct = (f) => fmt(Math.round(f * 1000) / 10) + " %";

function time(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function ago(iso, now) {
  if (!iso) return "";
  const s = Math.max(0, Math.round((new Date(now) - new Date(iso)) / 1000));
  if (s < 120) return s + " s ago";
  if (s < 7200) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
}

function span(st) {
  if (!st.span_seconds) return "measuring: the rates appear at the next refresh";
  return "over the last " + fmt(Math.round(st.span_seconds)) + " s (at most 5 min, since this page was opened)";
}

function showPolicy(st) {
  const p = st.policy;
  const load = $("#policy-load");
  load.replaceChildren();
  load.append(el("span", "Loaded " + time(p.loaded_at) + " (" + ago(p.loaded_at, st.now) + "). "));
  if (p.reload_failed_at) {
    load.append(el("span", "LAST RELOAD FAILED " + time(p.reload_failed_at) + ": " + p.reload_error + " — the policy loaded before stays in force.", "bad"));
  } else {
    load.append(el("span", "Last reload: succeeded.", "ok"));
  }
  load.append(el("span", " Overrides: " + p.subject_plans + " subject_plans, " + p.subject_quotas + " subject_quotas. Redis failure mode: " + p.on_redis_failure + "."));
  fill($("#plans tbody"), p.plans.map((pl) => {
    const from = pl.sources.map((s) => s === "claim" ? "token claim “" + p.plan_claim + "”" : s === "default" ? "default plan" : "subject_plans (" + pl.overrides + ")");
    const q = pl.quotas;
    return row([pl.name, pl.requests_per_minute, pl.burst, bound(pl.requests_per_day),
      bound(q.concurrent_environments) + ", " + bound(q.environments_per_month),
      bound(q.vcpu_hours_per_month) + ", " + bound(q.memory_gb_hours_per_month),
      pl.shadow ? "SHADOW (counts, refuses nobody)" : "enforced", from.join("; ")]);
  }), "no plans", 8);
  fill($("#operations tbody"), p.operations.map((o) => row([el("code", o.procedure),
    o.rate_per_minute ? o.rate_per_minute : "–", o.concurrent_streams ? o.concurrent_streams : "–", o.quota || "–",
    o.shadow ? "SHADOW (counts, refuses nobody)" : "enforced", o.idempotent ? "honored" : "–"])), "none", 6);
}

function showBackends(st) {
  fill($("#backends tbody"), st.backends.map((b) => {
    const state = el("span", b.state === "healthy" ? "healthy" : "EJECTED", b.state === "healthy" ? "ok" : "bad");
    const cell = el("span");
    cell.append(state);
    if (b.reason) cell.append(el("span", ": " + b.reason + (b.ejected_until ? ", until " + time(b.ejected_until) : "")));
    let check = "none yet";
    if (b.last_check) check = (b.last_check.passed ? "passed " : "FAILED ") + ago(b.last_check.at, st.now) + (b.last_check.error ? ": " + b.last_check.error : "");
    const tr = row([el("code", b.addr), cell, b.since ? time(b.since) : "start", pct(b.share), b.calls, pct(b.error_rate),
      msText(b.p50_ms), msText(b.p99_ms), b.in_flight, check]);
    tr.dataset.addr = b.addr;
    tr.dataset.state = b.state;
    return tr;
  }), "no backends", 10);
  $("#backends-span").textContent = "Share, calls, failed and latency " + span(st) + ".";
}

function showRedis(st) {
  const r = st.redis;
  const breaker = { closed: "closed: calls go to Redis", open: "OPEN: calls do not go to Redis", "half-open": "HALF-OPEN: one probe is on its way" }[r.breaker] || r.breaker;
  defs($("#redis dl"), [
    ["Mode", r.mode || "–"],
    ["Breaker", breaker, r.breaker === "closed" ? "ok" : "bad"],
    ["Deciding", r.fail_open ? "ON THIS REPLICA'S LOCAL SHARE (fail_open)" : "in Redis", r.fail_open ? "warn" : "ok"],
    ["On Redis failure", r.on_redis_failure],
    ["Latency p50 / p99", msText(r.p50_ms) + " / " + msText(r.p99_ms) + " (p99 now " + msText(r.recent_p99_ms) + ")"],
    ["Limiter calls / failed", fmt(r.calls) + " / " + fmt(r.errors)],
    ["Fail-open decisions", fmt(r.fail_open_allowed) + " allowed, " + fmt(r.fail_open_refused) + " refused"],
    ["Refused unavailable", fmt(r.unavailable) + " (fail_closed)"],
    ["Span", span(st)],
  ]);
}

function showTraffic(st) {
  const t = st.traffic;
  const ps = (k) => fmt(t.per_second[k] || 0) + " /s";
  defs($("#traffic-now"), [
    ["Forwarded", ps("forwarded")],
    ["Answered by the edge", ps("answered")],
    ["Refused", ps("refused")],
    ["Replayed", ps("replayed")],
    ["Errors", ps("error")],
    ["Open streams", fmt(t.open_streams)],
    ["Calls in flight", fmt(t.in_flight)],
    ["Calls held (early retries)", fmt(t.held)],
    ["Rates", st.recent_seconds ? "over the last " + fmt(Math.round(st.recent_seconds)) + " s" : "measuring"],
  ]);
  fill($("#refusals tbody"), t.refusals.map((r) => row([r.plan, r.limit + (r.shadow ? " (shadow: admitted)" : ""), r.calls, fmt(r.per_second) + " /s"])),
    "no refusals " + span(st), 4);
  $("#most-refused-caption").textContent = "Subjects refused most in the last " + t.most_refused_minutes + " minutes (this replica)";
  fill($("#most-refused tbody"), t.most_refused.map((s) => {
    const b = el("button", "Look up");
    b.type = "button";
    b.addEventListener("click", () => { $("#subject").value = s.subject; lookup(); });
    return row([el("span", s.subject, "subject"), s.over ? fmt(s.refused) + " (of which up to " + fmt(s.over) + " others')" : s.refused, s.plan, s.limit, b]);
  }), "nobody was refused", 5);
}

async function refresh() {
  try {
    const res = await fetch("state", { cache: "no-store", credentials: "same-origin" });
    if (!res.ok) throw new Error("HTTP " + res.status + ": " + (await res.text()).slice(0, 200));
    const st = await res.json();
    $("#version").textContent = st.version ? "version " + st.version : "";
    showPolicy(st);
    showBackends(st);
    showRedis(st);
    showTraffic(st);
    const s = $("#status");
    s.textContent = "Live: refreshed " + time(st.now) + ", every " + every / 1000 + " s.";
    s.className = "ok";
  } catch (e) {
    const s = $("#status");
    s.textContent = "NOT REFRESHING: " + e.message;
    s.className = "bad";
  }
  setTimeout(refresh, every);
}

function subjectURL(subject, action) {
  return "/admin/v1/subjects/" + encodeURIComponent(subject) + (action ? "/" + action : "");
}

async function lookup() {
  const subject = $("#subject").value.trim();
  const status = $("#lookup-status");
  $("#reset-confirm").hidden = true;
  $("#reset-status").textContent = "";
  if (!subject) { status.textContent = "Type a subject first."; return; }
  status.textContent = "Looking " + subject + " up…";
  try {
    const res = await fetch(subjectURL(subject), { cache: "no-store", credentials: "same-origin" });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || "HTTP " + res.status);
    showSubject(body);
    status.textContent = "Read " + time(new Date().toISOString()) + ".";
  } catch (e) {
    $("#lookup-result").hidden = true;
    status.textContent = "Lookup failed: " + e.message;
  }
}

function showSubject(s) {
  const src = { last_charged: "the plan its last call was charged under", subject_plans: "its subject_plans entry", default_plan: "the default plan", query: "asked for" }[s.plan_source] || s.plan_source;
  $("#lookup-plan").replaceChildren(el("span", "Subject "), el("span", s.subject, "subject"), el("span", " — plan " + s.plan + " (" + src + "); " + fmt(s.requests_this_month) + " calls this month; log name " + s.subject_hash + "."));
  const now = Date.now();
  const rows = (s.limits || []).map((l) => {
    const left = l.remaining === 0 ? "NONE LEFT (0)" : fmt(l.remaining);
    const full = l.reset_after_seconds > 0 ? "in " + fmt(l.reset_after_seconds) + " s, at " + time(new Date(now + l.reset_after_seconds * 1000).toISOString()) : "full now";
    const tr = row([l.name, l.requests_per_minute + " / min, burst " + l.burst, el("span", left, l.remaining === 0 ? "bad" : ""), full, l.shadow ? "shadow" : "enforced"]);
    tr.dataset.limit = l.name;
    return tr;
  });
  if (s.daily) {
    const d = s.daily;
    const tr = row(["daily", bound(d.limit) + " a day", el("span", d.limit && d.remaining === 0 ? "NONE LEFT (0)" : fmt(d.remaining), d.limit && d.remaining === 0 ? "bad" : ""), "at " + time(d.reset_at), d.shadow ? "shadow" : "enforced"]);
    tr.dataset.limit = "daily";
    rows.push(tr);
  }
  fill($("#lookup-limits tbody"), rows, "no rate limits", 5);
  const e = s.environments, q = e.quotas;
  const streams = (s.streams || []).map((x) => x.open + " of " + x.limit + " " + x.procedure.split("/").pop()).join("; ") || "no bounded streams";
  defs($("#lookup-other"), [
    ["Open streams", streams],
    ["Environments running", e.running + " of " + bound(q.concurrent_environments)],
    ["Created this month", e.created_this_month + " of " + bound(q.environments_per_month)],
    ["vCPU-hours / GB-hours", fmt(e.vcpu_hours) + " of " + bound(q.vcpu_hours_per_month) + " / " + fmt(e.memory_gb_hours) + " of " + bound(q.memory_gb_hours_per_month)],
    ["Idempotency keys stored", s.idempotency_keys === undefined ? "–" : fmt(s.idempotency_keys)],
  ]);
  $("#lookup-result").hidden = false;
  $("#lookup-result").dataset.subject = s.subject;
}

function askReset() {
  const subject = $("#lookup-result").dataset.subject;
  $("#reset-question").textContent = "Reset the plan's and every operation's rate and the daily count of " + subject +
    "? Its next calls are admitted as if it had called nothing; the action is audited under your name.";
  $("#reset-confirm").hidden = false;
  $("#reset-status").textContent = "";
}

async function reset() {
  const subject = $("#lookup-result").dataset.subject;
  $("#reset-confirm").hidden = true;
  const status = $("#reset-status");
  status.textContent = "Resetting…";
  try {
    const res = await fetch(subjectURL(subject, "reset-limits"), { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}", credentials: "same-origin" });
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || "HTTP " + res.status);
    status.textContent = "Reset: " + body.reset.join(", ") + ".";
    await lookup();
    $("#reset-status").textContent = "Reset: " + body.reset.join(", ") + ".";
  } catch (e) {
    status.textContent = "Reset failed: " + e.message;
  }
}

$("#lookup-button").addEventListener("click", lookup);
$("#subject").addEventListener("keydown", (e) => { if (e.key === "Enter") lookup(); });
$("#reset-button").addEventListener("click", askReset);
$("#reset-yes").addEventListener("click", reset);
$("#reset-no").addEventListener("click", () => { $("#reset-confirm").hidden = true; $("#reset-status").textContent = "Not reset."; });
// A link may name the subject to look up: /dashboard/#subject=<sub>.
if (location.hash.startsWith("#subject=")) {
  $("#subject").value = decodeURIComponent(location.hash.slice("#subject=".length));
  lookup();
}
refresh();
