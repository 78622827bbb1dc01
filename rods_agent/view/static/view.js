"use strict";
// rods view: everything below reads the data embedded in this file; nothing is fetched.
(() => {
  const PER_PAGE = 100;
  const S = { data: null, chunks: [], cache: new Map(), view: [], page: 0, open: null, filters: {} };

  // -- small helpers ------------------------------------------------------------------------
  function el(tag, props, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const num = (x, d = 3) => (typeof x === "number" ? x.toFixed(d) : x === null || x === undefined ? "-" : String(x));
  const plural = (n, word) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;

  async function unpack(b64) {
    const bin = atob(b64.trim());
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  const task = (e) => S.data.tasks[e.t];
  const source = (e) => S.data.sources[e.s];
  const outcome = (e) => (e.ok ? "success" : e.g > 0 ? "partial" : "failed");
  const where = (e) => (e.p === null || e.p === undefined ? `trial ${e.k}` : `step ${e.p} · #${e.k}`);

  // -- filters ------------------------------------------------------------------------------
  const FILTERS = [
    ["source", "run", (e) => source(e).name],
    ["domain", "domain", (e) => task(e)?.d],
    ["skill", "skill", (e) => task(e)?.sk],
    ["variant", "variant", (e) => task(e)?.va],
    ["depth", "signature depth", (e) => task(e)?.dp],
    ["origin", "origin", (e) => task(e)?.o],
    ["outcome", "outcome", outcome],
    ["termination", "ended by", (e) => e.e],
    ["rule", "a turn failed by", (e) => e.f, true],
    ["zone", "zone", (e) => e.z],
    ["pick", "kept as", (e) => e.pk],
  ];
  const SORTS = {
    file: ["as written", null],
    reward_asc: ["reward, lowest first", (a, b) => a.r - b.r],
    reward_desc: ["reward, highest first", (a, b) => b.r - a.r],
    variance_desc: ["variance, highest first", (a, b) => b.v - a.v],
    step_asc: ["step, first first", (a, b) => (a.p ?? 0) - (b.p ?? 0)],
    step_desc: ["step, last first", (a, b) => (b.p ?? 0) - (a.p ?? 0)],
    task: ["task", (a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.k - b.k)],
  };

  function buildFilters() {
    const box = document.getElementById("filters");
    const eps = S.data.episodes;
    for (const [key, label, get, many] of FILTERS) {
      const counts = new Map();
      for (const e of eps) {
        const v = get(e);
        for (const x of many ? v || [] : [v]) {
          if (x === undefined || x === null) continue;
          counts.set(String(x), (counts.get(String(x)) || 0) + 1);
        }
      }
      if (counts.size < (many ? 1 : 2)) continue;
      const values = [...counts.keys()].sort((a, b) => (isNaN(a) || isNaN(b) ? a.localeCompare(b) : a - b));
      const select = el("select", { id: `f-${key}`, "data-filter": key, onchange: () => { S.filters[key] = select.value; refresh(); } },
        el("option", { value: "", text: "all" }),
        values.map((v) => el("option", { value: v, text: `${v} (${counts.get(v)})` })));
      box.append(el("label", {}, label, select));
    }
    if (eps.some((e) => e.p !== null && e.p !== undefined)) {
      for (const [key, label] of [["step_min", "from step"], ["step_max", "to step"]]) {
        const input = el("input", { id: `f-${key}`, type: "number", min: "0", oninput: () => { S.filters[key] = input.value; refresh(); } });
        box.append(el("label", {}, label, input));
      }
    }
    const search = el("input", { id: "f-task", type: "search", placeholder: "task id or parent", oninput: () => { S.filters.task = search.value.trim(); refresh(); } });
    box.append(el("label", {}, "task", search));
    const sort = el("select", { id: "f-sort", onchange: () => { S.filters.sort = sort.value; refresh(); } },
      Object.entries(SORTS).map(([k, [name]]) => el("option", { value: k, text: name })));
    box.append(el("label", {}, "sort", sort));
    box.append(el("button", { type: "button", text: "clear filters", onclick: clearFilters }));
  }

  function clearFilters() {
    S.filters = {};
    for (const node of document.querySelectorAll("#filters select, #filters input")) node.value = node.id === "f-sort" ? "file" : "";
    refresh();
  }

  function setTaskFilter(id) {
    S.filters.task = id;
    document.getElementById("f-task").value = id;
    showTab("episodes");
    refresh();
  }

  function matches(e) {
    const f = S.filters;
    for (const [key, , get, many] of FILTERS) {
      const want = f[key];
      if (!want) continue;
      const v = get(e);
      if (many ? !(v || []).map(String).includes(want) : String(v) !== want) return false;
    }
    if (f.step_min !== undefined && f.step_min !== "" && !((e.p ?? -1) >= Number(f.step_min))) return false;
    if (f.step_max !== undefined && f.step_max !== "" && !((e.p ?? Infinity) <= Number(f.step_max))) return false;
    if (f.task) {
      const needle = f.task.toLowerCase();
      const t = task(e);
      if (!e.t.toLowerCase().includes(needle) && !(t && t.par && t.par.toLowerCase().includes(needle))) return false;
    }
    return true;
  }

  function refresh() {
    const eps = S.data.episodes;
    const view = [];
    for (let i = 0; i < eps.length; i++) if (matches(eps[i])) view.push(i);
    const cmp = SORTS[S.filters.sort || "file"][1];
    if (cmp) view.sort((a, b) => cmp(eps[a], eps[b]) || a - b);
    S.view = view;
    S.page = 0;
    renderList();
  }

  // -- the list -----------------------------------------------------------------------------
  function pips(e) {
    const box = el("span", { class: "pips", title: `${e.tp} of ${e.tt} turns passed` });
    for (let i = 0; i < e.tt; i++) box.append(el("span", { class: `pip ${i < e.tp ? "ok" : "bad"}` }));
    return box;
  }
  // the pips count passed turns, not which ones; the episode shows each turn

  function renderList() {
    const eps = S.data.episodes;
    const total = eps.length;
    document.getElementById("count").textContent =
      S.view.length === total ? `${plural(total, "episode")}` : `${S.view.length.toLocaleString("en-US")} of ${plural(total, "episode")}`;
    const pages = Math.max(1, Math.ceil(S.view.length / PER_PAGE));
    const pager = document.getElementById("pager");
    pager.replaceChildren(
      el("span", { text: `page ${S.page + 1} of ${pages}` }),
      el("button", { type: "button", text: "‹ prev", disabled: S.page === 0, onclick: () => { S.page--; renderList(); } }),
      el("button", { type: "button", text: "next ›", disabled: S.page >= pages - 1, onclick: () => { S.page++; renderList(); } }),
    );
    const rows = S.view.slice(S.page * PER_PAGE, (S.page + 1) * PER_PAGE).map((i) => {
      const e = eps[i];
      const out = outcome(e);
      return el("tr", { "data-i": i, class: i === S.open ? "selected" : "", onclick: () => openEpisode(i) },
        el("td", { text: source(e).name }),
        el("td", { text: e.t }),
        el("td", { text: where(e) }),
        el("td", { class: "num", text: num(e.r) }),
        el("td", {}, pips(e)),
        el("td", {}, el("span", { class: `tag ${out === "success" ? "ok" : out === "partial" ? "part" : "bad"}`, text: out })),
        el("td", { text: e.e }),
        el("td", { text: e.f.join(", ") }));
    });
    document.querySelector("#list tbody").replaceChildren(...rows);
  }

  // -- one episode --------------------------------------------------------------------------
  async function details(i) {
    const size = S.data.meta.chunk;
    const c = Math.floor(i / size);
    if (!S.cache.has(c)) S.cache.set(c, await unpack(S.chunks[c]));
    return S.cache.get(c)[i % size];
  }

  function canonical(text) {
    try {
      const sort = (v) => (Array.isArray(v) ? v.map(sort) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])])) : v);
      return JSON.stringify(sort(JSON.parse(text)));
    } catch (err) {
      return text;
    }
  }

  function fact(label, value) {
    return el("div", {}, el("span", { text: label }), " ", value instanceof Node ? value : String(value ?? "-"));
  }

  function stepInfo(rw, k) {
    if (k >= rw.length) return null;
    const progress = rw.slice(0, k + 1).reduce((a, b) => a + b, 0);
    return el("span", { class: `stepinfo${rw[k] > 0 ? " gain" : ""}`, title: "the step's reward and the progress after it" },
      `step ${k + 1} · reward ${rw[k] > 0 ? "+" : ""}${num(rw[k], 3)} · progress ${num(progress, 3)}`);
  }

  function cutNote(m, d) {
    return m.cut ? el("span", { class: "cut", text: `… ${m.cut.toLocaleString("en-US")} more characters cut from this page (whole text: ${d.w})` }) : null;
  }

  // Messages of one turn; returns [nodes, the agent's calls].
  function renderMessages(msgs, from, to, d, counter) {
    const nodes = [];
    const calls = [];
    let i = from;
    while (i < to) {
      const m = msgs[i];
      if (m.r === "assistant") {
        const k = counter.step++;
        const box = el("div", { class: "msg assistant" }, stepInfo(d.rw, k), el("span", { class: "who", text: "agent" }),
          m.c || null, cutNote(m, d));
        nodes.push(box);
        let j = i + 1;
        for (const [name, args] of m.calls || []) {
          calls.push([name, args]);
          const out = j < to && msgs[j].r === "tool" ? msgs[j++] : null;
          const error = out && /^Error/.test(out.c || "");
          box.append(el("details", { class: "msg tool" },
            el("summary", {}, el("span", { class: "call", text: `→ ${name}(${args})` }), error ? el("span", { class: "rule", text: "  error" }) : null),
            el("pre", { text: out ? out.c : "(no output: the episode ended)" }), out ? cutNote(out, d) : null));
        }
        i = j;
        continue;
      }
      if (m.r === "tool") {
        nodes.push(el("details", { class: "msg tool" }, el("summary", { text: `← ${m.n || "tool"}` }), el("pre", { text: m.c }), cutNote(m, d)));
      } else if (m.r === "system") {
        nodes.push(el("div", { class: "msg system" }, el("span", { class: "who", text: "environment" }), m.c ?? "", cutNote(m, d)));
      } else {
        nodes.push(el("div", { class: `msg ${m.r}` }, el("span", { class: "who", text: m.r === "user" ? "customer" : m.r }), m.c ?? "", cutNote(m, d)));
      }
      i++;
    }
    return [nodes, calls];
  }

  function renderGold(turn, calls) {
    const box = el("div", { class: "gold" });
    if (!turn) return el("div", { class: "gold muted", text: "this task's gold is not in the page" });
    const made = calls.map(([n, a]) => [n, canonical(a)]);
    box.append(el("h4", { text: "the customer asks" }), el("div", { text: turn.q }));
    if (turn.calls.length) {
      box.append(el("h4", { text: "gold calls" }));
      const ol = el("ol");
      for (const [name, args] of turn.calls) {
        const exact = made.some(([n, a]) => n === name && a === canonical(args));
        const named = made.some(([n]) => n === name);
        const mark = exact ? ["match-yes", "✓ made"] : named ? ["match-args", "~ called with other arguments"] : ["match-no", "✗ not called"];
        ol.append(el("li", {}, el("span", { class: "call", text: `${name}(${args})` }), " ", el("span", { class: mark[0], text: mark[1] })));
      }
      box.append(ol);
    } else {
      box.append(el("h4", { text: "gold calls" }), el("div", { class: "muted", text: "none: nothing to do but answer" }));
    }
    const extra = calls.filter(([n, a]) => !turn.calls.some(([gn, ga]) => gn === n && canonical(ga) === canonical(a)));
    if (extra.length) {
      box.append(el("h4", { text: `agent calls not in the gold (${extra.length})` }),
        el("ul", {}, extra.slice(0, 12).map(([n, a]) => el("li", { class: "call", text: `${n}(${a})` }))));
    }
    if (turn.out.length) box.append(el("h4", { text: "must say" }), el("ul", {}, turn.out.map((o) => el("li", { text: o }))));
    if (turn.wh.length) box.append(el("h4", { text: "withheld tools" }), el("div", { text: turn.wh.join(", ") }));
    if (turn.hid.length) box.append(el("h4", { text: "facts held back until asked" }), el("div", { text: turn.hid.join(", ") }));
    return box;
  }

  async function openEpisode(i) {
    S.open = i;
    for (const row of document.querySelectorAll("#list tbody tr")) row.classList.toggle("selected", Number(row.dataset.i) === i);
    history.replaceState(null, "", `#e=${i}`);
    const pane = document.getElementById("detail-pane");
    pane.replaceChildren(el("p", { class: "hint", text: "decompressing…" }));
    const e = S.data.episodes[i];
    const d = await details(i);
    if (S.open !== i) return;
    const t = task(e);
    const root = el("article", { class: "episode", "data-i": i });
    root.append(el("h2", { text: `${e.t} · ${source(e).name} · ${where(e)}` }));
    const facts = el("div", { class: "facts" },
      fact("outcome", outcome(e)), fact("reward", num(e.r)), fact("progress", num(e.g)),
      fact("turns passed", `${e.tp} of ${e.tt}`), fact("ended by", e.e), fact("agent steps", e.n),
      fact("tokens", e.tok));
    if (t) {
      facts.append(fact("domain", t.d), fact("skill", t.sk), fact("variant", t.va), fact("signature depth", t.dp), fact("origin", t.o + (t.gen ? ` (generation ${t.gen})` : "")));
      if (t.par) facts.append(fact("parent", el("a", { class: "link", text: t.par, onclick: () => setTaskFilter(t.par) })));
      if (t.mode || t.aug) facts.append(fact("synthesized by", [t.mode, t.aug].filter(Boolean).join(" + ")));
    }
    if (e.z) facts.append(fact("zone at this step", e.z));
    if (d.grp) facts.append(fact("group rewards", d.grp.map((x) => num(x, 2)).join(" ")), fact("group variance", num(e.v, 4)));
    else facts.append(fact("variance over trials", num(e.v, 4)));
    if (d.kept !== undefined && d.kept !== null) facts.append(fact("in the update", d.kept ? "yes" : "no (zero variance)"));
    if (e.pk) facts.append(fact("kept as", e.pk));
    root.append(facts);
    if (d.err.length) root.append(el("p", { class: "error", text: `errors: ${d.err.join(" | ")}` }));
    if (t && t.sig) root.append(el("p", { class: "muted" }, "signature ", el("span", { class: "call", text: t.sig })));

    const msgs = d.m;
    const policy = msgs.length && msgs[0].sys !== undefined ? S.data.systems[msgs[0].sys] : null;
    if (policy !== null) root.append(el("details", { class: "policy" }, el("summary", { text: `policy (system prompt, ${policy.length.toLocaleString("en-US")} characters)` }), el("pre", { text: policy })));
    if (t) root.append(el("details", { class: "block" }, el("summary", { text: `customer: ${t.user}` }),
      el("div", { class: "facts" }, Object.entries(t.facts).map(([k, v]) => fact(k, v)))));

    const counter = { step: 0 };
    const starts = d.tr.map((r) => r.m);
    const first = starts.find((m) => m !== null && m !== undefined) ?? msgs.length;
    const lead = msgs.slice(policy !== null ? 1 : 0, first);
    if (lead.length) root.append(...renderMessages(msgs, policy !== null ? 1 : 0, first, d, counter)[0]);
    d.tr.forEach((r, j) => {
      const from = r.m;
      const next = starts.slice(j + 1).find((m) => m !== null && m !== undefined);
      const to = next ?? msgs.length;
      const reached = from !== null && from !== undefined;
      const [nodes, calls] = reached ? renderMessages(msgs, from, to, d, counter) : [[el("p", { class: "muted", text: "not reached" })], []];
      const head = el("header", {},
        el("span", { class: "verdict", text: `Turn ${j + 1} of ${d.tr.length}: ${r.ok ? "passed" : "failed"}` }));
      if (!r.ok) head.append(el("ul", { class: "rules" }, r.f.map(([rule, text]) => el("li", { class: "rule" }, el("code", { text: rule }), " ", text))));
      root.append(el("section", { class: `turn ${r.ok ? "passed" : "failed"}`, "data-turn": j },
        head, el("div", { class: "turn-body" }, el("div", { class: "conversation" }, nodes), renderGold(t ? t.turns[j] : null, calls))));
    });
    if (!d.tr.length) root.append(...renderMessages(msgs, policy !== null ? 1 : 0, msgs.length, d, counter)[0]);

    const others = S.data.episodes.map((x, k) => [x, k]).filter(([x, k]) => x.t === e.t && k !== i);
    if (others.length) {
      root.append(el("h3", { text: `other episodes of ${e.t} (${others.length})` }),
        el("div", { class: "others" }, others.slice(0, 40).map(([x, k]) =>
          el("div", {}, el("a", { class: "link", text: `${source(x).name} · ${where(x)}`, onclick: () => openEpisode(k) }), ` reward ${num(x.r)}, ${outcome(x)}`))));
    }
    pane.replaceChildren(root);
  }

  function step(delta) {
    if (!S.view.length) return;
    const at = S.view.indexOf(S.open);
    const next = Math.min(S.view.length - 1, Math.max(0, at + delta));
    if (Math.floor(next / PER_PAGE) !== S.page) { S.page = Math.floor(next / PER_PAGE); renderList(); }
    openEpisode(S.view[next]);
  }

  // -- runs ---------------------------------------------------------------------------------
  function table(head, rows, cls) {
    return el("table", { class: cls || "" }, el("thead", {}, el("tr", {}, head.map((h) => el("th", { text: h })))),
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c instanceof Node ? c : String(c ?? "-")))))));
  }

  function renderRuns() {
    const box = document.getElementById("runs-tab");
    const sources = S.data.sources;
    if (sources.length > 1) {
      const labels = [];
      for (const s of sources) for (const [label] of s.cards) if (!labels.includes(label)) labels.push(label);
      box.append(el("h2", { text: "side by side" }),
        table(["", ...sources.map((s) => s.name)], labels.map((label) => [label, ...sources.map((s) => (s.cards.find((c) => c[0] === label) || [])[1] ?? "")])));
    }
    for (const s of sources) {
      const run = el("section", { class: "run", "data-run": s.name });
      run.append(el("h2", { text: `${s.name} (${s.kind === "train" ? "training run" : s.kind === "eval" ? "evaluation" : "episodes"})` }),
        el("p", { class: "muted", text: s.path }));
      for (const note of s.notes) run.append(el("p", { class: "note", text: note }));
      run.append(el("div", { class: "cards" }, s.cards.map(([label, value]) => el("div", { class: "card" }, el("div", { class: "label", text: label }), el("div", { class: "value", text: value })))));
      if (s.tables.length) run.append(el("div", { class: "tables" }, s.tables.map((t) => el("div", {}, el("h3", { text: t.title }), table(t.head, t.rows)))));
      if (s.plots.length) run.append(el("h3", { text: s.kind === "train" ? "rods report" : "plots" }),
        el("div", { class: "plots" }, s.plots.map((p) => el("figure", {}, el("img", { src: p.src, alt: p.title, loading: "lazy" }), el("figcaption", { text: p.title })))));
      if (s.report) {
        const report = el("div", { class: "report" });
        report.innerHTML = s.report; // rods report's own markdown, escaped before conversion
        run.append(el("details", { class: "block", open: true }, el("summary", { text: "report.md" }), report));
      }
      if (s.pool) run.append(renderPool(s.pool));
      box.append(run);
    }
  }

  function renderPool(pool) {
    const box = el("div", { class: "pool" }, el("h3", { text: "the pool's story" }),
      el("p", { class: "muted", text: "Per step: synthesized (accepted by the critique), admitted to the active pool, confirmed at the boundary, dropped after a first visit off the boundary, retired, parked; 'parked (total now)' counts the tasks parked at the end of the step (cumulative, not new ones)." }),
      el("div", { class: "scroll" }, table(pool.head, pool.steps)));
    if (pool.made.length) {
      box.append(el("h3", { text: `synthesized tasks (${pool.made.length})` }),
        el("div", { class: "scroll" }, table(["task", "made at step", "parent", "how", "generation", "first zones", "fate"],
          pool.made.map((m) => [el("a", { class: "link", text: m.id, onclick: () => setTaskFilter(m.id) }), m.step,
            m.parent ? el("a", { class: "link", text: m.parent, onclick: () => setTaskFilter(m.parent) }) : "-", m.how, m.gen,
            m.zones.length ? m.zones.join(", ") : "never sampled", m.fate]))));
    } else if (!pool.events) {
      box.append(el("p", { class: "muted", text: "This run kept no pool events (pool_events.jsonl): written by rods train since transcripts were added." }));
    } else {
      box.append(el("p", { class: "muted", text: "No task was synthesized in this run." }));
    }
    return box;
  }

  // -- tabs and start -----------------------------------------------------------------------
  function showTab(name) {
    for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
    document.getElementById("episodes-tab").hidden = name !== "episodes";
    document.getElementById("runs-tab").hidden = name !== "runs";
  }

  async function main() {
    const status = document.getElementById("status");
    try {
      S.data = await unpack(document.getElementById("rods-index").textContent);
      S.chunks = JSON.parse(document.getElementById("rods-chunks").textContent);
    } catch (err) {
      status.replaceChildren(el("span", { class: "error", text: `cannot read this page's data (${err}); it needs a browser with DecompressionStream: Chromium 80+, Firefox 113+, Safari 16.4+` }));
      return;
    }
    const meta = S.data.meta;
    const runs = S.data.sources.length;
    status.replaceChildren(`${plural(meta.total, "episode")} from ${plural(runs, "run")}` +
      (meta.shown < meta.total ? `; this page shows an even sample of ${meta.shown.toLocaleString("en-US")}` : "") +
      ` · tool outputs cut after ${meta.max_chars.toLocaleString("en-US")} characters · made ${meta.generated}`);
    for (const s of S.data.sources) for (const note of s.notes) status.append(el("div", { class: "note", text: `${s.name}: ${note}` }));
    const tabs = document.getElementById("tabs");
    tabs.append(el("button", { type: "button", "data-tab": "episodes", text: "episodes", onclick: () => showTab("episodes") }),
      el("button", { type: "button", "data-tab": "runs", text: runs > 1 ? "runs" : "run", onclick: () => showTab("runs") }));
    buildFilters();
    refresh();
    renderRuns();
    showTab("episodes");
    document.addEventListener("keydown", (ev) => {
      if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement) return;
      if (ev.key === "j") step(1);
      if (ev.key === "k") step(-1);
    });
    const m = /^#e=(\d+)$/.exec(location.hash);
    if (m && Number(m[1]) < S.data.episodes.length) openEpisode(Number(m[1]));
    document.body.dataset.ready = "1";
  }
  main();
})();
