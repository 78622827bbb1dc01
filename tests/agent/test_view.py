"""``rods view``: the page's data, its size bound and the command (the browser: test_view_browser)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from rods_agent.view import load_sources, view
from rods_env.errors import ConfigError
from rods_env.fileio import read_jsonl, write_jsonl
from tests.agent.test_cli import rods


def page_data(path: Path) -> tuple[dict, list[dict]]:
    """The index and the transcripts embedded in a page, decoded as the browser does."""
    text = path.read_text(encoding="utf-8")
    index = re.search(r'<script id="rods-index"[^>]*>([^<]*)</script>', text)
    chunks = re.search(r'<script id="rods-chunks"[^>]*>([^<]*)</script>', text)
    assert index and chunks

    def unpack(blob: str):
        return json.loads(gzip.decompress(base64.b64decode(blob)))

    details = [d for blob in json.loads(chunks.group(1)) for d in unpack(blob)]
    return unpack(index.group(1)), details


def test_the_page_holds_every_episode_with_why_its_turns_failed(evals, tmp_path):
    oracle, random = evals
    stats = view([oracle, random], tmp_path / "view.html")
    index, details = page_data(stats.path)
    written = read_jsonl(oracle / "episodes.jsonl") + read_jsonl(random / "episodes.jsonl")
    assert stats.episodes == stats.total == len(index["episodes"]) == len(details) == 18
    assert [s["name"] for s in index["sources"]] == ["oracle", "random"]
    for row, detail, record in zip(index["episodes"], details, written, strict=True):
        assert row["t"] == record["task_id"] and row["k"] == record["trial"]
        assert row["ok"] == record["success"] and row["g"] == record["progress"]
        # each turn's verdict and rules, as the reward computed them
        assert [t["ok"] for t in detail["tr"]] == [r["passed"] for r in record["turn_results"]]
        assert [[f[1] for f in t["f"]] for t in detail["tr"]] == [
            [f["text"] for f in r["failures"]] for r in record["turn_results"]
        ]
        assert row["f"] == sorted(
            {f["rule"] for r in record["turn_results"] for f in r["failures"]}
        )
    assert all(row["ok"] for row in index["episodes"][:6])
    assert not any(row["ok"] for row in index["episodes"][6:])
    # the gold calls of every task, and one copy of the policy for all 18 episodes
    assert set(index["tasks"]) == {r["task_id"] for r in written}
    some = next(iter(index["tasks"].values()))
    assert some["turns"][0]["calls"] and some["d"] == "retail"
    assert len(index["systems"]) == 1
    assert all(d["m"][0] == {"r": "system", "sys": 0} for d in details)
    # the runs side by side: each eval's numbers and its pass^k plot
    cards = {s["name"]: dict(s["cards"]) for s in index["sources"]}
    assert cards["oracle"]["pass^1"] == "1.000" and cards["random"]["pass^2"] == "0.000"
    assert index["sources"][0]["plots"][0]["src"].startswith("data:image/png;base64,")


def test_the_page_needs_nothing_from_the_network(evals, tmp_path):
    stats = view(list(evals), tmp_path / "view.html")
    text = stats.path.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "@import" not in text and "fetch(" not in text


def test_long_messages_are_cut_in_the_page_and_say_where_the_whole_text_is(evals, tmp_path):
    oracle, _ = evals
    rows = read_jsonl(oracle / "episodes.jsonl")
    tool = next(i for i, m in enumerate(rows[0]["messages"]) if m["role"] == "tool")
    rows[0]["messages"][tool]["content"] = "x" * 10_000
    rows[0]["messages"][1]["content"] = "y" * 10_000
    big = tmp_path / "big"
    big.mkdir()
    for name in ("config.json", "summary.json", "tasks.jsonl", "results.jsonl"):
        (big / name).write_bytes((oracle / name).read_bytes())
    write_jsonl(big / "episodes.jsonl", rows)
    stats = view([big], tmp_path / "view.html", max_chars=500)
    _, details = page_data(stats.path)
    cut = details[0]["m"]
    assert cut[tool]["c"] == "x" * 500 and cut[tool]["cut"] == 9_500
    assert cut[1]["c"] == "y" * 1_000 and cut[1]["cut"] == 9_000  # other messages: twice
    assert str(big) in details[0]["w"]  # where the whole text is
    longer = sum(
        1
        for r in rows
        for m in r["messages"][1:]
        if len(m.get("content") or "") > (500 if m["role"] == "tool" else 1_000)
    )
    assert stats.cut_messages == longer >= 2
    assert read_jsonl(big / "episodes.jsonl")[0]["messages"][tool]["content"] == "x" * 10_000


def test_beyond_max_episodes_an_even_sample_is_shown_and_said(evals, tmp_path):
    stats = view(list(evals), tmp_path / "view.html", max_episodes=5)
    index, details = page_data(stats.path)
    assert stats.total == 18 and stats.episodes == len(details) == 5
    assert index["meta"] == {**index["meta"], "total": 18, "shown": 5}
    assert {r["s"] for r in index["episodes"]} == {0, 1}  # both runs, not the first 5 lines


def test_an_eval_folder_from_before_tasks_jsonl_finds_its_seed_tasks(evals, tmp_path):
    oracle, _ = evals
    old = tmp_path / "old"
    old.mkdir()
    for name in ("config.json", "summary.json", "episodes.jsonl", "results.jsonl"):
        (old / name).write_bytes((oracle / name).read_bytes())
    (source,) = load_sources([old])
    assert set(source.tasks) >= {r["task_id"] for r in source.episodes} and not source.notes
    json.dump({"env": "rods/Retail-v0", "pool": str(tmp_path / "gone.jsonl")},
              (old / "config.json").open("w"))  # fmt: skip
    (source,) = load_sources([old])
    assert any("gone.jsonl is not here" in n for n in source.notes)
    assert {t.skill for t in source.tasks.values()} != {"?"}  # from results.jsonl


def test_what_is_not_a_source_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="neither an evaluation folder"):
        load_sources([tmp_path])
    with pytest.raises(ConfigError, match="no such file or folder"):
        load_sources([tmp_path / "nope"])
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ConfigError, match="not a JSONL file of episodes"):
        load_sources([tmp_path / "x.txt"])


def test_rods_view_writes_next_to_one_folder_and_refuses_several_without_out(evals, tmp_path):
    oracle, random = evals
    proc = rods("view", str(oracle))
    assert proc.returncode == 0, proc.stderr
    assert (oracle / "view.html").exists() and "6 episodes" in proc.stdout
    (oracle / "view.html").unlink()
    proc = rods("view", str(oracle), str(random))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rods view: error: --out FILE.html is needed for several paths or a file"
    ]
    proc = rods("view", str(tmp_path / "missing"), "--out", str(tmp_path / "v.html"))
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr
