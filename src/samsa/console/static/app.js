// samsa console: one page, hash routes, live updates by server-sent events (API v1).
// No build step: plain JavaScript; uPlot (vendored) draws the lag charts.
"use strict";

const API = "../api/v1";
const app = { info: null, es: null, route: null, view: null, receivedAt: 0 };

const CAUSES = {
  "unknown": "Unknown cause", "member-joined": "Member joined", "member-rejoined": "Member rejoined",
  "member-left": "Member left", "session-expired": "Session expired",
  "rebalance-timeout": "Rebalance timeout", "sync-timeout": "Sync timeout",
  "max-poll-interval-exceeded": "max.poll.interval.ms exceeded",
  "subscription-changed": "Subscription changed", "topics-changed": "Partitions or topics changed",
  "regex-changed": "Regex resolves to other topics", "static-member-replaced": "Static member replaced",
  "admin-removal": "Removed by an admin", "offsets-reset": "Offsets reset",
  "protocol-upgrade": "Upgraded to the consumer protocol",
  "protocol-downgrade": "Downgraded to the classic protocol",
  "coordinator-loaded": "Coordinator loaded", "group-too-large": "Group over group.max.size",
};

// ------------------------------------------------------------------ helpers

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;"}[c]));
}
function $(sel, root = document) { return root.querySelector(sel); }
function badge(text, cls) {
  return text == null ? "" : `<span class="badge ${esc(cls ?? text)}">${esc(text)}</span>`;
}
function ms(v) {
  if (v == null) return "–";
  const a = Math.abs(v);
  if (a < 1000) return `${Math.round(v)} ms`;
  if (a < 60000) return `${(v / 1000).toFixed(1)} s`;
  if (a < 3600000) return `${Math.floor(v / 60000)} min ${Math.round((a % 60000) / 1000)} s`;
  return `${(v / 3600000).toFixed(1)} h`;
}
function secs(v) { return v == null ? "–" : ms(v * 1000); }
function clock(t) { return t == null ? "–" : new Date(t).toLocaleTimeString(); }
function ago(t) { return t == null ? "–" : `${ms(Date.now() - t)} ago`; }
function tps(list, cls = "") {
  if (list == null) return '<span class="muted">–</span>';
  if (!list.length) return '<span class="muted">none</span>';
  return list.map(([t, p]) => `<span class="tp ${cls}">${esc(t)}-${p}</span>`).join("");
}
function key(tp) { return `${tp[0]}\u0000${tp[1]}`; }
function diff(current, target) {
  // the target beside the current assignment: partitions to add and to revoke
  if (target == null) return tps(current);
  const cur = new Set((current || []).map(key)), tgt = new Set(target.map(key));
  const keep = target.filter(tp => cur.has(key(tp)));
  const add = target.filter(tp => !cur.has(key(tp)));
  const drop = (current || []).filter(tp => !tgt.has(key(tp)));
  if (!keep.length && !add.length && !drop.length) return '<span class="muted">none</span>';
  return (keep.length ? tps(keep) : "") + (add.length ? tps(add, "add") : "") +
    (drop.length ? tps(drop, "revoke") : "");
}
function countdown(value, dir) {
  // a clock that keeps running between updates (dir "down": a deadline, "up": an age)
  if (value == null) return '<span class="muted">–</span>';
  return `<span class="clock" data-clock="${value}" data-dir="${dir}">${ms(value)}</span>`;
}
function tickClocks() {
  const elapsed = performance.now() - app.receivedAt;
  document.querySelectorAll("[data-clock]").forEach(el => {
    const v = Number(el.dataset.clock) + (el.dataset.dir === "down" ? -elapsed : elapsed);
    el.textContent = el.dataset.dir === "down" && v < 0 ? "due" : ms(v);
    el.classList.toggle("urgent", el.dataset.dir === "down" && v < 3000);
  });
}
async function getJSON(path) {
  const r = await fetch(`${API}${path}`);
  if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error || r.statusText);
  return r.json();
}
async function postJSON(path, body) {
  const r = await fetch(`${API}${path}`, {method: "POST", body: JSON.stringify(body),
    headers: {"Content-Type": "application/json"}});
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}
function feature(name) { return !!(app.info && app.info.features[name]); }

// ------------------------------------------------------------------ live updates

