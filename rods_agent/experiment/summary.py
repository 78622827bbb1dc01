"""The experiment's result: per mode and evaluation step, held-out progress and pass^1 with
95% intervals over tasks and seeds; the training statistics that explain them; plots.

Everything is read back from the files the stages wrote (``rods eval`` folders, each run's
``metrics.jsonl`` and ``eval/step-NNNNNN/``), so the summary can be redrawn from a copy of
those files alone (:func:`write_summary` on a folder of them).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.experiment.config import ExperimentConfig
from rods_agent.experiment.stats import (
    Interval,
    bootstrap_ci,
    paired_difference,
    stratified_ci,
    variance_components,
)
from rods_env.fileio import atomic_write, read_jsonl, write_json
from rods_env.seeds import FRESH

Scores = dict[str, tuple[float, float]]
"""task id -> (mean progress, pass^1) over its trials."""


def read_scores(folder: Path) -> Scores:
    """The per-task scores of a ``rods eval`` folder (empty when it has none)."""
    out: Scores = {}
    for row in read_jsonl(folder / "results.jsonl"):
        progress = [float(p) for p in row.get("progress", [])]
        success = [bool(s) for s in row.get("success", [])]
        if progress:
            out[str(row["task_id"])] = (
                sum(progress) / len(progress),
                sum(success) / len(success),
            )
    return out


def run_evals(run: Path) -> dict[int, Scores]:
    """A run's periodic evaluations, by the number of steps done before each (a run's
    evaluation after step ``s`` (0-based) counts as ``s + 1`` steps)."""
    out = {}
    for folder in sorted((run / "eval").glob("step-*")):
        scores = read_scores(folder)
        if scores:
            out[int(folder.name.removeprefix("step-")) + 1] = scores
    return out


def _matrix(per_seed: Sequence[Scores], which: int) -> tuple[list[list[float]], list[str]]:
    """``[seeds x tasks]`` of score ``which`` (0 progress, 1 pass^1) over the tasks every
    seed has."""
    common = sorted(set.intersection(*(set(s) for s in per_seed))) if per_seed else []
    return [[s[t][which] for t in common] for s in per_seed], common


def _interval(per_seed: Sequence[Scores], which: int) -> Interval | None:
    rows, tasks = _matrix(per_seed, which)
    return bootstrap_ci(rows) if tasks else None


def _ratio(rows: Sequence[Mapping[str, Any]], key: str = "effective_group_ratio") -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def collect(config: ExperimentConfig, root: Path) -> dict[str, Any]:
    """Everything the summary says, as JSON-able data."""
    warm = _load(root / "warm-start" / "done.json")
    step0 = _step0(config, root)
    modes: dict[str, Any] = {}
    for mode in config.runs.modes:
        runs = {seed: root / "runs" / f"{mode}-s{seed}" for seed in config.runs.seeds}
        present = {s: p for s, p in runs.items() if (p / "metrics.jsonl").exists()}
        evals = {s: run_evals(p) for s, p in present.items()}
        steps = sorted({k for e in evals.values() for k in e} | ({0} if step0 else set()))
        curve = []
        for step in steps:
            per_seed = [step0.get(s) if step == 0 else evals[s].get(step) for s in present]
            have = [x for x in per_seed if x]
            if len(have) != len(present) or not have:
                continue  # a step not every seed has reached yet
            progress, pass1 = _interval(have, 0), _interval(have, 1)
            curve.append(
                {
                    "step": step,
                    "progress": progress.to_dict() if progress else None,
                    "pass1": pass1.to_dict() if pass1 else None,
                }
            )
        metrics = {
            s: [r for r in read_jsonl(p / "metrics.jsonl") if "step" in r]
            for s, p in present.items()
        }
        per_step_ratio: dict[int, list[float]] = defaultdict(list)
        terminations: Counter[str] = Counter()
        episodes, seconds = 0, 0.0
        generations: Counter[str] = Counter()
        signal_steps = 0
        for rows in metrics.values():
            for r in rows:
                signal_steps += _had_gradient(r)
                if r.get("effective_group_ratio") is not None:
                    per_step_ratio[int(r["step"])].append(float(r["effective_group_ratio"]))
                terminations.update({k: int(v) for k, v in (r.get("terminations") or {}).items()})
                episodes += sum(int(v) for v in (r.get("terminations") or {}).values())
                seconds += float((r.get("time") or {}).get("step", 0.0))
            if rows and isinstance(rows[-1].get("pool"), Mapping):
                gens = rows[-1]["pool"].get("generations") or {}
                generations.update({str(k): int(v) for k, v in gens.items()})
        label, stepped = _label_and_optimizer_steps(mode, present)
        half = config.runs.steps // 2
        first = [r for rows in metrics.values() for r in rows if r["step"] < half]
        second = [r for rows in metrics.values() for r in rows if r["step"] >= half]
        modes[mode] = {
            "label": label,
            "seeds": sorted(present),
            "steps_done": {s: len(rows) for s, rows in metrics.items()},
            "curve": curve,
            "effective_group_ratio": {
                "per_step": {k: sum(v) / len(v) for k, v in sorted(per_step_ratio.items())},
                "first_half": _ratio(first),
                "second_half": _ratio(second),
            },
            # the mean progress of the steps' own rollouts: on the tasks the mode trains on
            "train_progress": {
                "first_half": _ratio(first, "progress"),
                "second_half": _ratio(second, "progress"),
            },
            "terminations": dict(terminations),
            "steps_with_gradient": signal_steps,
            "optimizer_steps": stepped,
            "steps": sum(len(rows) for rows in metrics.values()),
            "episodes": episodes,
            "train_seconds": seconds,
            "final_pool_generations": dict(generations),
        }
    data: dict[str, Any] = {
        "env": config.env,
        "start": config.start,
        "warm_start": warm,
        "modes": modes,
    }
    data["versus_static"] = _versus(config, root)
    final = collect_final(config, root)
    if final is not None:
        data["final"] = final
    if config.benchmark:
        found = collect_benchmark(config, root, {m: v["label"] for m, v in modes.items()})
        if found is not None:
            data["benchmark"] = found
    return data


def _step0(config: ExperimentConfig, root: Path) -> dict[int, Scores]:
    """The runs' step 0 per run seed: the warm start's test evaluation (one, for every
    seed), or without a warm start the base model's at each seed."""
    if config.start == "warm":
        warm = read_scores(root / "eval" / "warm-test")
        return {seed: warm for seed in config.runs.seeds} if warm else {}
    found = {seed: read_scores(root / "eval" / f"base-s{seed}") for seed in config.runs.seeds}
    return {seed: scores for seed, scores in found.items() if scores}


