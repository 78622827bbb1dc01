"""rods' τ²-bench environments agree with τ²-bench's own pipeline on edited gold trajectories.

:mod:`tests.environments.tau2.perturb` plays each script in ``rods/Tau2-*-v0`` and in
τ²-bench's ``run_task`` (its orchestrator, agents, user simulator and evaluator; only the
model is the script): the reward, the end and every message must be the same. Here a sample
of generated scripts runs, and the cases the harness was built for are pinned one by one;
``benchmarks/test_tau2_fidelity.py`` runs the whole set.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from tests.environments.tau2.perturb import (
    USER_DONE,
    Outcome,
    Script,
    compare,
    gold_script,
    play,
    scripts,
)

SAMPLE = {
    ("tau2-airline", False): 3,
    ("tau2-retail", False): 5,
    ("tau2-telecom", False): 25,
    ("tau2-telecom", True): 15,
}
"""Generated scripts per mode in the test suite (τ²-bench needs about 2 s for one of
airline's, 0.2 s for one of telecom's)."""

TELECOM_TASK = "[mobile_data_issue]airplane_mode_on|data_mode_off[PERSONA:None]"
"""The user toggles airplane mode off, then mobile data on (ENV_ASSERTION)."""
RETAIL_TASK = "2"
"""A return whose ``communicate_info`` is ``10`` (DB and COMMUNICATE)."""


def _agree(script: Script) -> tuple[Outcome, Outcome]:
    ours, theirs = play(script)
    problem = compare(ours, theirs)
    assert problem is None, (script.task_id, script.edits, problem)
    return ours, theirs


@pytest.mark.slow
def test_rods_agrees_with_tau2s_pipeline_on_generated_edits_of_gold():
    seen: Counter[object] = Counter()
    for mode, n in SAMPLE.items():

        @settings(
            max_examples=n,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(scripts(*mode))
        def check(script: Script) -> None:
            ours, _ = _agree(script)
            seen[ours.reward] += 1
            seen.update(script.edits)

        check()
    # the comparison can fail: both verdicts occur, and most kinds of edit were made
    assert seen[0.0] >= 5 and seen[1.0] >= 5, seen
    assert sum(1 for k in seen if isinstance(k, str)) >= 12, seen


def _with(script: Script, **changes: object) -> Script:
    return dataclasses.replace(script, **changes)


def _first(domain: str, solo: bool = False) -> Script:
    from tests.environments.tau2.perturb import material

    tid = next(t for t in sorted(material(domain).tasks) if gold_script(domain, t, solo).agent)
    return gold_script(domain, tid, solo)


@pytest.mark.parametrize(
    "final",
    [
        '{"name": "Summary", "arguments": {"message": "%s"}}',  # JSON with a "name"
        '{"summary": "%s"}',
        '```json\n{"name": "Summary", "arguments": {"m": "%s"}}\n```',
        "{sigh} %s",
    ],
)
def test_the_agents_json_looking_text_reaches_the_user_as_text(final):
    script = gold_script("tau2-retail", "0")
    said = script.agent[-1].removeprefix("Everything is taken care of.").strip()
    ours, theirs = _agree(_with(script, agent=(*script.agent[:-1], final % said)))
    assert ours.reward == theirs.reward == 1.0  # it was said: τ²-bench passes, so does rods
    assert ours.trajectory[-2][:2] == ("assistant", (final % said).strip())


@pytest.mark.parametrize(
    "reply",
    [
        "{sigh} Yes... go ahead.",
        '{"answer": "yes"}',
        '{"name": "cancel_pending_order", "arguments": {}}',
        '<tool_call>{"name": "cancel_pending_order", "arguments": {}}</tool_call>',
    ],
)
def test_the_users_json_looking_reply_is_text_to_the_agent(reply):
    script = gold_script("tau2-retail", "0")
    ours, theirs = _agree(_with(script, user=(reply, *script.user[1:])))
    assert ours.reward == theirs.reward == 1.0 and ours.termination == "user_stop"
    assert ours.trajectory[1] == ("user", reply, ())  # airline's and retail's users have no tools


def test_telecoms_user_calls_with_blocks_only_and_as_long_as_tau2_allows():
    script = gold_script("tau2-telecom", TELECOM_TASK)
    bare = '{"name": "toggle_airplane_mode", "arguments": {}}'
    ours, _ = _agree(_with(script, user=(bare, *script.user[1:])))  # JSON text: not a call
    assert ours.trajectory[1] == ("user", bare, ())
    run = '<tool_call>{"name": "check_status_bar", "arguments": {}}</tool_call>'
    for n, reward, end in ((21, 1.0, "user_stop"), (40, 1.0, "user_stop"), (120, 0.0, "max_steps")):
        user = (*script.user[:2], *[run] * n, *script.user[2:])  # a run after the first call
        ours, _theirs = _agree(_with(script, user=user))
        assert (ours.reward, ours.termination) == (reward, end), n
        assert sum(1 for m in ours.trajectory if m[0] == "tool") >= min(n, 90)


def test_a_user_who_gives_nothing_is_asked_again_then_ends_the_episode_as_tau2_does():
    script = gold_script("tau2-retail", "0")
    again = _with(script, user=("", "  ", *script.user))  # two empty replies: asked again
    ours, _ = _agree(again)
    assert ours.reward == 1.0
    ours, theirs = _agree(_with(script, user=("",) * 4 + script.user))
    assert (ours.termination, theirs.termination) == ("user_error", "crash: ValueError")
    assert ours.reward == theirs.reward == 0.0


def test_the_answer_only_in_the_reasoning_is_not_said_and_text_after_calls_is_dropped():
    script = gold_script("tau2-retail", RETAIL_TASK)
    final = script.agent[-1]
    thought = f"<think>{final}</think>I have handled your request."
    ours, _ = _agree(_with(script, agent=(*script.agent[:-1], thought)))
    assert ours.reward == 0.0  # as a served model with a reasoning parser: not said
    calls = [a for a in script.agent if isinstance(a, str) and a.startswith("<tool_call>")]
    after = calls[-1] + " " + final  # said after the last call: a server drops it
    i = script.agent.index(calls[-1])
    agent = (*script.agent[:i], after, *script.agent[i + 1 : -1], "All done.")
    ours, _ = _agree(_with(script, agent=agent))
    assert ours.reward == 0.0
    before = final + " " + calls[-1]  # said before it: said
    ours, _ = _agree(
        _with(script, agent=(*script.agent[:i], before, *script.agent[i + 1 : -1], "Done."))
    )
    assert ours.reward == 1.0


def test_message_dicts_and_text_are_the_same_action():
    script = _first("tau2-telecom", solo=True)
    as_dicts = []
    for n, action in enumerate(script.agent):
        body = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
        as_dicts.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {
                            "name": body["name"],
                            "arguments": json.dumps(body["arguments"]),
                        },
                    }
                ],
            }
        )
    text, _ = _agree(script)
    dicts, _ = _agree(_with(script, agent=tuple(as_dicts)))
    assert text == dicts and text.reward == 1.0


def test_the_fillers_end_every_conversation():
    script = _with(gold_script("tau2-retail", "0"), agent=(), user=())
    ours, theirs = _agree(script)
    assert ours.trajectory[-1] == ("user", USER_DONE, ()) and ours.reward == theirs.reward
