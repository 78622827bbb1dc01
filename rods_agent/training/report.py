"""``rods report``: plots and a summary of one or more training runs, side by side.

Reads each run directory's ``metrics.jsonl`` and ``config.yaml`` (see
:mod:`rods_agent.training.loop`) and draws, with matplotlib, one function per plot
(:data:`PANELS`). A curve is drawn twice: each step's value (thin) and its trailing mean
over ``--window`` steps (thick), both in the legend; every y axis says what it counts.

- ``reward.png``: reward and progress per step (and test-split progress when evaluated);
- ``effective_group_ratio.png``: the share of groups with a reward variance, one line per
  run (labelled by mode), with the 0.3 and 0.8 marks of the RODS target;
- ``zones.png``: the zones of each step's groups over time, one panel per run;
- ``pool.png``: the active pool by synthesis generation over time, one panel per run;
- ``variance.png``: the mean reward variance of each zone's groups over time;
- ``modes.png``: one panel per run (static, envtuning, filter, rods, rods-expand), each
  with its effective group ratio, reward and test progress on the same axes;
- ``difficulty.png``: the active pool's mean difficulty knobs (dependency depth, requests
  in one turn, turns, skills composed) over time, one colour per run;
- ``terminations.png``: how each step's episodes ended and the tokens its update trained on
  (:func:`plot_terminations`; runs logged before these counts get a note instead).

``report.md`` holds the numbers (and, given a ``static`` and a ``rods`` run, whether rods
held an effective group ratio of at least 0.8 after static fell below 0.3). Runs of the
simulated learner are labelled as such in every title and table. Every run is labelled
with its mode and the synthesis modes it used (:func:`rods_agent.training.config.mode_label`: a
run of mode ``rods`` from before rods meant resample-only says that it expanded too), and
the table counts its optimizer steps (equal optimizer steps can be checked across modes).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError
from rods_env.fileio import atomic_write, read_jsonl

ZONE_COLORS = {"mastered": "#4c9a5b", "boundary": "#e0a030", "hard": "#c0504d"}
FELL_BELOW = 0.3
HOLDS = 0.8


@dataclass
class Run:
    """One run directory's metrics and settings.

    Attributes:
        path: The run directory.
        rows: Its metrics lines, ordered by step.
        config: Its resolved configuration (as a plain dict; empty when missing).
    """

    path: Path
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """The run's mode (static, filter, rods, rods-expand or envtuning)."""
        return str(self.config.get("mode") or (self.rows[0].get("mode") if self.rows else "?"))

    @property
    def mode_label(self) -> str:
        """The mode with the synthesis modes the run used, as it ran
        (:func:`rods_agent.training.config.mode_label`), from its config or else its metrics."""
        from rods_agent.training.config import mode_label

        data = self.config.get("data")
        if isinstance(data, Mapping):
            return mode_label(
                self.mode, data.get("synth_modes"), synthesize=data.get("synthesize", True)
            )
        logged = self.rows[0].get("synth_modes") if self.rows else None
        if isinstance(logged, list) and self.mode in ("rods", "rods-expand"):
            return mode_label(self.mode, logged, synthesize=bool(logged))
        return mode_label(self.mode)

    @property
    def optimizer_steps(self) -> int | None:
        """Optimizer steps the run took (None when its metrics do not say)."""
        total = 0
        for row in self.rows:
            logged = row.get("update")
            update: Mapping[str, Any] = logged if isinstance(logged, Mapping) else {}
            if "optimizer_steps" in row:
                total += int(row["optimizer_steps"] or 0)
            elif "optimizer_steps" in update:  # logged before the top-level count existed
                total += int(update["optimizer_steps"] or 0)
            else:
                return None
        return total

    @property
    def simulated(self) -> bool:
        """Whether the run used the simulated learner instead of a model."""
        policy = self.config.get("policy") or (self.rows[0].get("policy") if self.rows else "")
        return policy == "simulated"

    @property
    def label(self) -> str:
        """``mode label (folder)``."""
        return f"{self.mode_label} ({self.path.name})"

    def series(self, *keys: str) -> list[float | None]:
        """One value per step, following nested ``keys`` (None where missing)."""
        out: list[float | None] = []
        for row in self.rows:
            value: Any = row
            for key in keys:
                value = value.get(key) if isinstance(value, Mapping) else None
            out.append(float(value) if isinstance(value, (int, float)) else None)
        return out

    @property
    def stopped_early(self) -> int | None:
        """The step at which the run stopped before its configured steps (its pool was
        exhausted), or None."""
        planned = self.config.get("steps")
        done = self.rows[-1]["step"] + 1
        return done if isinstance(planned, int) and done < planned else None

    @property
    def steps(self) -> list[int]:
        """The step of each row."""
        return [int(r["step"]) for r in self.rows]


