"""The registered analysis of experiment 2026-12-rods-vs-static (registration.md).

Reads the experiment's output folder (``out/`` beside this file, or the folder given) and
prints, in this order: the primary comparison (held-out progress at step 12, rods - static,
paired by run seed and customer, the clustered two-way bootstrap of
:func:`rods_agent.experiment.stats.paired_difference`), its variance components, then the
secondary comparisons, the share of each gain that comes from episodes no longer ending at
the step limit, and the checks of the protocol (blocks complete, equal rollouts, the one
update rule, the held-out set as registered). Nothing here is tuned on the results: it was
committed with the registration, before any run.

    .venv/bin/python experiments/2026-12-rods-vs-static/analyze.py [OUT] [--json FILE]
    .venv/bin/python experiments/2026-12-rods-vs-static/analyze.py --selftest
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rods_agent.experiment.stats import bootstrap_ci, paired_difference, variance_components
from rods_agent.experiment.summary import read_scores

HERE = Path(__file__).resolve().parent
ARMS = ("static", "rods", "rods-expand", "envtuning")
"""The registered arms; static is the reference of every comparison."""
PRIMARY = ("rods", "static")
SEEDS = tuple(range(20))
"""The registered run seeds (blocks)."""
STEPS = 12
EPISODES_PER_RUN = 2 * 4 * STEPS
"""tasks per step x group size x steps: equal rollouts in every arm."""
SYNTH_MODES = {
    "static": [],
    "envtuning": [],
    "rods": ["resample"],
    "rods-expand": ["resample", "expand"],
}
STEP_LIMIT = ("max_steps", "max_turns")
"""Terminations that mean the episode ran to the step limit (the looping the issue names)."""
DRAWS = 4000
BOOT_SEED = 0


# -- reading ---------------------------------------------------------------------------------
def _rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file or of its ``.gz`` (empty when neither exists)."""
    if path.exists():
        text = path.read_text(encoding="utf-8")
    elif path.with_name(path.name + ".gz").exists():
        text = gzip.decompress(path.with_name(path.name + ".gz").read_bytes()).decode("utf-8")
    else:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def customer(task: Mapping[str, Any]) -> str:
    """The customer a task is about: the ``user_id`` its gold calls use (every retail
    order_info and multi_turn task looks the customer up), else the task id."""
    for turn in task.get("turns") or ():
        for call in turn.get("calls") or ():
            uid = (call.get("arguments") or {}).get("user_id")
            if uid:
                return str(uid)
    return str(task["id"])


class Evaluation:
    """One final evaluation: per task, progress (mean over trials) and whether its episode
    ended at the step limit (share over trials)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.progress: dict[str, float] = {}
        self.limit: dict[str, float] = {}
        if (folder / "results.jsonl").exists():
            self.progress = {t: p for t, (p, _) in read_scores(folder).items()}
        rows = _rows(folder / "results.jsonl")
        for row in rows:
            ends = [str(e) for e in row.get("termination", [])]
            tid = str(row["task_id"])
            if tid not in self.progress and row.get("progress"):  # a compressed results file
                vals = [float(p) for p in row["progress"]]
                self.progress[tid] = sum(vals) / len(vals)
            if ends:
                self.limit[tid] = sum(e in STEP_LIMIT for e in ends) / len(ends)


class Experiment:
    """The files of the experiment's output folder that the analysis reads."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.final = root / "final" / "variants-0"
        held = _rows(self.final / "held-out.jsonl")
        self.tasks = [str(t["id"]) for t in held]
        self.customer = {str(t["id"]): customer(t) for t in held}
        self.skill = {str(t["id"]): str(t.get("skill") or "-") for t in held}

    def evaluation(self, model: str, seed: int) -> Evaluation:
        if model == "warm":
            return Evaluation(self.final / f"warm-s{seed}")
        return Evaluation(self.final / f"step-{STEPS}" / f"{model}-s{seed}")

    def metrics(self, arm: str, seed: int) -> list[dict[str, Any]]:
        return [
            r for r in _rows(self.root / "runs" / f"{arm}-s{seed}" / "metrics.jsonl") if "step" in r
        ]