function subscribe(group) {
  if (app.es) app.es.close();
  const url = `${API}/stream` + (group ? `?group=${encodeURIComponent(group)}` : "");
  const es = new EventSource(url);
  app.es = es;
  es.onopen = () => $("#live").classList.add("on");
  es.onerror = () => $("#live").classList.remove("on");
  es.addEventListener("groups", e => {
    $("#live").classList.add("on");
    $("#live").title = "live updates";
    if (app.view && app.view.groups) app.view.groups(JSON.parse(e.data));
  });
  es.addEventListener("failure", e => {
    $("#live").classList.remove("on");
    $("#live").title = JSON.parse(e.data).error;
  });
  es.addEventListener("group", e => app.view && app.view.group && app.view.group(JSON.parse(e.data)));
}

// ------------------------------------------------------------------ groups (panel 1)

function groupsView() {
  const v = $("#view");
  v.innerHTML = `<h1>Groups</h1>
    <div class="card"><div class="toolbar">
      <input id="filter" placeholder="Filter by id, state or type" data-testid="group-filter">
      <select id="type-filter"><option value="">all types</option><option>classic</option>
        <option>consumer</option><option>share</option><option>streams</option></select>
      <span class="muted" id="group-count"></span></div>
      <table data-testid="groups"><thead><tr>
        <th class="sortable" data-sort="group_id">Group</th><th class="sortable" data-sort="group_type">Type</th>
        <th class="sortable" data-sort="state">State</th><th class="sortable num" data-sort="members">Members</th>
        <th class="num">Epoch</th><th>Coordinator</th>
        <th class="sortable num" data-sort="lag_records">Lag (records)</th>
        <th class="sortable num" data-sort="lag_seconds">Lag (s)</th><th>Verdict</th>
        <th class="sortable" data-sort="last_at">Last rebalance</th></tr></thead>
      <tbody></tbody></table></div>`;
  let rows = [], sort = "group_id", asc = true;
  const render = () => {
    const text = $("#filter").value.toLowerCase(), type = $("#type-filter").value;
    const shown = rows.filter(g => (!type || g.group_type === type) &&
      (!text || `${g.group_id} ${g.state} ${g.group_type}`.toLowerCase().includes(text)));
    const val = g => ({lag_records: g.lag.records, lag_seconds: g.lag.seconds,
      last_at: g.last_rebalance ? g.last_rebalance.at_ms : 0}[sort] ?? g[sort] ?? "");
    shown.sort((a, b) => (val(a) < val(b) ? -1 : val(a) > val(b) ? 1 : 0) * (asc ? 1 : -1));
    $("#group-count").textContent = `${shown.length} of ${rows.length}`;
    $("tbody", v).innerHTML = shown.map(g => {
      const last = g.last_rebalance;
      const c = g.coordinator || {};
      return `<tr class="clickable" data-group="${esc(g.group_id)}">
        <td><a href="#/group/${encodeURIComponent(g.group_id)}">${esc(g.group_id)}</a></td>
        <td>${esc(g.group_type)}</td><td>${badge(g.state)}</td>
        <td class="num">${g.members ?? "–"}</td><td class="num">${g.epoch ?? "–"}</td>
        <td>${c.node_id ?? "–"}${c.partition != null ? ` <span class="muted">(shard ${c.partition})</span>` : ""}</td>
        <td class="num">${g.lag.records}</td><td class="num">${secs(g.lag.seconds)}</td>
        <td>${g.lag.verdict ? badge(g.lag.verdict) : ""}</td>
        <td>${last ? `${esc(CAUSES[last.cause] || last.cause)} <span class="muted">${ago(last.at_ms)}</span>` : '<span class="muted">–</span>'}</td></tr>`;
    }).join("") || `<tr><td colspan="10" class="muted">No groups.</td></tr>`;
  };
  $("#filter").oninput = render;
  $("#type-filter").onchange = render;
  v.querySelectorAll("th[data-sort]").forEach(th => th.onclick = () => {
    asc = sort === th.dataset.sort ? !asc : true; sort = th.dataset.sort; render();
  });
  $("tbody", v).onclick = e => {
    const tr = e.target.closest("tr[data-group]");
    if (tr && e.target.tagName !== "A") location.hash = `#/group/${encodeURIComponent(tr.dataset.group)}`;
  };
  return { groups: data => { rows = data.groups; app.receivedAt = performance.now(); render(); } };
}