def load_run(path: str | Path) -> Run:
    """Read a run directory.

    Raises:
        ConfigError: when it is not a run directory or has no metrics yet.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    path = Path(path)
    metrics = path / "metrics.jsonl"
    if not metrics.exists():
        raise ConfigError(f"{path}: not a training run (no metrics.jsonl)")
    rows = sorted(
        (r for r in read_jsonl(metrics) if isinstance(r.get("step"), int)), key=lambda r: r["step"]
    )
    if not rows:
        raise ConfigError(f"{metrics}: no steps recorded yet")
    config: dict[str, Any] = {}
    saved = path / "config.yaml"
    if saved.exists():
        try:
            loaded = OmegaConf.to_container(OmegaConf.load(saved))
        except (OmegaConfBaseException, ValueError, OSError) as exc:
            raise ConfigError(f"{saved}: unreadable ({str(exc).splitlines()[0]})") from None
        config = {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}
    return Run(path, rows, config)


def rolling(values: Sequence[float | None], window: int) -> list[float | None]:
    """Trailing mean over the last ``window`` present values (None until one is seen)."""
    out: list[float | None] = []
    recent: list[float] = []
    for v in values:
        if v is not None:
            recent.append(v)
            if len(recent) > window:
                recent.pop(0)
        out.append(sum(recent) / len(recent) if recent else None)
    return out


def _plottable(values: Sequence[float | None]) -> list[float]:
    """Missing values as NaN (matplotlib leaves a gap)."""
    return [math.nan if v is None else v for v in values]


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(run: Run, window: int = 25) -> dict[str, Any]:
    """The numbers of one run: ratios early and late, when it fell below 0.3, time shares.

    'First' and 'last' are means over ``window`` steps, or over half the run when it is
    shorter (``means_over``), so they never average the same steps.
    """
    ratio = run.series("effective_group_ratio")
    smooth = rolling(ratio, window)
    fell = next(
        (
            s
            for s, i, v in zip(run.steps, range(len(smooth)), smooth, strict=True)
            if i + 1 >= window and v is not None and v < FELL_BELOW
        ),
        None,
    )
    evals = [(r["step"], r["eval"]) for r in run.rows if isinstance(r.get("eval"), Mapping)]
    step_time = [v or 0.0 for v in run.series("time", "step")]
    data_time = [
        (a or 0.0) + (b or 0.0)
        for a, b in zip(run.series("time", "engine"), run.series("time", "synthesis"), strict=True)
    ]
    total = sum(step_time)
    span = means_window(len(run.rows), window)
    return {
        "run": str(run.path),
        "mode": run.mode,
        "mode_label": run.mode_label,
        "optimizer_steps": run.optimizer_steps,
        "simulated": run.simulated,
        "steps": len(run.rows),
        "stopped_early_at": run.stopped_early,
        "means_over": span,
        "ratio_first": _mean(ratio[:span]),
        "ratio_last": _mean(ratio[-span:]),
        "fell_below_0.3_at": fell,
        "reward_last": _mean(run.series("reward")[-span:]),
        "progress_last": _mean(run.series("progress")[-span:]),
        "eval_progress_last": evals[-1][1].get("progress") if evals else None,
        "synthesized_accepted": int(sum(v or 0 for v in run.series("synthesized", "accepted"))),
        "pool_last": run.rows[-1].get("pool", {}).get("active"),
        "data_engine_time_share": sum(data_time) / total if total > 0 else None,
    }


def compare(static: Run, rods: Run, window: int = 25) -> dict[str, Any]:
    """The RODS target: after ``static``'s rolling ratio falls below 0.3, does ``rods``
    hold a ratio of at least 0.8?

    Returns:
        ``static_fell_at`` (the step, or None), ``rods_ratio_after`` (rods' mean ratio over
        the steps from then on), ``rods_min_rolling_after`` (its lowest rolling mean then)
        and ``holds`` (True, False, or None when static never fell below 0.3).
    """
    fell = summarize(static, window)["fell_below_0.3_at"]
    if fell is None:
        return {
            "static_fell_at": None,
            "rods_steps_after": 0,
            "rods_ratio_after": None,
            "rods_min_rolling_after": None,
            "holds": None,
        }
    ratio = rods.series("effective_group_ratio")
    after = [v for s, v in zip(rods.steps, ratio, strict=True) if s >= fell]
    smooth = [v for s, v in zip(rods.steps, rolling(ratio, window), strict=True) if s >= fell]
    mean_after = _mean(after)
    return {
        "static_fell_at": fell,
        "rods_steps_after": len(after),
        "rods_ratio_after": mean_after,
        "rods_min_rolling_after": min((v for v in smooth if v is not None), default=None),
        "holds": mean_after is not None and mean_after >= HOLDS,
    }


def _curve(
    ax: Any,
    steps: Sequence[int],
    values: Sequence[float | None],
    window: int,
    *,
    color: str,
    label: str,
) -> None:
    """One series twice: each step's raw value (thin, faint, with dots on short runs) and
    its ``window``-step trailing mean over it (thick), both in the legend."""
    raw = _plottable(values)
    ax.plot(steps, raw, color=color, lw=0.8, alpha=0.35, marker="." if len(steps) <= 60 else None,
            label=f"{label}: each step")  # fmt: skip
    ax.plot(steps, _plottable(rolling(values, window)), color=color, lw=2.0,
            label=f"{label}: {window}-step trailing mean")  # fmt: skip


def plot_reward(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``reward.png``: the mean reward and progress of each step's episodes (raw and
    smoothed), with the test-split progress of evaluation steps."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    for i, run in enumerate(runs):
        color = f"C{i}"
        for ax, key in zip(axes[0], ("reward", "progress"), strict=True):
            _curve(ax, run.steps, run.series(key), window, color=color, label=run.label)
        evals = [(r["step"], r["eval"].get("progress")) for r in run.rows if "eval" in r]
        evals = [(s, v) for s, v in evals if isinstance(v, (int, float))]
        if evals:
            axes[0][1].plot(*zip(*evals, strict=True), "o--", color=color, ms=4,
                            label=f"{run.label}: test split (evaluation steps)")  # fmt: skip
    for ax, key in zip(axes[0], ("reward", "progress"), strict=True):
        ax.set(title=f"{key} per step{suffix}", xlabel="step",
               ylabel=f"mean {key} of the step's episodes", ylim=(0, 1.02))  # fmt: skip
        ax.legend(fontsize=7)
    return fig


def plot_ratio(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``effective_group_ratio.png``: the share of groups with reward variance (raw and
    smoothed), one colour per run, with the 0.3 and 0.8 marks of the RODS target."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, run in enumerate(runs):
        _curve(ax, run.steps, run.series("effective_group_ratio"), window, color=f"C{i}",
               label=run.label)  # fmt: skip
    ax.axhline(HOLDS, color="grey", ls=":", lw=1, label=f"{HOLDS}: rods should hold this")
    ax.axhline(FELL_BELOW, color="grey", ls="--", lw=1, label=f"{FELL_BELOW}: static runs dry")
    ax.set(title=f"effective group ratio by mode{suffix}", xlabel="step",
           ylabel="share of groups with reward variance", ylim=(0, 1.02))  # fmt: skip
    ax.legend(fontsize=7)
    return fig


def plot_zones(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``zones.png``: each step's groups by zone, stacked, one panel per run
    (``window``-step trailing means, said in the axis label)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.5 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        stacks = [rolling(run.series("zones", z), window) for z in ZONE_COLORS]
        ax.stackplot(run.steps, *[[v or 0.0 for v in s] for s in stacks],
                     labels=list(ZONE_COLORS), colors=list(ZONE_COLORS.values()))  # fmt: skip
        ax.set(title=f"zones: {run.label}", xlabel="step",
               ylabel=f"groups per step ({window}-step mean)")  # fmt: skip
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"zones over time{suffix}")
    return fig


def plot_pool(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``pool.png``: the active pool by synthesis generation at each step, and the tasks
    parked at that step (a running count, not new parks), one panel per run."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        generations = sorted(
            {g for r in run.rows for g in r.get("pool", {}).get("generations", {})}, key=int
        )
        layers = [
            [float(r.get("pool", {}).get("generations", {}).get(g, 0)) for r in run.rows]
            for g in generations
        ]
        if layers:
            # one colour per generation along a ramp (a cycle of ten would repeat them)
            colors = plt.get_cmap("viridis")(
                [i / max(len(layers) - 1, 1) for i in range(len(layers))]
            )
            ax.stackplot(run.steps, *layers, colors=colors,
                         labels=[f"active, generation {g}" for g in generations])  # fmt: skip
        parked = run.series("pool", "parked")
        ax.plot(run.steps, [v or 0.0 for v in parked], "k--", lw=1,
                label="parked at that step (running count)")  # fmt: skip
        ax.set(title=f"pool: {run.label}", xlabel="step", ylabel="tasks (each step's count)")
        # beside the axes: a long run's many generations would hide the pool
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  ncol=1 + len(generations) // 16)  # fmt: skip
    fig.tight_layout()
    fig.suptitle(f"pool composition by generation{suffix}")
    return fig


def plot_variance(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``variance.png``: the mean reward variance of each zone's groups (raw and smoothed)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), squeeze=False)
    for ax, zone in zip(axes[0], ZONE_COLORS, strict=True):
        for i, run in enumerate(runs):
            _curve(ax, run.steps, run.series("variance", zone), window, color=f"C{i}",
                   label=run.label)  # fmt: skip
        ax.set(title=f"{zone}: mean reward variance", xlabel="step",
               ylabel="reward variance of the zone's groups", ylim=(0, 0.26))  # fmt: skip
        ax.legend(fontsize=7)
    fig.suptitle(f"variance by zone{suffix}")
    return fig


MODE_ORDER = ("static", "envtuning", "filter", "rods", "rods-expand")
KNOB_TITLES = {
    "depth": "dependency depth (calls on the longest chain)",
    "width": "requests in one turn (the most)",
    "turns": "turns",
    "skills": "skills composed",
}
"""The difficulty knobs of a task (:attr:`rods_env.task.Signature.knobs`) and their titles."""


def plot_modes(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``modes.png``: one panel per run, in :data:`MODE_ORDER`: its effective
    group ratio and reward (raw and smoothed) and its test progress, on the same axes, with
    the 0.3 and 0.8 marks of the RODS target, so the modes compare side by side."""
    import matplotlib.pyplot as plt

    ordered = sorted(
        runs, key=lambda r: MODE_ORDER.index(r.mode) if r.mode in MODE_ORDER else len(MODE_ORDER)
    )
    fig, axes = plt.subplots(1, len(ordered), figsize=(4.8 * len(ordered), 3.9), squeeze=False,
                             sharey=True)  # fmt: skip
    for ax, run in zip(axes[0], ordered, strict=True):
        _curve(ax, run.steps, run.series("effective_group_ratio"), window, color="C0",
               label="effective group ratio")  # fmt: skip
        _curve(ax, run.steps, run.series("reward"), window, color="C1", label="reward")
        evals = [(r["step"], r["eval"].get("progress")) for r in run.rows if "eval" in r]
        evals = [(s, v) for s, v in evals if isinstance(v, (int, float))]
        if evals:
            ax.plot(*zip(*evals, strict=True), "o--", color="C2", ms=4,
                    label="test progress (evaluation steps)")  # fmt: skip
        ax.axhline(HOLDS, color="grey", ls=":", lw=1)
        ax.axhline(FELL_BELOW, color="grey", ls="--", lw=1)
        ax.set(title=run.label, xlabel="step", ylabel="share of groups / mean reward",
               ylim=(0, 1.02))  # fmt: skip
        ax.legend(fontsize=6, loc="lower left")
    fig.suptitle(f"the modes side by side{suffix}")
    return fig