# -- checks ----------------------------------------------------------------------------------
def complete_blocks(exp: Experiment) -> tuple[list[int], list[str]]:
    """The registered seeds whose block is whole (four runs of 12 steps, five final
    evaluations of every held-out task) and one line per problem found."""
    done, problems = [], []
    for seed in SEEDS:
        missing = []
        for arm in ARMS:
            steps = {int(r["step"]) for r in exp.metrics(arm, seed)}
            if steps != set(range(STEPS)):
                missing.append(f"run {arm}-s{seed} has steps {sorted(steps) or 'none'}")
        for model in ("warm", *ARMS):
            have = set(exp.evaluation(model, seed).progress)
            if not exp.tasks or not set(exp.tasks) <= have:
                missing.append(
                    f"final evaluation {model}-s{seed} lacks {len(set(exp.tasks) - have)} tasks"
                )
        if missing:
            problems.append(f"block {seed} incomplete: " + "; ".join(missing[:3]))
        else:
            done.append(seed)
    return done, problems


def protocol_checks(exp: Experiment, seeds: Sequence[int]) -> tuple[list[str], dict[str, Any]]:
    """Equal rollouts, the one update rule, each arm's synthesis modes: the problems found
    and each arm's optimizer steps (an outcome of the rule, not a setting)."""
    problems: list[str] = []
    steps: dict[str, list[int]] = defaultdict(list)
    with_signal: dict[str, list[int]] = defaultdict(list)
    for arm in ARMS:
        for seed in seeds:
            rows = sorted(exp.metrics(arm, seed), key=lambda r: int(r["step"]))
            name = f"{arm}-s{seed}"
            episodes = sum(int(v) for r in rows for v in (r.get("terminations") or {}).values())
            if episodes != EPISODES_PER_RUN:
                problems.append(
                    f"{name}: {episodes} training episodes, registered {EPISODES_PER_RUN}"
                )
            total = 0
            signal = 0
            for r in rows:
                stepped = int(r.get("optimizer_steps", -1))
                has = float((r.get("update") or {}).get("signal_tokens", 0.0) or 0.0) > 0
                signal += has
                if stepped != int(has):
                    problems.append(
                        f"{name} step {r['step']}: optimizer_steps {stepped} with "
                        f"{'a' if has else 'no'} token carrying a gradient (the rule: 1 if and only if one does)"
                    )
                total += max(stepped, 0)
                if int(r.get("optimizer_steps_total", -1)) != total:
                    problems.append(
                        f"{name} step {r['step']}: optimizer_steps_total "
                        f"{r.get('optimizer_steps_total')} is not the running sum {total}"
                    )
                if list(r.get("synth_modes") or []) != SYNTH_MODES[arm]:
                    problems.append(f"{name} step {r['step']}: synth_modes {r.get('synth_modes')}")
                    break
            steps[arm].append(total)
            with_signal[arm].append(signal)
    return problems, {
        arm: {
            "optimizer_steps_per_run": steps[arm],
            "mean": sum(steps[arm]) / max(len(steps[arm]), 1),
        }
        for arm in ARMS
    }


def held_out_check(exp: Experiment) -> list[str]:
    """The held-out set against the one registered (ids, customers, file hash)."""
    reg_path = HERE / "held-out.registered.json"
    if not reg_path.exists():
        return ["held-out.registered.json is missing"]
    reg = json.loads(reg_path.read_text())
    problems = []
    ids = [r["id"] for r in reg["rows"]]
    if exp.tasks != ids:
        problems.append(
            f"held-out tasks differ from the registered {len(ids)} ({len(exp.tasks)} found)"
        )
    elif any(exp.customer[r["id"]] != r["customer"] for r in reg["rows"]):
        problems.append("held-out customers differ from the registered ones")
    path = exp.final / "held-out.jsonl"
    if (
        not problems
        and path.exists()
        and hashlib.sha256(path.read_bytes()).hexdigest() != reg["sha256_of_held_out_jsonl"]
    ):
        problems.append(
            "held-out.jsonl's sha256 differs from the registered one (same ids: the tasks' text changed)"
        )
    return problems