// ------------------------------------------------------------------ a group (panels 2-5)

function groupView(gid) {
  const v = $("#view");
  v.innerHTML = `<h1><a href="#/groups" class="muted">Groups</a> / <span data-testid="group-id">${esc(gid)}</span>
      <span id="g-state"></span></h1>
    <div class="card"><h2>Group</h2><div class="grid" id="g-summary"></div></div>
    <div class="card"><h2>Members</h2><table data-testid="members"><thead><tr>
      <th>Member</th><th>Client</th><th>Host</th><th>Instance</th><th>Rack</th><th>Protocol</th>
      <th class="num">Member epoch</th><th>State</th><th>Current → target</th><th>Pending revocation</th>
      <th class="num">Since heartbeat</th><th class="num">Session ends in</th>
      <th class="num">Rebalance deadline</th></tr></thead><tbody id="g-members"></tbody></table></div>
    <div class="card" id="timeline-card"><h2>Rebalance timeline</h2>
      <ul class="timeline" id="timeline" data-testid="timeline"></ul></div>
    <div class="card" id="share-card" style="display:none"><h2>Share partitions</h2>
      <div class="muted">Records between the share-partition start offset (SPSO) and end offset
        (SPEO), by state; lag counts the records not yet acknowledged or archived.</div>
      <table data-testid="share-partitions"><thead><tr><th>Partition</th>
        <th class="num">Start offset</th><th class="num">End offset</th><th class="num">Lag</th>
        <th class="num">In flight</th><th class="num">Available</th><th class="num">Acquired</th>
        <th class="num">Acknowledged</th><th class="num">Archived</th></tr></thead>
        <tbody id="share-rows"></tbody></table></div>
    <div class="card" id="lag-card"><h2>Lag <span id="lag-verdict"></span></h2>
      <div class="muted" id="lag-total"></div><div class="chart" id="lag-chart"></div>
      <table data-testid="lag"><thead><tr><th>Partition</th><th class="num">Committed</th>
        <th class="num">Log start</th><th class="num">Log end</th><th class="num">Lag (records)</th>
        <th class="num">Lag (s)</th><th class="num">Phantom</th><th>Verdict</th></tr></thead>
        <tbody id="lag-rows"></tbody></table></div>
    <div class="card" id="reset-card"><h2>Offset reset</h2>
      <div class="toolbar">
        <select id="r-mode" data-testid="reset-mode"><option value="earliest">earliest</option>
          <option value="latest">latest</option><option value="timestamp">timestamp</option>
          <option value="shift">shift by</option><option value="offset">specific offset</option></select>
        <input id="r-value" data-testid="reset-value" placeholder="value" size="14">
        <input id="r-time" type="datetime-local" style="display:none">
        <input id="r-topics" data-testid="reset-topics" placeholder="topics (t or t:0,1; empty: all committed)" size="36">
        <button class="secondary" id="r-preview" data-testid="reset-preview">Preview</button>
        <button id="r-execute" data-testid="reset-execute" disabled>Execute</button>
      </div>
      <div id="r-result" data-testid="reset-result"></div>
      <h2 style="margin-top:14px">Audit log</h2>
      <table data-testid="audit"><thead><tr><th>When</th><th>Principal</th><th>Action</th>
        <th>Result</th><th>Partitions</th><th>Message</th></tr></thead><tbody id="audit"></tbody></table>
    </div>`;
  if (!feature("history")) {
    $("#timeline-card").innerHTML = `<h2>Rebalance timeline</h2><p class="muted">The rebalance
      history is kept by samsa brokers; this cluster does not tell it.</p>`;
  }
  let chart = null, preview = null;
  const mode = $("#r-mode");
  mode.onchange = () => {
    const t = mode.value === "timestamp";
    $("#r-time").style.display = t ? "" : "none";
    $("#r-value").style.display = ["shift", "offset"].includes(mode.value) ? "" : "none";
    $("#r-execute").disabled = true;
  };
  mode.onchange();
  const request = () => {
    const body = {mode: mode.value};
    if (mode.value === "timestamp") body.value = new Date($("#r-time").value).getTime();
    else if (["shift", "offset"].includes(mode.value)) body.value = Number($("#r-value").value);
    const topics = $("#r-topics").value.split(/\s+/).filter(Boolean);
    if (topics.length) body.topics = topics;
    return body;
  };
  const showPlan = (data, executed) => {
    const rows = data.partitions.map(p => `<tr><td>${esc(p.topic)}-${p.partition}</td>
      <td class="num">${p.current ?? "–"}</td><td class="num">${p.new}</td></tr>`).join("");
    $("#r-result").innerHTML =
      (data.refused ? `<div class="banner refused" data-testid="reset-refused">Refused: ${esc(data.refused)}</div>` : "") +
      (executed ? `<div class="banner ok" data-testid="reset-done">Executed: ${data.partitions.length} partition(s) reset.</div>` :
        `<div class="muted">Dry run: nothing changed.</div>`) +
      `<table><thead><tr><th>Partition</th><th class="num">Current</th><th class="num">New</th></tr></thead><tbody>${rows}</tbody></table>`;
  };
  const loadAudit = async () => {
    const data = await getJSON(`/audit?group=${encodeURIComponent(gid)}`);
    $("#audit").innerHTML = data.entries.slice(0, 20).map(e => `<tr><td>${clock(e.at_ms)}</td>
      <td>${esc(e.principal)}</td><td>${esc(e.action)}${e.dry_run ? " (preview)" : ""} ${esc(e.mode)}${e.value != null ? " " + esc(e.value) : ""}</td>
      <td>${badge(e.result)}</td><td class="num">${(e.partitions || []).length}</td>
      <td>${esc(e.message || "")}</td></tr>`).join("") || `<tr><td colspan="6" class="muted">No actions yet.</td></tr>`;
  };
  $("#r-preview").onclick = async () => {
    $("#r-result").innerHTML = '<span class="muted">Planning…</span>';
    $("#r-execute").disabled = true;
    try {
      preview = request();
      const data = await postJSON(`/groups/${encodeURIComponent(gid)}/offsets/preview`, preview);
      showPlan(data, false);
      $("#r-execute").disabled = !feature("actions") || !!data.refused;
      $("#r-execute").title = feature("actions") ? "" : "changing actions are off in this console";
    } catch (err) {
      $("#r-result").innerHTML = `<div class="banner refused">${esc(err.message)}</div>`;
    }
    loadAudit();
  };
  $("#r-execute").onclick = async () => {
    $("#r-execute").disabled = true;
    try {
      showPlan(await postJSON(`/groups/${encodeURIComponent(gid)}/offsets/reset`, preview), true);
    } catch (err) {
      $("#r-result").innerHTML = `<div class="banner refused" data-testid="reset-refused">${esc(err.message)}</div>`;
    }
    loadAudit();
  };
  loadAudit();

  const renderGroup = g => {
    if (!g) {
      $("#g-state").innerHTML = badge("Dead");
      $("#g-summary").innerHTML = `<div class="muted">This group is not known to this coordinator.</div>`;
      $("#g-members").innerHTML = "";
      return;
    }
    $("#g-state").innerHTML = `${badge(g.state)} <span class="muted">${esc(g.group_type)}</span>`;
    const modern = g.group_type === "consumer" || g.group_type === "share";
    const share = g.group_type === "share";
    // a share group commits no offsets: its share partitions take the lag and reset cards' place
    $("#share-card").style.display = share ? "" : "none";
    $("#lag-card").style.display = share ? "none" : "";
    $("#reset-card").style.display = share ? "none" : "";
    if (share) loadShare();
    const kv = (k, val) => `<div class="kv"><div class="k">${k}</div><div class="v">${val}</div></div>`;
    $("#g-summary").innerHTML = [
      kv("State", badge(g.state)), kv("Type", esc(g.group_type)),
      kv("Protocol", esc(g.protocol || "–")),
      modern ? kv("Group epoch", g.group_epoch ?? "–") : kv("Generation", g.generation ?? "–"),
      modern ? kv("Assignment epoch", g.assignment_epoch ?? "–") : kv("Leader", `<span class="mono">${esc(g.leader || "–")}</span>`),
      kv("Members", g.members.length),
      kv("Coordinator", `node ${g.coordinator.node_id ?? "–"}${g.coordinator.partition != null ? `, shard ${g.coordinator.partition}` : ""}`),
      kv("Rebalance deadline", g.rebalance_deadline_kind ? `${esc(g.rebalance_deadline_kind)}: ${countdown(g.rebalance_deadline_in_ms, "down")}` : "–"),
    ].join("");
    $("#g-members").innerHTML = g.members.map(m => {
      const live = m.liveness || {};
      return `<tr data-member="${esc(m.member_id)}"><td class="mono">${esc(m.member_id)}${m.is_leader ? " " + badge("leader", "info") : ""}</td>
        <td>${esc(m.client_id)}</td><td>${esc(m.client_host)}</td><td>${esc(m.instance_id || "–")}</td>
        <td>${esc(m.rack_id || "–")}</td><td>${esc(m.protocol)} <span class="muted">${esc((m.protocols || []).join(", "))}</span></td>
        <td class="num">${m.member_epoch ?? "–"}</td><td>${m.state ? badge(m.state) : "–"}</td>
        <td data-testid="assignment">${diff(m.assigned, m.target)}</td><td>${tps(m.pending_revocation)}</td>
        <td class="num">${countdown(live.since_heartbeat_ms, "up")}</td>
        <td class="num">${countdown(live.session_expires_in_ms, "down")}</td>
        <td class="num">${live.rebalance_deadline_kind ? esc(live.rebalance_deadline_kind) + " " + countdown(live.rebalance_deadline_in_ms, "down") : "–"}</td></tr>`;
    }).join("") || `<tr><td colspan="13" class="muted">No members.</td></tr>`;
  };

  const num = v => v == null ? "–" : v;
  const loadShare = async () => {
    let data;
    try { data = await getJSON(`/groups/${encodeURIComponent(gid)}/share-partitions`); } catch (err) {
      $("#share-rows").innerHTML = `<tr><td colspan="9" class="muted">${esc(err.message)}</td></tr>`; return;
    }
    $("#share-rows").innerHTML = data.partitions.map(p => `<tr data-partition="${esc(p.topic)}-${p.partition}">
      <td>${esc(p.topic)}-${p.partition}</td><td class="num">${num(p.start_offset)}</td>
      <td class="num">${num(p.end_offset)}</td><td class="num" data-testid="share-lag">${num(p.lag)}</td>
      <td class="num">${num(p.in_flight)}</td><td class="num">${num(p.available)}</td>
      <td class="num" data-testid="share-acquired">${num(p.acquired)}</td><td class="num">${num(p.acknowledged)}</td>
      <td class="num" data-testid="share-archived">${num(p.archived)}</td></tr>`).join("") ||
      `<tr><td colspan="9" class="muted">No share partitions yet (nothing fetched).</td></tr>`;
  };

  const renderHistory = events => {
    if (!events || !feature("history")) return;
    $("#timeline").innerHTML = events.slice().reverse().map(e => {
      const total = Math.max((e.ended_ms ?? Date.now()) - e.at_ms, 1);
      const bar = e.bump ? `<div class="phases">${e.phases.slice(1).map(p =>
        `<span class="ph-${esc(p.name)}" title="${esc(p.name)}: ${ms(p.duration_ms)}" style="width:${Math.max(100 * p.duration_ms / total, 1)}%"></span>`).join("")}</div>` : "";
      const phases = e.phases.map(p => `${esc(p.name)} <b>+${ms(p.duration_ms)}</b>` +
        (p.held_by.length ? ` <span>(held up by <span class="mono">${p.held_by.map(esc).join(", ")}</span>${p.note ? ": " + esc(p.note) : ""})</span>` :
          p.note ? ` <span>(${esc(p.note)})</span>` : "")).join(" → ");
      const detail = Object.entries(e.detail || {}).map(([k, val]) => `${esc(k)}=${esc(val)}`).join(", ");
      return `<li class="${e.bump ? "" : "noted"}" data-testid="event" data-cause="${esc(e.cause)}" data-seq="${e.seq}">
        <div class="head"><span class="cause">${esc(CAUSES[e.cause] || e.cause)}</span>
          ${e.member_id ? `<span class="mono">${esc(e.member_id)}</span>` : ""}
          ${e.bump ? `<span>epoch ${e.epoch_before} → ${e.epoch_after >= 0 ? e.epoch_after : "…"}</span>` : ""}
          ${badge(e.outcome)} <span class="muted">${clock(e.at_ms)}</span>
          ${e.duration_ms != null && e.bump ? `<span data-testid="time-to-stable">${e.outcome === "stable" ? "stable after" : "took"} ${ms(e.duration_ms)}</span>` : ""}</div>
        ${e.reason ? `<div class="muted">“${esc(e.reason)}”</div>` : ""}
        ${e.members.length ? `<div class="muted">also: <span class="mono">${e.members.map(esc).join(", ")}</span></div>` : ""}
        ${bar}<div class="phase-list">${phases}</div>
        ${detail ? `<div class="muted mono">${detail}</div>` : ""}</li>`;
    }).join("") || `<li class="noted"><span class="muted">No rebalances recorded yet.</span></li>`;
  };

  const renderLag = lag => {
    $("#lag-verdict").innerHTML = lag.partitions.length ? badge(lag.verdict) : "";
    $("#lag-total").textContent = `${lag.lag_records} records behind, ${secs(lag.lag_seconds)} behind` +
      (lag.phantom_records ? `, of which ${lag.phantom_records} phantom (no longer in the log)` : "");
    $("#lag-rows").innerHTML = lag.partitions.map(p => `<tr><td>${esc(p.topic)}-${p.partition}</td>
      <td class="num">${p.committed ?? "–"}</td><td class="num">${p.log_start}</td><td class="num">${p.log_end}</td>
      <td class="num">${p.lag_records}</td><td class="num">${secs(p.lag_seconds)}</td>
      <td class="num">${p.phantom_records ? `${p.phantom_records} <span class="muted">${esc(p.phantom_cause)}</span>` : 0}</td>
      <td>${badge(p.verdict)}</td></tr>`).join("") || `<tr><td colspan="8" class="muted">No committed offsets.</td></tr>`;
    const times = new Map();
    for (const p of lag.partitions) for (const [t, r, s] of p.series) {
      const cur = times.get(t) || [0, 0];
      times.set(t, [cur[0] + r, Math.max(cur[1], s || 0)]);
    }
    const xs = [...times.keys()].sort((a, b) => a - b);
    const data = [xs.map(t => t / 1000), xs.map(t => times.get(t)[0]), xs.map(t => times.get(t)[1])];
    if (!window.uPlot || !xs.length) return;
    if (!chart) {
      chart = new uPlot({width: Math.min($("#lag-chart").clientWidth || 900, 1100), height: 200,
        series: [{}, {label: "lag (records)", stroke: "#4338ca", width: 2, scale: "r"},
                 {label: "lag (s)", stroke: "#f59e0b", width: 2, scale: "s"}],
        axes: [{}, {scale: "r", label: "records"}, {scale: "s", side: 1, label: "seconds",
               grid: {show: false}}]}, data, $("#lag-chart"));
    } else chart.setData(data);
  };

  return {
    groups: () => {},
    group: data => {
      app.receivedAt = performance.now();
      renderGroup(data.group);
      renderHistory(data.history);
      renderLag(data.lag);
    },
  };
}

