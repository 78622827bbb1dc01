"""The ``rods view`` page: one self-contained HTML file (no network, no CDN).

The page holds its data in the file itself: an index of the episodes (what the list, the
filters and the sorting need) as gzip-compressed JSON, and the episodes' transcripts in
compressed chunks of :data:`CHUNK` episodes that the page decompresses only when one of
their episodes is opened (the browser's ``DecompressionStream``). The list renders a page
of rows at a time, so 10^4 episodes stay responsive.

**Size.** Long texts are cut in the page, never in the files it was made from: tool outputs
after ``max_chars`` characters (default 2,000), other messages after twice that, each with
a note of how much was cut and where the whole text is. A domain's policy (the system
prompt, ~6 KB) is stored once, not per episode. Measured: see docs/view.md.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rods_agent.view.sources import Source, task_variance
from rods_env.fileio import atomic_write
from rods_env.task import Task

CHUNK = 200
"""Episodes per compressed chunk of transcripts (one chunk is decompressed per opening)."""

MAX_CHARS = 2_000
"""Default: characters of a tool output kept in the page (other messages keep twice this)."""

MAX_EPISODES = 20_000
"""Default: most episodes in one page (beyond it, an even sample of them, said on the page)."""


@dataclass(frozen=True)
class PageStats:
    """What :func:`write_page` wrote.

    Attributes:
        path: The HTML file.
        episodes: Episodes in the page.
        total: Episodes read (more than ``episodes`` when the page keeps a sample).
        bytes: Size of the file.
        raw_bytes: Size of the page's data before compression.
        cut_messages: Messages cut to the size bound.
    """

    path: Path
    episodes: int
    total: int
    bytes: int
    raw_bytes: int
    cut_messages: int


# -- data ------------------------------------------------------------------------------------
def _task_entry(task: Task) -> dict[str, Any]:
    sig = task.signature
    prov = task.provenance
    return {
        "d": task.domain,
        "sk": task.skill,
        "va": task.variant,
        "dp": sig.depth if sig is not None else None,
        "sig": sig.key if sig is not None else None,
        "sp": task.split,
        "o": prov.origin,
        "par": prov.parent_id,
        "gen": prov.generation,
        "mode": prov.mode,
        "aug": prov.augment,
        "user": task.user.name,
        "facts": dict(task.user.facts),
        "turns": [
            {
                "q": turn.request,
                "calls": [
                    [c.name, json.dumps(c.arguments, ensure_ascii=False)] for c in turn.calls
                ],
                "out": list(turn.outputs),
                "wh": list(turn.withheld_tools),
                "hid": list(turn.hidden_facts),
            }
            for turn in task.turns
        ],
    }


class _Builder:
    """Turns sources into the page's data, interning policies and cutting long texts."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.systems: dict[str, int] = {}
        self.cut = 0

    def clip(self, text: str, limit: int, where: str) -> tuple[str, int]:
        if len(text) <= limit:
            return text, 0
        self.cut += 1
        return text[:limit], len(text) - limit

    def messages(self, record: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in record.get("messages") or []:
            if not isinstance(m, Mapping):
                continue
            role = str(m.get("role", "?"))
            content = m.get("content")
            text = content if isinstance(content, str) else "" if content is None else str(content)
            item: dict[str, Any] = {"r": role}
            if role == "system" and not out:  # the policy: once per page, not per episode
                item["sys"] = self.systems.setdefault(text, len(self.systems))
            else:
                limit = self.max_chars if role == "tool" else 2 * self.max_chars
                item["c"], cut = self.clip(text, limit, where)
                if cut:
                    item["cut"] = cut
            if role == "tool":
                item["n"] = m.get("name")
            calls = m.get("tool_calls")
            if isinstance(calls, list):
                shown = []
                for call in calls:
                    fn = call.get("function", {}) if isinstance(call, Mapping) else {}
                    args = fn.get("arguments")
                    args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                    args, cut = self.clip(args, self.max_chars, where)
                    shown.append([str(fn.get("name", "?")), args + ("…" if cut else "")])
                item["calls"] = shown
            out.append(item)
        return out


def _turns(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in record.get("turn_results") or []:
        if not isinstance(r, Mapping):
            continue
        failures = r.get("failures")
        if not isinstance(failures, list):  # a record written before rods kept the rules
            failures = _old_failures(r)
        out.append(
            {
                "i": r.get("turn"),
                "ok": bool(r.get("passed")),
                "m": r.get("message"),
                "f": [[str(f.get("rule")), str(f.get("text"))] for f in failures],
            }
        )
    return out


def _old_failures(r: Mapping[str, Any]) -> list[dict[str, str]]:
    """The rules of a failed turn from the fields older records have."""
    if r.get("passed"):
        return []
    found = []
    if r.get("effect_ok") is False:
        found.append(
            {"rule": "effect_missing", "text": "the turn's gold effect is not in the database"}
        )
    if r.get("collateral"):
        found.append(
            {"rule": "collateral_write", "text": f"records changed: {', '.join(r['collateral'])}"}
        )
    if r.get("missing_outputs"):
        found.append(
            {"rule": "output_missing", "text": f"not said: {', '.join(r['missing_outputs'])}"}
        )
    if r.get("competing"):
        found.append({"rule": "competing_value", "text": f"competing: {', '.join(r['competing'])}"})
    if r.get("overlong"):
        found.append({"rule": "overlong", "text": "the turn's messages are too long"})
    return found or [{"rule": "unknown", "text": "failed (the record predates failure reasons)"}]


def _sample(n: int, keep: int) -> list[int]:
    """``keep`` indices spread evenly over ``range(n)``."""
    if n <= keep:
        return list(range(n))
    return sorted({math.floor(i * n / keep) for i in range(keep)})


def build_data(
    sources: Sequence[Source], *, max_chars: int = MAX_CHARS, max_episodes: int = MAX_EPISODES
) -> tuple[dict[str, Any], list[list[dict[str, Any]]], int]:
    """The page's index and its transcript chunks.

    Returns:
        ``(index, chunks, cut)``: the index (sources, tasks, policies, episodes), the
        transcripts in chunks of :data:`CHUNK`, and how many messages were cut.
    """
    builder = _Builder(max_chars)
    everything = [(i, e) for i, s in enumerate(sources) for e in s.episodes]
    kept = [everything[i] for i in _sample(len(everything), max_episodes)]
    tasks: dict[str, dict[str, Any]] = {}
    variance = [task_variance(s.episodes) for s in sources]
    index: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    for src, record in kept:
        source = sources[src]
        tid = str(record["task_id"])
        task = source.tasks.get(tid)
        if task is not None and tid not in tasks:
            tasks[tid] = _task_entry(task)
        turns = _turns(record)
        step = record.get("step")
        where = f"{source.path} ({tid}#{record.get('trial', 0)}" + (
            f", step {step})" if step is not None else ")"
        )
        group: Mapping[str, Any] = (
            record["group"] if isinstance(record.get("group"), Mapping) else {}
        )
        failed = [t for t in turns if not t["ok"]]
        index.append(
            {
                "s": src,
                "t": tid,
                "k": record.get("trial", 0),
                "p": step,
                "r": record.get("reward", record.get("progress", 0.0)),
                "g": record.get("progress", 0.0),
                "ok": bool(record.get("success")),
                "e": record.get("termination", "?"),
                "n": record.get("n_steps", 0),
                "tp": sum(1 for t in turns if t["ok"]),
                "tt": len(turns),
                "f": sorted({f[0] for t in failed for f in t["f"]}),
                "ft": failed[0]["i"] if failed else None,
                "z": record.get("zone"),
                "v": group.get("variance", variance[src].get(tid, 0.0)),
                "pk": record.get("pick"),
                "tok": record.get("completion_tokens", 0),
            }
        )
        details.append(
            {
                "m": builder.messages(record, where),
                "rw": record.get("rewards") or [],
                "tr": turns,
                "err": record.get("errors") or [],
                "fin": record.get("finish_reasons") or [],
                "grp": group.get("rewards"),
                "kept": record.get("kept"),
                "w": where,
            }
        )
    page_sources = [_source_entry(s) for s in sources]
    data = {
        "meta": {
            "generated": time.strftime("%Y-%m-%d %H:%M"),
            "total": len(everything),
            "shown": len(kept),
            "max_chars": max_chars,
            "chunk": CHUNK,
        },
        "sources": page_sources,
        "tasks": tasks,
        "systems": list(builder.systems),
        "episodes": index,
    }
    chunks = [details[i : i + CHUNK] for i in range(0, len(details), CHUNK)]
    return data, chunks, builder.cut


# -- what describes each source --------------------------------------------------------------
def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if value is None:
        return "-"
    return str(value)


def _png(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _source_entry(source: Source) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": source.name,
        "kind": source.kind,
        "path": str(source.path),
        "notes": list(source.notes),
        "cards": [],
        "tables": [],
        "plots": [],
        "report": None,
        "pool": None,
    }
    if source.kind == "eval":
        _eval_entry(source, entry)
    elif source.kind == "train":
        _train_entry(source, entry)
    else:
        entry["cards"] = [["episodes", str(len(source.episodes))]]
    return entry


def _eval_entry(source: Source, entry: dict[str, Any]) -> None:
    s = source.summary
    config = s.get("config") or {}
    cards = [
        ["model", _fmt(config.get("model"))],
        ["engine", _fmt(config.get("engine"))],
        ["env", _fmt(config.get("env"))],
        ["pool", f"{_fmt(config.get('pool'))} ({_fmt(config.get('split'))})"],
        ["tasks", _fmt(s.get("tasks"))],
        ["trials", _fmt(s.get("trials"))],
    ]
    for k, v in (s.get("pass_k") or {}).items():
        cards.append([f"pass^{k}", _fmt(v)])
    cards += [
        ["mean progress", _fmt(s.get("mean_progress"))],
        ["errored trials", _fmt(s.get("errored_trials"))],
    ]
    entry["cards"] = cards
    for key, title in (
        ("by_skill", "skill"),
        ("by_variant", "variant"),
        ("by_depth", "signature depth"),
    ):
        groups = s.get(key) or {}
        if groups:
            entry["tables"].append(
                {
                    "title": f"by {title}",
                    "head": [title, "tasks", "pass^1", "progress"],
                    "rows": [
                        [name, _fmt(g.get("tasks")), _fmt(g.get("pass^1")), _fmt(g.get("progress"))]
                        for name, g in groups.items()
                    ],
                }
            )
    terminations = s.get("terminations") or {}
    if terminations:
        entry["tables"].append(
            {
                "title": "terminations",
                "head": ["termination", "trials"],
                "rows": [[t, str(n)] for t, n in terminations.items()],
            }
        )
    png = source.path / "pass_k.png"
    if png.exists():
        entry["plots"].append({"title": "pass^k", "src": _png(png)})


def _train_entry(source: Source, entry: dict[str, Any]) -> None:
    config = source.summary.get("config") or {}
    rows = source.metrics
    last = rows[-1] if rows else {}
    planned = config.get("steps")
    done = last.get("step", -1) + 1
    stopped = (
        f"stopped at step {done} of {planned}"
        if isinstance(planned, int) and rows and done < planned
        else None
    )
    entry["cards"] = [
        ["mode", _fmt(config.get("mode"))],
        [
            "policy",
            _fmt(config.get("policy"))
            + (" (no model)" if config.get("policy") == "simulated" else ""),
        ],
        ["steps", f"{done} of {_fmt(planned)}" + (" (stopped early)" if stopped else "")],
        ["transcripts", str(len(source.episodes))],
        ["last reward", _fmt(last.get("reward"))],
        ["last ratio", _fmt(last.get("effective_group_ratio"))],
        ["active pool", _fmt((last.get("pool") or {}).get("active"))],
    ]
    if stopped:
        entry["notes"].append(
            f"{stopped}: its pool was exhausted (every task retired or parked as hard)"
        )
    if rows:
        plots, report = _report(source.path)
        entry["plots"], entry["report"] = plots, report
    entry["pool"] = pool_story(source)


def _report(run: Path) -> tuple[list[dict[str, str]], str | None]:
    """The panels ``rods report`` draws for the run, and its ``report.md`` as HTML."""
    from rods_agent.training.report import make_report

    with tempfile.TemporaryDirectory(prefix="rods-view-") as tmp:
        written = make_report([run], tmp)
        plots = [
            {"title": p.stem.replace("_", " "), "src": _png(p)}
            for p in written
            if p.suffix == ".png"
        ]
        md = next((p.read_text(encoding="utf-8") for p in written if p.suffix == ".md"), None)
    return plots, _markdown(md) if md is not None else None


def _markdown(text: str) -> str:
    try:
        import markdown
    except ImportError:  # shown as text
        return f"<pre>{html.escape(text)}</pre>"
    return str(markdown.markdown(html.escape(text, quote=False), extensions=["tables"]))


def pool_story(source: Source) -> dict[str, Any]:
    """A training run's pool, step by step: what was synthesized, admitted, confirmed,
    dropped, retired and parked, and each synthesized task's parent and first zones.

    The counts come from ``metrics.jsonl``; the tasks from ``pool_events.jsonl`` and the
    transcripts' zones (a task's zone at each step it was sampled).
    """
    steps = []
    for row in source.metrics:
        synth = row.get("synthesized") or {}
        retired = row.get("retired") or {}
        pool = row.get("pool") or {}
        zones = row.get("zones") or {}
        steps.append(
            [
                row.get("step"),
                synth.get("accepted", 0),
                synth.get("admitted", 0),
                synth.get("confirmed", 0),
                (synth.get("rejected") or {}).get("not_boundary", 0),
                sum(retired.values()) if isinstance(retired, Mapping) else 0,
                row.get("parked", 0),
                row.get("retried", 0),
                pool.get("active"),
                pool.get("parked"),
                "/".join(str(zones.get(z, 0)) for z in ("mastered", "boundary", "hard")),
            ]
        )
    zones_of: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for e in source.episodes:
        step, zone = e.get("step"), e.get("zone")
        if isinstance(step, int) and isinstance(zone, str):
            seen = zones_of[str(e["task_id"])]
            if not seen or seen[-1][0] != step:
                seen.append((step, zone))
    made = []
    fates: dict[str, str] = {}
    for event in source.pool_events:
        for tid, reason in (event.get("removed") or {}).items():
            fates[tid] = f"{reason} at step {event.get('step')}"
    for event in source.pool_events:
        for t in event.get("synthesized") or []:
            tid = str(t.get("id"))
            made.append(
                {
                    "id": tid,
                    "step": event.get("step"),
                    "parent": t.get("parent"),
                    "how": "+".join(str(x) for x in (t.get("mode"), t.get("augment")) if x),
                    "gen": t.get("generation"),
                    "zones": [f"{z} @{s}" for s, z in zones_of.get(tid, [])[:4]],
                    "fate": fates.get(tid, "in the pool"),
                }
            )
    return {
        "head": [
            "step",
            "synthesized",
            "admitted",
            "confirmed",
            "dropped",
            "retired",
            "parked",
            "retried",
            "active",
            "parked (total now)",
            "zones m/b/h",
        ],
        "steps": steps,
        "made": made,
        "events": bool(source.pool_events),
        "reasons": dict(
            Counter(r for e in source.pool_events for r in (e.get("removed") or {}).values())
        ),
    }


# -- the file --------------------------------------------------------------------------------
def _pack(value: Any) -> tuple[str, int]:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    packed = base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")
    return packed, len(raw)


def _asset(name: str) -> str:
    return (
        resources.files("rods_agent.view")
        .joinpath("static")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )


def render(
    sources: Sequence[Source],
    *,
    max_chars: int = MAX_CHARS,
    max_episodes: int = MAX_EPISODES,
    title: str | None = None,
) -> tuple[str, dict[str, int]]:
    """The page's HTML and its sizes (``raw``: the data before compression)."""
    data, chunks, cut = build_data(sources, max_chars=max_chars, max_episodes=max_episodes)
    title = title or "rods view: " + ", ".join(s.name for s in sources)
    data["meta"]["title"] = title
    index, raw = _pack(data)
    packed = []
    for chunk in chunks:
        blob, size = _pack(chunk)
        packed.append(blob)
        raw += size
    # the data first: base64 holds no placeholder, the code might
    page = (
        _asset("view.html")
        .replace("{{TITLE}}", html.escape(title))
        .replace("{{INDEX}}", index)
        .replace("{{CHUNKS}}", json.dumps(packed))
        .replace("/*{{CSS}}*/", _asset("view.css"))
        .replace("/*{{JS}}*/", _asset("view.js"))
    )
    return page, {
        "raw": raw,
        "cut": cut,
        "episodes": len(data["episodes"]),
        "total": data["meta"]["total"],
    }


def write_page(
    sources: Sequence[Source],
    out: str | Path,
    *,
    max_chars: int = MAX_CHARS,
    max_episodes: int = MAX_EPISODES,
    title: str | None = None,
) -> PageStats:
    """Write the page for ``sources`` to ``out`` (atomically).

    Args:
        sources: What to show (:func:`rods_agent.view.sources.load_sources`).
        out: The HTML file.
        max_chars: Characters of a tool output kept in the page (other messages: twice).
        max_episodes: Most episodes in the page (beyond it, an even sample).
        title: The page's title (default: the sources' names).
    """
    page, sizes = render(sources, max_chars=max_chars, max_episodes=max_episodes, title=title)
    path = atomic_write(out, page)
    return PageStats(
        path=Path(path),
        episodes=sizes["episodes"],
        total=sizes["total"],
        bytes=len(page.encode("utf-8")),
        raw_bytes=sizes["raw"],
        cut_messages=sizes["cut"],
    )