def plot_difficulty(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``difficulty.png``: the active pool's mean difficulty knobs at each step (raw and
    smoothed), one colour per run: dependency depth, requests in one turn, turns, skills
    composed (``pool.difficulty`` of the metrics lines; a run without it draws nothing)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KNOB_TITLES), figsize=(4.3 * len(KNOB_TITLES), 3.7),
                             squeeze=False)  # fmt: skip
    for ax, (knob, title) in zip(axes[0], KNOB_TITLES.items(), strict=True):
        drawn = False
        for i, run in enumerate(runs):
            values = run.series("pool", "difficulty", knob)
            if any(v is not None for v in values):
                _curve(ax, run.steps, values, window, color=f"C{i}", label=run.label)
                drawn = True
        ax.set(title=title, xlabel="step", ylabel="mean over the active pool")
        if drawn:
            ax.legend(fontsize=6)
    fig.suptitle(f"the pool's difficulty{suffix}")
    return fig


# -- how episodes ended, and the tokens trained ---------------------------------------------------
TERMINATION_COLORS = {
    "user_stop": "#4c9a5b",
    "terminal_tool": "#7fb77e",
    "max_turns": "#e0a030",
    "max_steps": "#f2c76e",
    "max_tokens": "#8c6bb1",
    "error": "#c0504d",
}