# -- statistics ------------------------------------------------------------------------------
def clustered(
    exp: Experiment, model: str, seeds: Sequence[int], tasks: Sequence[str], what: str = "progress"
) -> list[list[float]]:
    """``[seeds x customers]``: each customer's mean over its tasks among ``tasks`` (each
    customer counted once, whatever its number of tasks)."""
    customers = sorted({exp.customer[t] for t in tasks})
    rows = []
    for seed in seeds:
        ev = exp.evaluation(model, seed)
        values = ev.progress if what == "progress" else ev.limit
        by: dict[str, list[float]] = defaultdict(list)
        for t in tasks:
            by[exp.customer[t]].append(values[t])
        rows.append([sum(by[c]) / len(by[c]) for c in customers])
    return rows


def difference(
    exp: Experiment,
    a: str,
    b: str,
    seeds: Sequence[int],
    tasks: Sequence[str],
    what: str = "progress",
) -> dict[str, Any]:
    """``a - b`` over ``tasks``, paired by run seed and customer, with the clustered two-way
    bootstrap 95% interval (run seeds and customers resampled)."""
    iv = paired_difference(
        clustered(exp, a, seeds, tasks, what),
        clustered(exp, b, seeds, tasks, what),
        draws=DRAWS,
        seed=BOOT_SEED,
    )
    return iv.to_dict()


def components(exp: Experiment, a: str, b: str, seeds: Sequence[int]) -> dict[str, Any]:
    """Variance components of the per-(seed, task) difference ``a - b``, families = customers,
    and the half-width they imply for this design."""
    rows = [
        [exp.evaluation(a, s).progress[t] - exp.evaluation(b, s).progress[t] for t in exp.tasks]
        for s in seeds
    ]
    c = variance_components(rows, [exp.customer[t] for t in exp.tasks])
    return {**c.to_dict(), "half_width": c.half_width(c.seeds, c.families, c.tasks_per_family)}


def loop_share(exp: Experiment, a: str, b: str, seeds: Sequence[int]) -> dict[str, Any]:
    """How much of ``mean(a) - mean(b)`` comes from (seed, task) pairs whose episode ended at
    the step limit under ``b`` and not under ``a`` (loops ended), and from the reverse (loops
    started); the rest is pairs where both or neither ran to the limit."""
    ended = started = rest = 0.0
    n = 0
    for s in seeds:
        ea, eb = exp.evaluation(a, s), exp.evaluation(b, s)
        for t in exp.tasks:
            d = ea.progress[t] - eb.progress[t]
            la, lb = ea.limit.get(t, 0.0) > 0.5, eb.limit.get(t, 0.0) > 0.5
            if lb and not la:
                ended += d
            elif la and not lb:
                started += d
            else:
                rest += d
            n += 1
    total = ended + started + rest
    return {
        "difference": total / n,
        "from_loops_ended": ended / n,
        "from_loops_started": started / n,
        "from_the_rest": rest / n,
        "share_from_loops_ended": ended / total if total else None,
    }


def analyze(root: Path) -> dict[str, Any]:
    """Every registered number, as JSON-able data (the primary first)."""
    exp = Experiment(root)
    if not exp.tasks:
        raise SystemExit(f"{root}: no final/variants-0/held-out.jsonl: the final stage has not run")
    seeds, block_problems = complete_blocks(exp)
    if not seeds:
        raise SystemExit(f"{root}: no complete block yet; " + " | ".join(block_problems[:3]))
    a, b = PRIMARY
    out: dict[str, Any] = {
        "primary": {
            "what": "held-out progress at step 12, rods - static, paired by run seed and customer",
            **difference(exp, a, b, seeds, exp.tasks),
            "components": components(exp, a, b, seeds),
        },
        "as_registered": not block_problems and len(seeds) == len(SEEDS),
        "blocks": seeds,
    }
    secondary: dict[str, Any] = {}
    for arm in ("rods-expand", "envtuning"):
        secondary[f"{arm} - static"] = difference(exp, arm, "static", seeds, exp.tasks)
    secondary["rods - rods-expand"] = difference(exp, "rods", "rods-expand", seeds, exp.tasks)
    for arm in ARMS:
        secondary[f"{arm} - warm"] = difference(exp, arm, "warm", seeds, exp.tasks)
    for skill in sorted(set(exp.skill.values())):
        tasks = [t for t in exp.tasks if exp.skill[t] == skill]
        secondary[f"rods - static, {skill} only"] = difference(exp, a, b, seeds, tasks)
    out["secondary"] = secondary
    out["models"] = {
        m: {
            "progress": bootstrap_ci(
                clustered(exp, m, seeds, exp.tasks), draws=DRAWS, seed=BOOT_SEED
            ).to_dict(),
            "step_limit_share": bootstrap_ci(
                clustered(exp, m, seeds, exp.tasks, "limit"), draws=DRAWS, seed=BOOT_SEED
            ).to_dict(),
        }
        for m in ("warm", *ARMS)
    }
    out["looping"] = {
        **{f"{arm} - warm": loop_share(exp, arm, "warm", seeds) for arm in ARMS},
        **{
            f"{arm} - static": loop_share(exp, arm, "static", seeds)
            for arm in ARMS
            if arm != "static"
        },
        "step-limit share, rods - static": difference(exp, a, b, seeds, exp.tasks, "limit"),
    }
    problems, optimizer = protocol_checks(exp, seeds)
    out["optimizer_steps"] = optimizer
    out["problems"] = block_problems + problems + held_out_check(exp)
    return out


