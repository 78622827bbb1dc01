"""Verdict for verdict against BFCL's own checker on perturbed trajectories (a sample; the
whole set runs in benchmarks/test_bfcl_fidelity.py), and the quirks each verdict keeps or
corrects."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from environments.bfcl.agents import gold_plan
from environments.bfcl.env import BFCLEnv
from environments.bfcl.tasks import get_task
from tests.environments.bfcl.fidelity import Call, Case, Tally, cases, compare
from tests.environments.bfcl.official import checker_verdict, strict_turns

pytestmark = pytest.mark.usefixtures("bfcl")


def test_perturbed_trajectories_get_bfcls_verdicts_task_by_task_and_turn_by_turn(tasks):
    env = BFCLEnv()
    tally = Tally()

    @settings(
        max_examples=250,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases(tasks))
    def check(case):
        before = len(tally.disagreements)
        compare(env, case, tally)
        assert len(tally.disagreements) == before, tally.disagreements[-1]

    check()
    assert tally.trajectories == 250
    # agreement on both verdicts, not on "fail" alone, and on the strict ones too
    assert 0.1 < tally.bfcl_passed / tally.trajectories < 0.9, tally
    assert tally.turn_verdicts > 2 * tally.trajectories
    assert tally.strict_turn_verdicts > tally.turn_verdicts / 2
    assert len(tally.by_edit) >= 15, tally.by_edit


def _case(task_id: str, edit) -> Case:
    task = get_task(task_id)
    turns = [[list(step) for step in steps] for steps in gold_plan(task)]
    flat = [[Call(c.name, dict(c.arguments)) for step in steps for c in step] for steps in turns]
    edit(flat)
    return Case(task, [[calls] if calls else [] for calls in flat], "text", ["targeted"])


def _mention_before_retweet(turns):
    turns[5].insert(0, Call("mention", {"tweet_id": 0, "mentioned_usernames": ["@eve"]}))


def _insurance_on_a_distractor_card(turns):
    turns[-1].append(
        Call(
            "purchase_insurance",
            {
                "access_token": "abc123xyz",
                "insurance_type": "comprehensive",
                "booking_id": "booking_901",  # long-context bookings and cards
                "insurance_cost": 100.0,
                "card_id": "1000000790000000",
            },
        )
    )


@pytest.mark.parametrize(
    ("task_id", "edit", "quirk"),
    [
        ("multi_turn_base_170", _mention_before_retweet, "shared_defaults"),
        ("multi_turn_long_context_151", _insurance_on_a_distractor_card, "shared_data"),
    ],
)
def test_the_quirks_pass_wrong_trajectories_officially_and_fail_them_strictly(task_id, edit, quirk):
    """The issue's two cases: BFCL's checker passes them, and so does the default
    environment; the strict verdicts fail them, as BFCL's executor does without sharing,
    and the difference is put down to the quirk."""
    case = _case(task_id, edit)
    from tests.environments.bfcl.fidelity import bfcl_decoded, play

    decoded = bfcl_decoded(case)
    assert checker_verdict(case.task, decoded)["valid"] is True
    assert False in strict_turns(case.task, decoded)
    for verdicts in ("official", "strict"):
        info = play(BFCLEnv(verdicts=verdicts), case)
        assert info["success"] is (verdicts == "official")
        assert info["verdicts"]["official"]["success"] is True
        assert info["verdicts"]["strict"]["success"] is False
        differences = info["verdicts"]["differences"]
        assert differences and all(d["quirks"] == [quirk] for d in differences), differences
        assert all(d["official"] and not d["strict"] for d in differences)
        assert info["progress"] == info["verdicts"][verdicts]["progress"]


def test_argument_text_is_rewritten_for_the_official_verdicts_only():
    """The third quirk: BFCL's executor rewrites argument text ('word (' loses its space, a
    method name before '(' gets the instance's name), so what the model's call stores
    differs from what it sent; the strict judge stores what was sent. (No gold of BFCL's
    800 tasks holds such text: were one to, its own gold would fail BFCL's checker, the
    gold's instance names being other than the model's.)"""
    from environments.bfcl.apis import GoldCache, functions_of
    from environments.bfcl.reading import CHECKER_MODEL, reader
    from environments.bfcl.verdicts import OFFICIAL, STRICT, Judge

    task = get_task("multi_turn_base_0")
    allowed = frozenset(functions_of(task.classes))
    reading = reader(task.id, task.classes).read("post_tweet", {"content": "see (below) and ls()"})
    stored = {}
    for name, quirks in (("official", OFFICIAL), ("strict", STRICT)):
        judge = Judge(task, quirks, GoldCache())
        judge.run(
            reader(task.id, task.classes).read(
                "authenticate_twitter", {"username": "analyst_pro", "password": "Kj8#mP9$vL2"}
            ),
            allowed,
        )
        judge.run(reading, allowed)
        tweets = judge.world.instances["TwitterAPI"].tweets
        stored[name] = tweets[max(tweets)]["content"]
    instance = f"{CHECKER_MODEL}_eval_{task.id}_GorillaFileSystem_instance"
    assert stored == {
        "official": f"see(below) and {instance}.ls()",
        "strict": "see (below) and ls()",
    }