def termination_totals(run: Run) -> dict[str, int]:
    """Episodes of the whole run by termination (empty for runs logged before the
    metrics lines carried ``terminations``)."""
    totals: dict[str, int] = {}
    for row in run.rows:
        for name, count in (row.get("terminations") or {}).items():
            totals[name] = totals.get(name, 0) + int(count)
    return totals


def plot_terminations(runs: Sequence[Run], window: int, suffix: str) -> Any:
    """``terminations.png``: per run, the share of each step's episodes by how they ended
    (stacked), and the tokens each step's update trained on (raw and smoothed, on the right
    axis); a run that trains nothing shows a flat zero, one whose episodes fail a red band."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.8 * len(runs), 3.8), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        totals = termination_totals(run)
        names = [n for n, count in totals.items() if count > 0]
        episodes = [sum((r.get("terminations") or {}).values()) for r in run.rows]
        layers = [
            [
                (r.get("terminations") or {}).get(name, 0) / total if total else 0.0
                for r, total in zip(run.rows, episodes, strict=True)
            ]
            for name in names
        ]
        if layers:
            ax.stackplot(run.steps, *layers, labels=names, alpha=0.85,
                         colors=[TERMINATION_COLORS.get(n, "#999999") for n in names])  # fmt: skip
            ax.legend(fontsize=7, loc="lower left")
        else:
            ax.text(0.5, 0.5, "no termination counts\n(metrics logged before they were)",
                    ha="center", va="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
        ax.set(title=f"episodes: {run.label}", xlabel="step",
               ylabel="share of the step's episodes, by ending", ylim=(0, 1.0))  # fmt: skip
        tokens = ax.twinx()
        trained = run.series("loss_tokens")
        _curve(tokens, run.steps, trained, window, color="black", label="loss tokens")
        tokens.set_ylabel("tokens the step's update trained on")
        top = max([1.0, *(v for v in trained if v is not None)])
        tokens.set_ylim(0, 1.1 * top)
        tokens.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"how episodes ended, and the tokens trained{suffix}")
    return fig


Panel = Callable[[Sequence[Run], int, str], Any]
PANELS: dict[str, Panel] = {
    "reward.png": plot_reward,
    "effective_group_ratio.png": plot_ratio,
    "zones.png": plot_zones,
    "pool.png": plot_pool,
    "variance.png": plot_variance,
    "modes.png": plot_modes,
    "difficulty.png": plot_difficulty,
    "terminations.png": plot_terminations,
}
"""The plots of ``rods report``, in order: file name to the function that draws it (from
the runs, the smoothing window and the title suffix). ``rods view`` shows each of them."""


def make_report(paths: Sequence[str | Path], out: str | Path, *, window: int = 10) -> list[Path]:
    """Draw the plots (:data:`PANELS`) and write ``report.md`` for the runs in ``paths``.

    Args:
        paths: Run directories.
        out: Folder for the PNGs and ``report.md``.
        window: Steps of the trailing mean drawn over each raw curve.

    Returns:
        The files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [load_run(p) for p in paths]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = " (simulated learner)" if any(r.simulated for r in runs) else ""
    written = []
    for name, panel in PANELS.items():
        fig = panel(runs, window, suffix)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        written.append(atomic_write(out / name, buf.getvalue()))
    path = out / "report.md"
    atomic_write(path, report_markdown(runs))
    written.append(path)
    return written