def _iv(d: Mapping[str, Any]) -> str:
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def report(data: Mapping[str, Any]) -> str:
    """The printed analysis: the primary comparison first."""
    p = data["primary"]
    c = p["components"]
    lines = [
        f"PRIMARY  {p['what']}: {_iv(p)}  ({p['seeds']} run seeds x {p['tasks']} customers; "
        f"clustered two-way bootstrap, {DRAWS} draws)",
        f"         variance components (seed / customer / rest): {c['seed']:.4f} / {c['family']:.4f} / "
        f"{c['residual']:.4f}; normal half-width {c['half_width']:.3f}",
        f"         {'as registered' if data['as_registered'] else 'NOT as registered: see the checks below'}",
        "",
        "Secondary (paired by run seed and customer, same bootstrap):",
    ]
    lines += [f"  {k}: {_iv(v)}" for k, v in data["secondary"].items()]
    lines += [
        "",
        "Each model (clustered by customer): progress | share of episodes at the step limit",
    ]
    for m, v in data["models"].items():
        lines.append(f"  {m}: {_iv(v['progress'])} | {v['step_limit_share']['mean']:.3f}")
    lines += [
        "",
        "Where each difference comes from (per (seed, task) pair; loops = episodes at the step limit):",
    ]
    for k, v in data["looping"].items():
        if "from_loops_ended" in v:
            share = v["share_from_loops_ended"]
            lines.append(
                f"  {k}: {v['difference']:+.3f} = loops ended {v['from_loops_ended']:+.3f} "
                f"+ loops started {v['from_loops_started']:+.3f} + the rest {v['from_the_rest']:+.3f}"
                + (f" (share from loops ended {share:.2f})" if share is not None else "")
            )
        else:
            lines.append(f"  {k}: {_iv(v)}")
    lines += [
        "",
        "Optimizer steps per run (the one rule: one per step with a token carrying a gradient):",
    ]
    for arm, v in data["optimizer_steps"].items():
        lines.append(
            f"  {arm}: mean {v['mean']:.2f} of {STEPS}; runs {v['optimizer_steps_per_run']}"
        )
    lines += [
        "",
        "Checks: "
        + ("none failed" if not data["problems"] else f"{len(data['problems'])} problem(s)"),
    ]
    lines += [f"  - {x}" for x in data["problems"]]
    return "\n".join(lines)


