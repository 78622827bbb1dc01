"""``rods view`` on 10^4 episodes: the page's size, the time to build it, and (with Chromium)
how long the page takes to open, filter and show an episode.

The episodes are real and distinct: the random agent on every seed task of both domains,
25 trials each (10,000 episodes; ``RODS_BENCH_VIEW_TRIALS`` changes the trials), written by
``evaluate()`` as ``rods eval`` writes them. Sizes and times are printed and kept in the
pytest-benchmark's ``extra_info``; nothing is asserted about time.

Run: ``pytest benchmarks/test_view.py --benchmark-only -s``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rods_agent.engines import random_engine
from rods_agent.evaluation.evaluate import evaluate
from rods_agent.rollouts.batch import RolloutConfig
from rods_agent.view import view
from rods_env.registry import load_domain
from tests.agent import browser

TRIALS = int(os.environ.get("RODS_BENCH_VIEW_TRIALS", "25"))


@pytest.fixture(scope="module")
def evals(tmp_path_factory, request) -> list[Path]:
    # CI runs the benchmarks once with --benchmark-disable to keep them working: 2 trials
    # (800 episodes) are enough for that; the measurement takes 25 (10,000)
    trials = 2 if request.config.getoption("benchmark_disable") else TRIALS
    root = tmp_path_factory.mktemp("view-bench")
    folders = []
    for name in ("retail", "airline"):
        tasks = load_domain(name).seed_tasks()
        out = root / f"random-{name}"
        evaluate(random_engine(0), tasks, k=1, trials=trials, rollout=RolloutConfig(batch_size=64),
                 out=out, meta={"env": name, "model": "random", "engine": "random"})  # fmt: skip
        folders.append(out)
    return folders


def test_view_of_ten_thousand_episodes(benchmark, evals, tmp_path):
    page = tmp_path / "view.html"
    stats = benchmark.pedantic(lambda: view(evals, page), rounds=1, iterations=1)
    episodes = sum(len((f / "episodes.jsonl").read_text().splitlines()) for f in evals)
    read = sum((f / "episodes.jsonl").stat().st_size for f in evals)
    info = {
        "episodes": stats.episodes,
        "page_mb": stats.bytes / 1e6,
        "bytes_per_episode": stats.bytes / stats.episodes,
        "episodes_jsonl_mb": read / 1e6,
        "data_before_compression_mb": stats.raw_bytes / 1e6,
        "messages_cut": stats.cut_messages,
    }
    assert stats.episodes == episodes
    if browser.available():
        with browser.chromium() as driver:
            started = time.perf_counter()
            browser.open_page(driver, page, timeout=300)
            info["chromium_open_s"] = time.perf_counter() - started
            info["chromium_filter_ms"] = driver.execute_script(
                "const s = document.getElementById('f-outcome') || document.getElementById('f-termination');"
                "const t = performance.now(); s.value = s.options[1].value;"
                "s.dispatchEvent(new Event('change')); return performance.now() - t;"
            )
            info["chromium_open_episode_ms"] = driver.execute_async_script(
                "const done = arguments[0]; const t = performance.now();"
                "document.querySelector('#list tbody tr:last-child').click();"
                "const wait = () => document.querySelector('article.episode') ? "
                "done(performance.now() - t) : setTimeout(wait, 5); wait();"
            )
    benchmark.extra_info.update(info)
    print()
    for key, value in info.items():
        print(f"{key}: {value:,.2f}" if isinstance(value, float) else f"{key}: {value:,}")