def read_successes(folder: Path) -> dict[str, list[bool]]:
    """Each task's trial successes in a ``rods eval`` folder (the run's verdicts)."""
    return {
        str(row["task_id"]): [bool(s) for s in row.get("success", [])]
        for row in read_jsonl(folder / "results.jsonl")
        if row.get("success")
    }


def collect_benchmark(
    config: ExperimentConfig, root: Path, labels: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """A benchmark experiment's headline: the benchmark's own numbers (BFCL's accuracy
    overall and per category) on the test split, per model (the base model, each arm after
    ``runs.steps`` steps): the mean over run seeds of each seed's numbers, a two-way
    bootstrap 95% interval over tasks and run seeds for each category (for the overall,
    :func:`~rods_agent.experiment.stats.stratified_ci` within categories), the paired
    difference of pass^1 to the base model and to ``static``; and the paper's rows
    (:data:`rods_agent.evaluation.scores.PAPER_RESULTS`). None before any model is scored
    at every seed."""
    from rods_agent.evaluation.scores import paper_results
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    family = load_any_domain(config.env)
    if not isinstance(family, BenchmarkDomain):
        return None
    seeds = list(config.runs.seeds)
    steps = root / "final" / "test-split" / f"step-{config.runs.steps}"
    where: dict[str, list[Path]] = {
        str(mode): [steps / f"{mode}-s{s}" for s in seeds] for mode in config.runs.modes
    }
    if config.eval.base_model:
        where = {"base": [root / "eval" / f"base-s{s}" for s in seeds], **where}
    found = {name: [read_successes(f) for f in folders] for name, folders in where.items()}
    found = {name: per for name, per in found.items() if all(per)}
    if not found:
        return None
    skill = {
        str(t["id"]): str(t.get("skill") or "-") for t in read_jsonl(root / "pools" / "test.jsonl")
    }
    common = sorted(set.intersection(*(set(s) for per in found.values() for s in per)))
    by_skill: dict[str, list[str]] = defaultdict(list)
    for t in common:
        by_skill[skill.get(t, "-")].append(t)

    def rate(trials: Sequence[bool]) -> float:
        return sum(trials) / len(trials)

    def rows(
        per_seed: Sequence[Mapping[str, Sequence[bool]]], tasks: Sequence[str]
    ) -> list[list[float]]:
        return [[rate(s[t]) for t in tasks] for s in per_seed]

    models: dict[str, Any] = {}
    columns: list[str] = []
    for name, per_seed in found.items():
        numbers = [dict(family.scores({t: s[t] for t in common})) for s in per_seed]
        columns = columns or list(numbers[0])
        means: dict[str, float | None] = {}
        intervals: dict[str, Any] = {}
        for column in numbers[0]:
            values = [n.get(column) for n in numbers]
            means[column] = (
                None
                if any(v is None for v in values)
                else (sum(v for v in values if v is not None) / len(values))
            )
            if means[column] is None:
                continue
            if column in by_skill:
                intervals[column] = bootstrap_ci(rows(per_seed, by_skill[column])).to_dict()
            elif column == "overall" and by_skill:
                groups = [rows(per_seed, tasks) for tasks in by_skill.values()]
                intervals[column] = stratified_ci(groups).to_dict()
        entry: dict[str, Any] = {
            "label": "base model" if name == "base" else (labels or {}).get(name, name),
            "scores": means,
            "intervals": intervals,
            "per_seed": numbers,
        }
        for other in ("base", "static"):
            if other != name and other in found:
                entry[f"pass1_vs_{other}"] = paired_difference(
                    rows(per_seed, common), rows(found[other], common)
                ).to_dict()
        models[name] = entry
    table = paper_results(family.name)
    return {
        "title": family.title,
        "model": config.train.model.path,
        "columns": columns,
        "tasks": len(common),
        "by_category": {k: len(v) for k, v in sorted(by_skill.items())},
        "seeds": seeds,
        "steps": config.runs.steps,
        "models": models,
        "paper": table.to_dict() if table is not None else None,
    }


def collect_final(config: ExperimentConfig, root: Path) -> dict[str, Any] | None:
    """The final, wider evaluation (``eval.final_variants``): per model (the warm start, each
    mode at its last step) progress and pass^1 over every seed, with intervals that resample
    test seeds with their variants as one (a seed's variants share its skill and shape, so
    they are not independent draws), and the paired differences to the warm start and to
    ``static``. None when the stage has not run (or not for every model yet)."""
    n = config.eval.final_variants
    folder = root / "final" / f"variants-{n}"
    if not (n or config.eval.final_fresh) or not (folder / "held-out.jsonl").exists():
        return None
    held_out = read_jsonl(folder / "held-out.jsonl")
    family = {
        str(t["id"]): str((t.get("provenance") or {}).get("parent_id") or t["id"]) for t in held_out
    }
    skill = {str(t["id"]): str(t.get("skill") or "-") for t in held_out}
    start = config.start  # the model the runs started from: warm, or base
    names = [start, *config.runs.modes]
    steps = folder / f"step-{config.runs.steps}"
    scores = {
        name: [
            read_scores((folder if name == start else steps) / f"{name}-s{seed}")
            for seed in config.runs.seeds
        ]
        for name in names
    }
    if not all(all(per) for per in scores.values()):
        return None
    # a task dropped from the held-out set (fewer fresh tasks) keeps its old result lines
    common = sorted(
        set.intersection(*(set(s) for per in scores.values() for s in per)) & set(family)
    )
    families = sorted({family.get(t, t) for t in common})

    def clustered(per_seed: Sequence[Scores], which: int) -> list[list[float]]:
        rows = []
        for s in per_seed:
            by: dict[str, list[float]] = defaultdict(list)
            for t in common:
                by[family.get(t, t)].append(s[t][which])
            rows.append([sum(by[f]) / len(by[f]) for f in families])
        return rows

    models: dict[str, Any] = {}
    for name in names:
        entry: dict[str, Any] = {}
        for which, score in ((0, "progress"), (1, "pass1")):
            rows = clustered(scores[name], which)
            entry[score] = bootstrap_ci(rows).to_dict()
            for other in (start, "static"):
                if other != name and other in scores:
                    entry[f"{score}_vs_{other}"] = paired_difference(
                        rows, clustered(scores[other], which)
                    ).to_dict()
        models[name] = entry
    power: dict[str, Any] = {}
    for name, other in [(n, "static") for n in config.runs.modes if n != "static"] + [
        (n, start) for n in config.runs.modes
    ]:
        if other not in scores:
            continue
        rows = [
            [a[t][0] - b[t][0] for t in common]
            for a, b in zip(scores[name], scores[other], strict=True)
        ]
        c = variance_components(rows, [family.get(t, t) for t in common])
        seeds, per = c.seeds, c.tasks_per_family
        power[f"{name}_vs_{other}"] = {
            "components": c.to_dict(),
            "half_width": c.half_width(seeds, c.families, per),
            "test_seeds_for": {str(h): c.families_for(h, seeds, per) for h in POWER_TARGETS},
        }
    rl_pool = root / "pools" / "rl-pool.jsonl"
    trained = (
        Counter(str(t.get("skill") or "-") for t in read_jsonl(rl_pool))
        if rl_pool.exists()
        else Counter()
    )
    by_skill: dict[str, Any] = {}
    for sk in sorted({skill.get(t, "-") for t in common}):
        tasks = [t for t in common if skill.get(t, "-") == sk]
        by_skill[sk] = {
            "tasks": len(tasks),
            "rl_pool": trained.get(sk, 0),
            "progress": _mean_progress(scores, tasks),
        }
    kind = {t: _kind(t, family) for t in common}
    by_kind: dict[str, Any] = {}
    for k in ("seed", "variant", "fresh"):
        tasks = [t for t in common if kind[t] == k]
        if tasks:
            by_kind[k] = {
                "tasks": len(tasks),
                "progress": _mean_progress(scores, tasks),
            }
    return {
        "start": start,
        "by_skill": by_skill,
        "by_kind": by_kind,
        "fresh": sum(1 for t in common if kind[t] == "fresh"),
        "power": power,
        "variants_per_seed": n,
        "tasks": len(common),
        "test_seeds": len(families),
        "seeds": list(config.runs.seeds),
        "steps": config.runs.steps,
        "models": models,
    }


def _mean_progress(
    scores: Mapping[str, Sequence[Scores]], tasks: Sequence[str]
) -> dict[str, float]:
    """Each model's mean progress over ``tasks`` and its seeds' episodes (no intervals)."""
    return {
        name: sum(s[t][0] for s in per_seed for t in tasks) / (len(tasks) * len(per_seed))
        for name, per_seed in scores.items()
    }


def _kind(task_id: str, family: Mapping[str, str]) -> str:
    """``seed`` (a test seed), ``variant`` (synthesized from one) or ``fresh`` (a fresh
    test task, :func:`rods_env.seeds.fresh_test_tasks`)."""
    if f"-{FRESH}" in task_id:
        return "fresh"
    return "seed" if family.get(task_id, task_id) == task_id else "variant"


POWER_TARGETS = (0.05, 0.03)
"""Half-widths of a progress difference the summary says how many test seeds would reach."""


def _versus(config: ExperimentConfig, root: Path) -> dict[str, Any]:
    """Each mode's last held-out scores minus static's, paired by task and seed index."""
    if "static" not in config.runs.modes:
        return {}
    last: dict[str, list[Scores]] = {}
    out: dict[str, Any] = {}
    for name in config.runs.modes:
        per = []
        for seed in config.runs.seeds:
            evals = run_evals(root / "runs" / f"{name}-s{seed}")
            if evals:
                per.append(evals[max(evals)])
        last[name] = per
    base = last["static"]
    for mode, per in last.items():
        if mode == "static" or not per or len(per) != len(base) or not base:
            continue
        common = sorted(set.intersection(*(set(s) for s in (*per, *base))))
        if not common:
            continue
        out[mode] = {
            name: paired_difference(
                [[s[t][which] for t in common] for s in per],
                [[s[t][which] for t in common] for s in base],
            ).to_dict()
            for which, name in ((0, "progress"), (1, "pass1"))
        }
    return out


def _label_and_optimizer_steps(mode: str, runs: Mapping[int, Path]) -> tuple[str, int | None]:
    """The mode as its runs ran (with the synthesis modes their configs record: an old
    mode-rods run that also expanded says so) and their optimizer steps, summed over seeds
    (None when a run's metrics do not say)."""
    from rods_agent.training.config import mode_label
    from rods_agent.training.report import load_run

    loaded = [load_run(path) for path in runs.values()]
    labels = sorted({run.mode_label if run.mode == mode else mode_label(mode) for run in loaded})
    steps = [run.optimizer_steps for run in loaded]
    total = None if any(s is None for s in steps) else sum(s or 0 for s in steps)
    return (" / ".join(labels) if labels else mode_label(mode)), total


def _had_gradient(row: Mapping[str, Any]) -> bool:
    """Whether a step's update had a token with a non-zero advantage (a step whose groups
    all tied leaves the weights as they were: no optimizer step, in every mode, since
    2026-12-06; before, static's AdamW stepped on its momentum). A metrics line that
    counts its optimizer steps says so by them (with a KL term ``signal_tokens`` also
    counts the KL's tokens of a tied batch, on which the rule takes no step)."""
    if row.get("optimizer_steps") is not None:
        return int(row["optimizer_steps"]) > 0
    update = row.get("update") or {}
    return float(update.get("signal_tokens", update.get("loss_tokens", 0.0)) or 0.0) > 0


def _power_lines(final: Mapping[str, Any]) -> list[str]:
    """The final section's "what would resolve it" table (variance components)."""
    power = final.get("power") or {}
    if not power:
        return []
    targets = [f"test seeds for +/-{h}" for h in POWER_TARGETS]
    lines = [
        "",
        "What would resolve a difference (moment estimates from these evaluations: a "
        "difference's variance split into the run seed's, the test seed's (family) and the "
        "rest; the half-width is a normal approximation of the interval above; test seeds "
        f"needed at the same {len(final['seeds'])} run seeds and tasks per test seed):",
        "",
        "| difference | seed / family / rest variance | half-width now | "
        + " | ".join(targets)
        + " |",
        "|---|---|---|" + "---|" * len(targets),
    ]
    for key, p in power.items():
        c = p["components"]
        need = " | ".join(
            str(p["test_seeds_for"].get(str(h)) or "more run seeds first") for h in POWER_TARGETS
        )
        lines.append(
            f"| {key.replace('_vs_', ' - ')} | {c['seed']:.4f} / {c['family']:.4f} / "
            f"{c['residual']:.4f} | {p['half_width']:.3f} | {need} |"
        )
    return lines


def _halves(value: Mapping[str, Any] | None) -> str:
    if not value:
        return "-"
    return " / ".join(
        f"{value[h]:.2f}" if value.get(h) is not None else "-"
        for h in ("first_half", "second_half")
    )


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _fmt(iv: Mapping[str, Any] | None) -> str:
    if not iv:
        return "-"
    return f"{iv['mean']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]"


def markdown(config: ExperimentConfig, data: Mapping[str, Any]) -> str:
    """The summary as Markdown: the table, the training statistics, the warm start."""
    start = "the warm start" if config.start == "warm" else "the base model"
    origin = "one warm start" if config.start == "warm" else "the base model"
    lines = [
        f"# Experiment: {config.env}, {', '.join(config.runs.modes)} from {origin}",
        "",
        f"Held-out (test split) progress and pass^1 with two-way bootstrap 95% intervals over "
        f"tasks and {len(config.runs.seeds)} seeds; {config.runs.steps} GRPO steps of "
        f"{config.train.rollout.tasks_per_step} tasks x {config.train.rollout.group_size} "
        "rollouts each in every mode.",
        "",
        "| mode | steps | held-out progress | held-out pass^1 | vs static: progress | "
        "effective group ratio (1st half / 2nd half) | training progress (1st half / 2nd half) | "
        "steps with a gradient | optimizer steps | episodes | train time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    versus = data.get("versus_static", {})
    for mode, m in data["modes"].items():
        last = m["curve"][-1] if m["curve"] else {}
        halves, trained = _halves(m["effective_group_ratio"]), _halves(m.get("train_progress"))
        vs = _fmt(versus.get(mode, {}).get("progress")) if mode != "static" else "-"
        lines.append(
            f"| {m.get('label', mode)} | {last.get('step', '-')} | {_fmt(last.get('progress'))} | "
            f"{_fmt(last.get('pass1'))} | {vs} | {halves} | {trained} | "
            f"{m.get('steps_with_gradient', '-')} of {m.get('steps', '-')} | "
            f"{'-' if m.get('optimizer_steps') is None else m['optimizer_steps']} | {m['episodes']} | "
            f"{m['train_seconds'] / 60:.0f} min |"
        )
    lines += [
        "",
        "Training progress is the mean progress of each step's own rollouts: static and "
        "filter train on a fixed pool, so a rise there with no rise held-out is fitting that "
        "pool; rods' pool moves to where the policy's rewards vary, so its training progress "
        "stays near the middle by design.",
    ]
    if any(m.get("steps") and not m.get("steps_with_gradient") for m in data["modes"].values()):
        lines += [
            "",
            "A mode none of whose steps had a gradient (every group's rewards tied) kept the "
            f"{start.removeprefix('the ')}'s weights: its held-out change from step 0 is "
            "sampling noise.",
        ]
    lines += _benchmark_lines(config, data.get("benchmark"))
    lines += [
        "",
        "## Held-out progress by step",
        "",
        "| step | " + " | ".join(data["modes"]) + " |",
    ]
    lines.append("|---|" + "---|" * len(data["modes"]))
    steps = sorted({c["step"] for m in data["modes"].values() for c in m["curve"]})
    for step in steps:
        cells = []
        for m in data["modes"].values():
            found = next((c for c in m["curve"] if c["step"] == step), None)
            cells.append(_fmt(found["progress"]) if found else "-")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += ["", "## How the episodes ended", "", "| mode | " + " | ".join(TERMINATIONS) + " |"]
    lines.append("|---|" + "---|" * len(TERMINATIONS))
    for mode, m in data["modes"].items():
        lines.append(
            f"| {mode} | "
            + " | ".join(str(m["terminations"].get(t, 0)) for t in TERMINATIONS)
            + " |"
        )
    final = data.get("final")
    if final:
        lines += [
            "",
            f"## Final evaluation: {final['tasks']} held-out tasks",
            "",
            f"The {final['test_seeds'] - final.get('fresh', 0)} test seeds, up to "
            f"{final['variants_per_seed']} synthesized variants of each (test customers only)"
            + (f" and {final['fresh']} fresh test tasks" if final.get("fresh") else "")
            + f"; the warm start and each mode after {final['steps']} steps, at seeds "
            f"{final['seeds']}. Intervals resample test seeds (each with its variants; a "
            "fresh task is a test seed of its own) and run seeds.",
            "",
            "| model | progress | pass^1 | progress vs warm start | progress vs static |",
            "|---|---|---|---|---|",
        ]
        for name, m in final["models"].items():
            lines.append(
                f"| {name} | {_fmt(m['progress'])} | {_fmt(m['pass1'])} | "
                f"{_fmt(m.get('progress_vs_warm'))} | {_fmt(m.get('progress_vs_static'))} |"
            )
        by_skill = final.get("by_skill") or {}
        if by_skill:
            names = list(final["models"])
            lines += [
                "",
                "By skill (mean progress over the seeds' episodes; no intervals: a few tasks "
                "each):",
                "",
                "| skill | held-out tasks | in the starting GRPO pool | "
                + " | ".join(names)
                + " |",
                "|---|---|---|" + "---|" * len(names),
            ]
            for sk, row in by_skill.items():
                shown = " | ".join(f"{row['progress'][model]:.2f}" for model in names)
                lines.append(f"| {sk} | {row['tasks']} | {row['rl_pool']} | {shown} |")
        by_kind = final.get("by_kind") or {}
        if len(by_kind) > 1:
            names = list(final["models"])
            lines += [
                "",
                "By kind of task (mean progress over the seeds' episodes):",
                "",
                "| tasks | count | " + " | ".join(names) + " |",
                "|---|---|" + "---|" * len(names),
            ]
            for k, row in by_kind.items():
                shown = " | ".join(f"{row['progress'][model]:.3f}" for model in names)
                lines.append(f"| {k} | {row['tasks']} | {shown} |")
        lines += _power_lines(final)
    warm = data.get("warm_start") or {}
    if warm:
        lines += [
            "",
            "## Warm start",
            "",
            "| epoch | validation progress | validation pass^1 |",
            "|---|---|---|",
        ]
        for h in warm.get("history", []):
            lines.append(f"| {h['epoch']} | {h['progress']:.3f} | {h['pass1']:.3f} |")
        lines.append("")
        lines.append(f"Kept: epoch {warm.get('epoch')}.")
        for name, t in (warm.get("test") or {}).items():
            lines.append(
                f"- {name} model on the test split: progress {t['progress']:.3f}, pass^1 {t['pass1']:.3f}"
            )
    return "\n".join(lines) + "\n"


TERMINATIONS = ("user_stop", "terminal_tool", "max_steps", "max_turns", "max_tokens", "error")


def _pct(value: float | None, iv: Mapping[str, Any] | None = None) -> str:
    """A fraction in percent, with its interval when given (N/A: not computed)."""
    if value is None:
        return "N/A"
    if not iv:
        return f"{100 * value:.2f}"
    return f"{100 * value:.2f} [{100 * iv['low']:.2f}, {100 * iv['high']:.2f}]"


def _benchmark_lines(config: ExperimentConfig, bench: Mapping[str, Any] | None) -> list[str]:
    """Markdown: the benchmark's own numbers per model on the test split, the paper's rows
    beside (the paper's table layout: rows the models, columns overall then each
    category)."""
    if not bench:
        return []
    columns = list(bench["columns"])
    counts = ", ".join(f"{k} {v}" for k, v in bench["by_category"].items())
    rollout = config.train.rollout
    lines = [
        "",
        f"## {bench['title']}: the benchmark's own numbers on the test split",
        "",
        f"{bench['tasks']} test tasks ({counts}). In percent: the mean over run seeds "
        f"{bench['seeds']} of each seed's number (the base model sampled at each seed, each "
        f"arm's last checkpoint after {bench['steps']} GRPO steps of "
        f"{rollout.tasks_per_step} tasks x {rollout.group_size} rollouts at its seed), with a "
        "two-way bootstrap 95% interval over tasks and run seeds (the overall's within "
        "each category); N/A where the benchmark computes none (a category not evaluated "
        "on every task of the split: eval.test_tasks).",
        "",
        "| model | " + " | ".join(columns) + " | pass^1 vs base model |",
        "|---|" + "---|" * len(columns) + "---|",
    ]
    for name, m in bench["models"].items():
        label = m["label"]
        if name == "base":
            label = f"base model (`{Path(str(bench.get('model') or 'tiny')).name}`)"
        cells = " | ".join(_pct(m["scores"].get(c), m["intervals"].get(c)) for c in columns)
        vs = m.get("pass1_vs_base")
        shown = (
            "-"
            if not vs
            else f"{100 * vs['mean']:+.2f} [{100 * vs['low']:+.2f}, {100 * vs['high']:+.2f}]"
        )
        lines.append(f"| {label} | {cells} | {shown} |")
    paper = bench.get("paper")
    if paper:
        from rods_agent.evaluation.scores import paper_results

        table = paper_results(str(paper["benchmark"]))
        if table is not None:
            lines += [row + " - |" for row in table.markdown_rows(columns)]
            lines += ["", table.note]
    return lines


def plot_learning(config: ExperimentConfig, data: Mapping[str, Any], out: Path) -> Path:
    """``learning.png``: held-out progress by step per mode (mean, 95% band over tasks and
    seeds) and the effective group ratio per step per mode (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, m in data["modes"].items():
        pts = [c for c in m["curve"] if c["progress"]]
        if pts:
            xs = [c["step"] for c in pts]
            a.plot(xs, [c["progress"]["mean"] for c in pts], marker="o", label=mode)
            a.fill_between(
                xs,
                [c["progress"]["low"] for c in pts],
                [c["progress"]["high"] for c in pts],
                alpha=0.2,
            )
        per_step = m["effective_group_ratio"]["per_step"]
        if per_step:
            b.plot([int(k) + 1 for k in per_step], list(per_step.values()), label=mode)
    a.set(
        xlabel="GRPO steps",
        ylabel="held-out progress (test split)",
        title="Held-out progress, 95% CI",
    )
    b.set(
        xlabel="GRPO step",
        ylabel="share of groups with reward variance",
        title="Effective group ratio (mean over seeds)",
    )
    b.set_ylim(-0.02, 1.02)
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = out / "learning.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_summary(config: ExperimentConfig, root: Path) -> dict[str, Any]:
    """Write ``summary.json``, ``summary.md``, ``learning.png`` and ``rods report``'s plots
    (``report/``) of every run under ``root``; returns the summary data."""
    data = collect(config, root)
    write_json(root / "summary.json", data)
    atomic_write(root / "summary.md", markdown(config, data))
    plot_learning(config, data, root)
    runs = sorted(p for p in (root / "runs").glob("*") if (p / "metrics.jsonl").exists())
    if runs:
        from rods_agent.training.report import make_report

        make_report(runs, root / "report")
    return data