// ------------------------------------------------------------------ health (panel 6)

/** A coordinator shard's kind, from Kafka's CoordinatorType name. */
function coordinatorType(type) {
  return type === "TRANSACTION" ? "transaction" : "group";
}

function healthView() {
  const v = $("#view");
  v.innerHTML = `<h1>Coordinator health</h1><div id="health" data-testid="health"><p class="muted">Loading…</p></div>`;
  const load = async () => {
    let h;
    try { h = await getJSON("/health"); } catch (err) {
      $("#health").innerHTML = `<div class="card muted">${esc(err.message)}</div>`; return;
    }
    app.receivedAt = performance.now();
    const cluster = h.cluster;
    $("#health").innerHTML = `<div class="card"><div class="grid">
        <div class="kv"><div class="k">Node</div><div class="v">${h.node_id}</div></div>
        <div class="kv"><div class="k">Shards active</div><div class="v">${h.active}</div></div>
        <div class="kv"><div class="k">Shards loading</div><div class="v">${h.loading}</div></div>
        <div class="kv"><div class="k">Last fail-over</div><div class="v" data-testid="since-failover">${h.since_failover_ms == null ? "none" : countdown(h.since_failover_ms, "up") + " ago"}</div></div>
        ${cluster ? `<div class="kv"><div class="k">Live nodes</div><div class="v">${cluster.live_nodes.join(", ")}</div></div>
        <div class="kv"><div class="k">Take-overs / hand-offs / lost</div><div class="v">${cluster.takeovers} / ${cluster.handoffs} / ${cluster.lost}</div></div>` : ""}
      </div></div>
      <div class="two"><div class="card"><h2>Shards on this node</h2><table data-testid="node-shards"><thead><tr><th>Coordinator</th><th>Shard</th><th>Status</th>
        <th class="num">Groups / txn ids</th><th class="num">Load time</th><th>Loaded</th><th>From node</th><th class="num">Lease epoch</th></tr></thead><tbody>
        ${h.shards.map(s => `<tr><td>${coordinatorType(s.type)}</td><td>${s.partition}</td><td>${badge(s.status)}</td><td class="num">${s.groups}</td>
          <td class="num">${ms(s.load_ms)}</td><td>${clock(s.loaded_at_ms)}</td><td>${s.previous_node ?? "–"}</td>
          <td class="num">${s.lease_epoch ?? "–"}</td></tr>`).join("")}</tbody></table></div>
      ${cluster ? `<div class="card"><h2>Coordinator shard leases</h2><table data-testid="coordinator-leases"><thead><tr><th>Coordinator</th><th>Shard</th><th>Owner</th><th class="num">Epoch</th></tr></thead><tbody>
        ${cluster.coordinator_leases.map(l => `<tr><td>${coordinatorType(l.type)}</td><td>${esc(l.topic)}-${l.partition}</td><td>${l.owner ?? "–"}</td><td class="num">${l.epoch}</td></tr>`).join("")}
        </tbody></table></div>` : ""}</div>`;
  };
  load();
  return { groups: () => load() };
}

