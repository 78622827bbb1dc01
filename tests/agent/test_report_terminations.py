"""``rods report``: how episodes ended and the tokens trained, per run (terminations.png, one
of the report's PANELS, and a table in report.md)."""

from __future__ import annotations

from pathlib import Path

from rods_agent.training.report import Run, make_report, report_markdown, terminations_markdown
from rods_env.fileio import write_jsonl


def model_run(name: str, errors: list[int], loss_tokens: list[int]) -> Run:
    rows = [
        {
            "step": i,
            "mode": "filter",
            "policy": "model",
            "reward": 0.0,
            "progress": 0.0,
            "effective_group_ratio": 0.5,
            "zones": {"mastered": 0, "boundary": 1, "hard": 1},
            "variance": {"mastered": None, "boundary": 0.2, "hard": 0.0},
            "pool": {"active": 4, "parked": 0, "generations": {"0": 4}},
            "synthesized": {"accepted": 0},
            "time": {"step": 1.0, "engine": 0.0, "synthesis": 0.0},
            "terminations": {"user_stop": 0, "max_turns": 8 - e, "max_tokens": 0, "error": e},
            "loss_tokens": tokens,
        }
        for i, (e, tokens) in enumerate(zip(errors, loss_tokens, strict=True))
    ]
    return Run(Path(name), rows, {"mode": "filter", "policy": "model", "steps": len(rows)})


def test_the_table_shows_shares_by_termination_and_untrained_steps():
    healthy = model_run("healthy", [0, 0, 2, 0], [40, 35, 30, 50])
    broken = model_run("broken", [8, 8, 8, 8], [0, 0, 0, 0])
    lines = terminations_markdown([healthy, broken])
    assert "| run | episodes | max_turns | error | steps with no loss token |" in lines
    assert "| healthy | 32 | 93.8% | 6.2% | 0 |" in lines
    assert "| broken | 32 | 0.0% | 100.0% | 4 |" in lines
    assert "## How episodes ended" in report_markdown([healthy, broken])


def test_runs_logged_without_counts_get_a_note_and_no_table():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rods_agent.training.report import PANELS

    old = model_run("old", [0, 0], [1, 1])
    for row in old.rows:
        del row["terminations"]
    assert terminations_markdown([old]) == []
    fig = PANELS["terminations.png"]([old], 3, "")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("no termination counts" in t for t in texts)
    plt.close(fig)


def test_make_report_draws_the_panel_for_runs_with_counts(tmp_path):
    for run in (model_run("a", [0, 1, 8], [20, 10, 0]), model_run("b", [0, 0, 0], [5, 5, 5])):
        folder = tmp_path / run.path.name
        write_jsonl(folder / "metrics.jsonl", run.rows)
    written = make_report([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    png = tmp_path / "out" / "terminations.png"
    assert png in written and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| a | 24 |" in (tmp_path / "out" / "report.md").read_text()
