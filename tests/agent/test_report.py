"""``rods report``: the RODS target computed from metrics, plots of several runs, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rods_agent import cli
from rods_agent.training.report import (
    PANELS,
    Run,
    compare,
    make_report,
    report_markdown,
    rolling,
    summarize,
)
from rods_env.fileio import write_jsonl


def run_of(mode: str, ratios: list[float], steps: int | None = None) -> Run:
    rows = [
        {
            "step": i,
            "mode": mode,
            "policy": "simulated",
            "reward": 0.5,
            "progress": 0.5,
            "effective_group_ratio": r,
            "zones": {"mastered": 1, "boundary": 2, "hard": 1},
            "variance": {"mastered": 0.0, "boundary": 0.2, "hard": None},
            "pool": {"active": 10, "parked": 1, "generations": {"0": 8, "1": 2}},
            "synthesized": {"accepted": 1 if mode == "rods" else 0},
            "time": {"step": 1.0, "engine": 0.01, "synthesis": 0.04},
        }
        for i, r in enumerate(ratios)
    ]
    return Run(Path(mode), rows, {"mode": mode, "policy": "simulated", "steps": steps or len(rows)})


def test_rolling_mean_skips_missing_values():
    assert rolling([1.0, None, 3.0, 5.0], 2) == [1.0, 1.0, 2.0, 4.0]
    assert rolling([None, 2.0], 3) == [None, 2.0]


def test_target_met_and_missed():
    static = run_of("static", [0.6] * 40 + [0.0] * 60)
    held = run_of("rods", [0.9] * 100)
    dropped = run_of("rods", [0.9] * 60 + [0.5] * 40)
    c = compare(static, held, window=25)
    # the trailing 25-step mean first drops below 0.3 once 13 of its 25 steps are at 0
    assert c["static_fell_at"] == 52
    assert c["holds"] is True and c["rods_ratio_after"] == pytest.approx(0.9)
    assert c["rods_steps_after"] == 48
    assert compare(static, dropped, window=25)["holds"] is False
    never = compare(run_of("static", [0.6] * 100), held)
    assert never["static_fell_at"] is None and never["holds"] is None


def test_summary_and_markdown_name_the_simulation_and_early_stops():
    rods = run_of("rods", [0.9] * 30, steps=50)
    s = summarize(rods)
    assert s["data_engine_time_share"] == pytest.approx(0.05)
    assert s["stopped_early_at"] == 30 and s["synthesized_accepted"] == 30
    text = report_markdown([run_of("static", [0.6] * 30 + [0.1] * 30), rods])
    assert "simulated learner: no model was trained" in text
    assert "rods stopped at step 30 of 50" in text
    assert "target missed (rods had stopped" in text


def test_several_runs_side_by_side(tmp_path, capsys):
    for mode, ratios in (("static", [0.6] * 10), ("rods", [0.9] * 10)):
        folder = tmp_path / mode
        write_jsonl(folder / "metrics.jsonl", run_of(mode, ratios).rows)
        (folder / "config.yaml").write_text(f"mode: {mode}\npolicy: simulated\nsteps: 10\n")
    written = make_report([tmp_path / "static", tmp_path / "rods"], tmp_path / "out")
    assert sorted(p.name for p in written) == [
        "difficulty.png",
        "effective_group_ratio.png",
        "modes.png",
        "pool.png",
        "report.md",
        "reward.png",
        "terminations.png",
        "variance.png",
        "zones.png",
    ]
    assert cli.main(["report", str(tmp_path / "static"), str(tmp_path / "rods")]) == 2
    assert "--out is needed" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "nothing")]) == 2
    assert "not a training run (no metrics.jsonl)" in capsys.readouterr().err


def _legend(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_every_curve_is_drawn_raw_and_smoothed_and_says_which_is_which():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = run_of("rods", [0.0, 0.5, 1.0, 0.0, 0.25, 0.75])
    run.rows[4]["reward"] = 0.0  # the step's own value must be drawn, not only a mean
    for name, panel in PANELS.items():
        fig = panel([run], 3, "")
        for ax in fig.axes:
            assert ax.get_ylabel(), f"{name}: an unlabelled y axis"
        plt.close(fig)
    fig = PANELS["reward.png"]([run], 3, "")
    reward = fig.axes[0]
    assert _legend(reward) == [
        "rods (resample) (rods): each step",
        "rods (resample) (rods): 3-step trailing mean",
    ]
    raw, smooth = reward.get_lines()[:2]
    assert list(raw.get_ydata())[4] == 0.0 and list(smooth.get_ydata())[4] == pytest.approx(1 / 3)
    plt.close(fig)
    fig = PANELS["effective_group_ratio.png"]([run], 3, "")
    legend = _legend(fig.axes[0])
    assert "0.8: rods should hold this" in legend and "0.3: static runs dry" in legend
    plt.close(fig)
    fig = PANELS["pool.png"]([run], 3, "")
    assert "parked at that step (running count)" in _legend(fig.axes[0])
    plt.close(fig)


def test_first_and_last_means_of_a_short_run_do_not_average_the_same_steps():
    run = run_of("rods", [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    s = summarize(run, window=25)
    assert s["means_over"] == 3 and s["ratio_first"] == 1.0 and s["ratio_last"] == 0.0
    assert summarize(run_of("rods", [0.5] * 100), window=25)["means_over"] == 25
    assert summarize(run_of("rods", [0.5]), window=25)["means_over"] == 1
    text = report_markdown([run])
    assert "| rods | rods (resample) | 6 | - | 3 | 1.000 | 0.000 |" in text


def test_the_modes_side_by_side_and_the_pools_difficulty():
    """modes.png puts the modes in the order static, envtuning, filter, rods, rods-expand,
    whatever order they come in;
    difficulty.png draws the pool's knobs, raw and smoothed, for the runs that report them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for mode in ("rods", "rods-expand", "static", "filter", "envtuning"):
        run = run_of(mode, [0.9, 0.5, 0.2, 0.4])
        for i, row in enumerate(run.rows):
            row["pool"] = {**row.get("pool", {}),
                           "difficulty": {"depth": 2 + i, "width": 1, "turns": 1 + i, "skills": 1}}  # fmt: skip
        runs.append(run)
    fig = PANELS["modes.png"](runs, 2, "")
    assert [ax.get_title() for ax in fig.axes] == [
        "static (static)",
        "envtuning (envtuning)",
        "filter (filter)",
        "rods (resample) (rods)",
        "rods-expand (resample+expand) (rods-expand)",
    ]
    plt.close(fig)
    fig = PANELS["difficulty.png"](runs, 2, "")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("dependency depth") and titles[3] == "skills composed"
    depth = fig.axes[0]
    raw = depth.get_lines()[0]
    assert list(raw.get_ydata()) == [2, 3, 4, 5]
    assert "rods (resample) (rods): 2-step trailing mean" in _legend(depth)
    plt.close(fig)
    bare = run_of("static", [0.5, 0.5])
    fig = PANELS["difficulty.png"]([bare], 2, "")  # no difficulty in its metrics: no curve
    assert all(not ax.get_lines() for ax in fig.axes)
    plt.close(fig)


