"""``rods view`` in headless Chromium, checked as a person would read the page."""

from __future__ import annotations

from collections import Counter

import pytest

from rods_agent.view import view
from rods_env.fileio import read_jsonl
from tests.agent import browser
from tests.requires import require

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def driver():
    require(
        browser.available(),
        "no chromium, chromedriver or selenium",
        "bash scripts/setup.sh chromium",
    )
    with browser.chromium() as d:
        yield d


def _select(driver, name: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, f"f-{name}")).select_by_value(value)


def _rows(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, "#list tbody tr")


def _count(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "count").text


def test_an_eval_page_shows_the_episodes_a_filter_narrows_them_and_a_turn_says_why_it_failed(
    evals,
    tmp_path,
    driver,
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    oracle, random = evals
    page = view([oracle, random], tmp_path / "view.html").path
    records = read_jsonl(random / "episodes.jsonl")
    browser.open_page(driver, page)
    assert _count(driver) == "18 episodes"
    assert len(_rows(driver)) == 18

    _select(driver, "source", "random")
    assert _count(driver) == "12 of 18 episodes" and len(_rows(driver)) == 12
    _select(driver, "source", "")

    def rules(r):
        return {f["rule"] for t in r["turn_results"] for f in t["failures"]}

    rule = Counter(rule for r in records for rule in rules(r)).most_common(1)[0][0]
    by_rule = [r for r in records if rule in rules(r)]  # the oracle's turns all pass
    _select(driver, "rule", rule)
    assert _count(driver) == f"{len(by_rule)} of 18 episodes"
    shown = [
        (r.find_elements(By.TAG_NAME, "td")[1].text, r.find_elements(By.TAG_NAME, "td")[2].text)
        for r in _rows(driver)
    ]
    assert shown == [(r["task_id"], f"trial {r['trial']}") for r in by_rule]

    _rows(driver)[0].click()
    article = WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "article.episode")
    )
    first = by_rule[0]
    failed = next(t for t in first["turn_results"] if not t["passed"])
    turn = article.find_elements(By.CSS_SELECTOR, "section.turn")[failed["turn"]]
    assert "failed" in turn.get_attribute("class")
    assert turn.find_element(By.CSS_SELECTOR, ".verdict").text.endswith("failed")
    rules = [li.text for li in turn.find_elements(By.CSS_SELECTOR, "li.rule")]
    assert rules == [f"{f['rule']} {f['text']}" for f in failed["failures"]]
    # the gold calls beside the agent's: which were made, which were not
    gold = turn.find_element(By.CSS_SELECTOR, ".gold").text
    assert "GOLD CALLS" in gold and (
        "✗ not called" in gold or "~ called with other arguments" in gold
    )

    # a passed turn of the oracle has no rule, and clearing the filters brings every row back
    driver.find_element(By.XPATH, "//button[text()='clear filters']").click()
    assert _count(driver) == "18 episodes"
    _rows(driver)[0].click()
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "article.episode[data-i='0']")
    )
    assert driver.find_elements(By.CSS_SELECTOR, "section.turn.passed")
    assert not driver.find_elements(By.CSS_SELECTOR, "section.turn li.rule")
    assert driver.get_log("browser") == []  # no script error


def test_a_training_run_shows_its_report_its_pool_story_and_its_transcripts(tmp_path, driver):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from rods_agent.training.config import load_config
    from rods_agent.training.loop import train
    from rods_agent.training.report import PANELS
    from tests.agent.test_train import SIMULATED, small

    run = tmp_path / "run"
    train(load_config(SIMULATED, small(run, "steps=8")))
    metrics = read_jsonl(run / "metrics.jsonl")
    made = sum(len(e["synthesized"]) for e in read_jsonl(run / "pool_events.jsonl"))
    page = view([run], tmp_path / "view.html").path
    browser.open_page(driver, page)
    assert _count(driver) == f"{8 * 4 * 3} episodes"  # 8 steps, 4 groups, 3 kept of each
    _select(driver, "pick", "best")
    assert _count(driver) == f"32 of {8 * 4 * 3} episodes"
    driver.find_element(By.ID, "f-step_min").send_keys("7")
    assert _count(driver) == f"4 of {8 * 4 * 3} episodes"
    _rows(driver)[0].click()
    article = WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "article.episode")
    )
    zones = {z for z, n in metrics[7]["zones"].items() if n}
    facts = article.find_element(By.CSS_SELECTOR, ".facts").text
    assert any(f"zone at this step {z}" in facts for z in zones)
    assert "group rewards" in facts

    driver.find_element(By.CSS_SELECTOR, "#tabs button[data-tab='runs']").click()
    runs = driver.find_element(By.ID, "runs-tab")
    plots = runs.find_elements(By.CSS_SELECTOR, ".plots img")
    assert len(plots) == len(PANELS)
    assert all(p.get_property("naturalWidth") > 0 for p in plots)  # the PNGs decode
    assert (
        "Training report (simulated learner" in runs.find_element(By.CSS_SELECTOR, ".report").text
    )
    story = runs.find_element(By.CSS_SELECTOR, ".pool")
    assert (
        len(
            story.find_elements(By.CSS_SELECTOR, ".scroll")[0].find_elements(
                By.CSS_SELECTOR, "tbody tr"
            )
        )
        == 8
    )
    assert f"synthesized tasks ({made})" in story.text and made > 0
    assert driver.get_log("browser") == []