// ------------------------------------------------------------------ share groups (panel 7)

function shareView() {
  const v = $("#view");
  v.innerHTML = `<h1>Share groups</h1><div class="card">
    <p class="muted">Share groups (KIP-932, queues): their members share partitions and acknowledge
      records one by one. Open a group for its members, assignments and share partitions (start
      offset, lag, in-flight, acquired and archived records).</p>
    <table data-testid="share-groups"><thead><tr><th>Group</th><th>State</th>
      <th class="num">Members</th><th class="num">Group epoch</th><th>Coordinator</th></tr></thead>
      <tbody></tbody></table></div>`;
  const render = data => {
    app.receivedAt = performance.now();
    const rows = data.groups.filter(g => g.group_type === "share")
      .sort((a, b) => a.group_id < b.group_id ? -1 : 1);
    $("tbody", v).innerHTML = rows.map(g => `<tr data-group="${esc(g.group_id)}">
      <td><a href="#/group/${encodeURIComponent(g.group_id)}">${esc(g.group_id)}</a></td>
      <td>${badge(g.state)}</td><td class="num">${g.members ?? "–"}</td>
      <td class="num">${g.epoch ?? "–"}</td><td>${(g.coordinator || {}).node_id ?? "–"}</td></tr>`).join("") ||
      `<tr><td colspan="5" class="muted">No share groups.</td></tr>`;
  };
  return { groups: render };
}

// ------------------------------------------------------------------ routing

function route() {
  const hash = location.hash || "#/groups";
  const [, name, ...rest] = hash.split("/");
  const gid = name === "group" ? decodeURIComponent(rest.join("/")) : null;
  document.querySelectorAll("[data-nav]").forEach(a => a.classList.toggle("active", a.dataset.nav === name));
  app.view = name === "group" ? groupView(gid) : name === "health" ? healthView() :
    name === "share" ? shareView() : groupsView();
  subscribe(gid);
}

async function main() {
  app.info = await getJSON("");
  $("#source").textContent = app.info.source === "broker" ? "samsa broker" : "Kafka cluster";
  $("#principal").textContent = `${app.info.principal}${app.info.features.actions ? "" : " · read-only"}`;
  document.querySelectorAll("[data-feature]").forEach(el => {
    if (!feature(el.dataset.feature)) el.style.display = "none";
  });
  window.addEventListener("hashchange", route);
  setInterval(tickClocks, 250);
  route();
}
main();