# -- self-test on synthetic data ---------------------------------------------------------------
def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_synthetic(root: Path, seeds: Sequence[int] = SEEDS, effect: float = 0.1) -> None:
    """A folder shaped like the experiment's output: the held-out set, every final
    evaluation, every run's metrics. rods is static plus ``effect`` on every task (other
    arms static's), the warm start loops on the tasks static solves."""
    tasks = []
    for i in range(12):
        uid = f"user_{i // 2}"  # two tasks per customer
        tasks.append(
            {
                "id": f"retail-fresh1-{i:04d}",
                "skill": "order_info" if i % 2 else "multi_turn",
                "turns": [{"calls": [{"name": "get_user_details", "arguments": {"user_id": uid}}]}],
                "provenance": {"parent_id": None},
            }
        )
    final = root / "final" / "variants-0"
    _write_jsonl(final / "held-out.jsonl", tasks)

    def results(folder: Path, score: Any) -> None:
        rows = []
        for i, t in enumerate(tasks):
            p, end = score(i)
            rows.append(
                {"task_id": t["id"], "progress": [p], "success": [p == 1.0], "termination": [end]}
            )
        _write_jsonl(folder / "results.jsonl", rows)

    for s in seeds:
        base = lambda i, s=s: 0.4 + 0.1 * ((i + s) % 3)  # noqa: E731
        results(
            final / f"warm-s{s}",
            lambda i, b=base: (b(i) - 0.2, "max_steps" if i < 6 else "user_stop"),
        )
        for arm in ARMS:
            shift = effect if arm == "rods" else 0.0
            results(
                final / f"step-{STEPS}" / f"{arm}-s{s}",
                lambda i, b=base, x=shift: (b(i) + x, "user_stop"),
            )
            rows = []
            for step in range(STEPS):
                signal = (step + s) % 2 == 0 or arm.startswith("rods")
                rows.append(
                    {
                        "step": step,
                        "synth_modes": SYNTH_MODES[arm],
                        "terminations": {"user_stop": 8},
                        "optimizer_steps": int(signal),
                        "optimizer_steps_total": sum(
                            int((k + s) % 2 == 0 or arm.startswith("rods")) for k in range(step + 1)
                        ),
                        "update": {"signal_tokens": 100.0 if signal else 0.0},
                    }
                )
            _write_jsonl(root / "runs" / f"{arm}-s{s}" / "metrics.jsonl", rows)


def selftest() -> int:
    """Run the analysis on synthetic folders and check what it must find."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "out"
        make_synthetic(root, effect=0.1)
        data = analyze(root)
        text = report(data)
        assert text.startswith("PRIMARY"), text[:80]
        p = data["primary"]
        assert abs(p["mean"] - 0.1) < 1e-9 and abs(p["low"] - 0.1) < 1e-9, p  # a constant shift
        assert p["seeds"] == len(SEEDS) and p["tasks"] == 6, p  # 6 customers, each once
        assert abs(data["secondary"]["rods-expand - static"]["mean"]) < 1e-9
        loops = data["looping"]["static - warm"]
        assert (
            abs(loops["difference"] - 0.2) < 1e-9
            and abs(loops["share_from_loops_ended"] - 0.5) < 1e-9
        ), loops
        assert data["optimizer_steps"]["rods"]["mean"] == STEPS
        # only the held-out hash check may complain about synthetic tasks
        assert all("held-out" in x for x in data["problems"]), data["problems"]
        # a planted breach of the update rule, a short run and a missing block are reported
        metrics = root / "runs" / "static-s3" / "metrics.jsonl"
        rows = [json.loads(x) for x in metrics.read_text().splitlines()]
        rows[1]["optimizer_steps"] = 1 - rows[1]["optimizer_steps"]
        _write_jsonl(metrics, [*rows[:-1], {**rows[-1], "terminations": {"max_turns": 4}}])
        (
            root / "final" / "variants-0" / f"step-{STEPS}" / "envtuning-s7" / "results.jsonl"
        ).unlink()
        data = analyze(root)
        problems = " | ".join(data["problems"])
        assert "block 7 incomplete" in problems and 7 not in data["blocks"], problems
        assert "static-s3 step 1: optimizer_steps" in problems, problems
        assert "static-s3: 92 training episodes" in problems, problems
        assert not data["as_registered"]
        # compressed results read the same
        for path in (root / "final").rglob("results.jsonl"):
            path.with_name("results.jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
            path.unlink()
        again = analyze(root)
        assert again["primary"]["mean"] == data["primary"]["mean"], (
            again["primary"],
            data["primary"],
        )
    print("analyze.py selftest: ok")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", nargs="?", type=Path, default=HERE / "out", help="the experiment's output folder"
    )
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    parser.add_argument("--selftest", action="store_true", help="run on synthetic data and check")
    args = parser.parse_args(argv)
    if args.selftest:
        return selftest()
    data = analyze(args.out)
    print(report(data))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