def test_runs_are_labelled_as_they_ran_and_count_their_optimizer_steps():
    """A run of mode rods from before rods meant resample-only says that it expanded; the
    table counts each run's optimizer steps (equal steps are checkable across modes)."""
    old = run_of("rods", [0.9] * 4)
    old.config["data"] = {"synth_modes": ["resample", "expand"]}
    for row in old.rows:
        row["update"] = {"optimizer_steps": 1.0}  # logged before the top-level count
    new = run_of("rods", [0.9] * 4)
    new.config["data"] = {"synth_modes": None}
    static = run_of("static", [0.5] * 4)
    for i, row in enumerate(new.rows + static.rows):
        row["optimizer_steps"] = i % 2
    assert old.mode_label == "rods (with expansion, the default before 2026-12-06)"
    assert new.mode_label == "rods (resample)" and static.mode_label == "static"
    assert [old.optimizer_steps, new.optimizer_steps, static.optimizer_steps] == [4, 2, 2]
    assert run_of("filter", [0.5]).optimizer_steps is None  # metrics that do not say
    text = report_markdown([old, new, static])
    assert "| rods | rods (with expansion, the default before 2026-12-06) | 4 | 4 |" in text
    assert "| rods | rods (resample) | 4 | 2 |" in text
    assert summarize(new)["mode_label"] == "rods (resample)"