def means_window(steps: int, window: int) -> int:
    """Steps in the 'first' and 'last' means of a run of ``steps``: ``window``, or fewer so
    that the first and the last do not overlap (half the run, at least one step)."""
    return max(1, min(window, steps // 2))


def report_markdown(runs: Sequence[Run], window: int = 25) -> str:
    """The summary table of the runs (and the RODS target when static and rods are given)."""
    simulated = any(r.simulated for r in runs)
    lines = [
        "# Training report" + (" (simulated learner: no model was trained)" if simulated else "")
    ]
    lines += [
        "",
        f"'ratio first', 'ratio last' and 'reward last' are means over a run's first / last "
        f"N steps: N = {window}, or half the run when it is shorter (column 'N'). 'fell below "
        f"0.3' is the first step whose trailing {window}-step mean ratio is under 0.3 (a run "
        f"of fewer than {window} steps has none). 'pool' is the active pool at the last step. "
        "'optimizer steps': steps whose update had a token with a non-zero advantage (the one "
        "rule of every mode since 2026-12-06; before, static also stepped on tied batches).",
        "",
        "| run | mode | steps | optimizer steps | N | ratio first | ratio last | fell below 0.3 | "
        "reward last | test progress | synthesized | pool | data engine time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def fmt(v: Any, pct: bool = False) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{100 * v:.1f}%" if pct else f"{v:.3f}"
        return str(v)

    for run in runs:
        s = summarize(run, window)
        lines.append(
            f"| {run.path.name} | {s['mode_label']} | {s['steps']} | "
            f"{fmt(s['optimizer_steps'])} | {s['means_over']} | "
            f"{fmt(s['ratio_first'])} | "
            f"{fmt(s['ratio_last'])} | {fmt(s['fell_below_0.3_at'])} | {fmt(s['reward_last'])} | "
            f"{fmt(s['eval_progress_last'])} | {s['synthesized_accepted']} | {fmt(s['pool_last'])} | "
            f"{fmt(s['data_engine_time_share'], pct=True)} |"
        )
    for run in runs:
        if run.stopped_early is not None:
            lines.append(
                f"\n{run.path.name} stopped at step {run.stopped_early} of "
                f"{run.config.get('steps')}: its pool was exhausted (every task retired or "
                "parked as hard)."
            )
    lines += terminations_markdown(runs)
    statics = [r for r in runs if r.mode == "static"]
    rods = [r for r in runs if r.mode == "rods"] or [r for r in runs if r.mode == "rods-expand"]
    if statics and rods:
        c = compare(statics[0], rods[0], window)
        lines += ["", "## Target: rods holds a ratio >= 0.8 after static falls below 0.3", ""]
        if c["static_fell_at"] is None:
            lines.append(f"static ({statics[0].path.name}) never fell below 0.3: not measurable.")
        else:
            verdict = "met" if c["holds"] else "missed"
            if rods[0].stopped_early is not None and rods[0].stopped_early <= c["static_fell_at"]:
                verdict = "missed (rods had stopped: its pool was exhausted)"
            lines.append(
                f"static fell below 0.3 at step {c['static_fell_at']}; over the "
                f"{c['rods_steps_after']} steps from then on rods averaged "
                f"{fmt(c['rods_ratio_after'])} (lowest {window}-step mean "
                f"{fmt(c['rods_min_rolling_after'])}): target {verdict}."
            )
    return "\n".join(lines) + "\n"


def terminations_markdown(runs: Sequence[Run]) -> list[str]:
    """The runs' episodes by termination, and the steps that trained no token (lines of
    ``report.md``; none when no run has termination counts)."""
    shown = [(r, termination_totals(r)) for r in runs if termination_totals(r)]
    if not shown:
        return []
    names = list(dict.fromkeys(n for _, totals in shown for n, c in totals.items() if c))
    lines = [
        "",
        "## How episodes ended",
        "",
        "| run | episodes | " + " | ".join(names) + " | steps with no loss token |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |",
    ]
    for run, totals in shown:
        episodes = sum(totals.values())
        shares = [f"{100 * totals.get(n, 0) / episodes:.1f}%" if episodes else "-" for n in names]
        untrained = (
            "-"
            if run.simulated
            else str(sum(1 for r in run.rows if not (r.get("loss_tokens") or 0)))
        )
        lines.append(
            f"| {run.path.name} | {episodes} | " + " | ".join(shares) + f" | {untrained} |"
        )
    return lines
