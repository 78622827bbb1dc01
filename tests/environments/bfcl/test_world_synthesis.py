"""Synthesis in the BFCL API world (issue 28): expansion without a ceiling over the classes'
actions (join, append, chain), fresh worlds that keep their parent world's layout, the
drafts' own gold runs, and the exploit panel's proofs, each checked against what it
replaces (a replay, a real episode)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rods_env import TalkOnlyAgent, ToolEnv, run_episode
from rods_env.exploits import (
    panel_steps,
    read_only_may_pass,
    run_panel,
    shifted,
    shifted_may_pass,
)
from rods_env.gold import replay_gold
from rods_env.oracle import oracle_agent
from rods_env.synthesis import synthesize
from rods_env.synthesis.critique import check_signature
from rods_env.synthesis.execute import FRESH_WORLDS
from rods_env.task import Task

STYLES = ("missing_parameter", "missing_function", "long_context")


@pytest.fixture(scope="module")
def domain(bfcl):
    from environments.bfcl.world import DOMAIN

    return DOMAIN


@pytest.fixture(scope="module")
def seeds(domain):
    return domain.seed_tasks("train")[::6]  # 37 seeds, every class combination and style


@pytest.fixture(scope="module")
def generations(domain, seeds):
    """Four generations of expand, each fed its own output (per seed 1)."""
    out, parents = [], seeds
    for _ in range(4):
        parents = [
            o.task
            for o in synthesize(parents, per_seed=1, mode="expand", domains=domain)
            if o.accepted
        ]
        out.append(parents)
    return out


def play(domain, task: Task, agent=None) -> dict:
    steps = panel_steps(task) + 10
    env = ToolEnv(domain, tasks=[task], split=None, max_steps=steps)
    return run_episode(env, agent or oracle_agent(domain, task), task=task)


def test_generations_keep_their_size_and_climb_every_knob(generations, seeds):
    counts = [len(g) for g in generations]
    assert counts[0] >= 0.8 * len(seeds) and min(counts) >= 0.8 * counts[0], counts
    mean = [
        {k: sum(t.signature.knobs[k] for t in g) / len(g) for k in ("depth", "turns", "skills")}
        for g in generations
    ]
    for knob in ("depth", "turns", "skills"):
        assert mean[-1][knob] > mean[0][knob], (knob, mean)
    steps = Counter(t.provenance.step for g in generations for t in g)
    assert {"join", "append", "chain"} <= steps.keys(), steps


def test_a_composed_task_is_its_parent_and_one_more_request(domain, generations):
    """The parent's turns stay word for word; the new request's step is recorded in the
    signature (requests per turn, the skill of each request) and checked again."""
    parents = {t.id: t for g in generations for t in g}
    checked = Counter()
    for task in (t for g in generations[1:] for t in g):
        parent = parents.get(task.provenance.parent_id)
        step = task.provenance.step
        if parent is None or step not in ("join", "append", "chain"):
            continue
        kept = parent.turns[:-1] if step == "join" else parent.turns
        assert task.turns[: len(kept)] == kept
        sig = task.signature
        assert sig is not None and sig.requests is not None and sig.skills is not None
        assert sum(sig.requests) == len(task.requests()) == len(sig.skills)
        check_signature(parent.signature, sig, "expand", step)
        if step == "chain":  # an edge from the parent's calls into the new request's
            n = len(parent.gold_calls)
            assert any(i < n <= j for i, j in sig.edges)
        checked[step] += 1
    assert min(checked.values()) >= 1 and len(checked) == 3, checked


def test_composed_tasks_mix_classes_and_every_one_is_solved_and_not_given_away(domain, generations):
    from environments.bfcl.apis import functions

    owners = functions()
    sample = generations[-1][::4]
    mixed = 0
    for task in sample:
        classes = {owners[c.name].owner for c in task.gold_calls}
        mixed += len(classes) >= 3
        out = play(domain, task)
        assert out["success"], (task.id, [r for r in out["turn_results"] if not r["passed"]])
        talk = play(domain, task, TalkOnlyAgent())
        assert talk["progress"] == 0.0, task.id
    assert mixed >= len(sample) // 2


def test_a_request_added_to_a_conversation_starts_where_it_left_off(domain):
    """A request drafted on a conversation's state goes from the folder the conversation
    left the file system in, does not log in again where the conversation did, and finds
    the flight the conversation booked."""
    from environments.bfcl.world.skills import Session
    from environments.bfcl.world.skills.files import fs_copy
    from environments.bfcl.world.skills.travel import tv_insure
    from environments.bfcl.world.skills.twitter import tw_post
    from environments.bfcl.world.state import TABLE

    seed = next(
        s
        for s in range(FRESH_WORLDS, FRESH_WORLDS + 50)
        if not domain.base(s)[TABLE]["TwitterAPI"].state["authenticated"]
    )
    world = domain.database(seed, "default")
    first = Session(world, random.Random(0), {"l1": 1})
    first.end_turn(fs_copy(first, 1))  # leaves the file system in a folder
    first.end_turn(tw_post(first, 1))  # logs in to Twitter
    assert first.folder is not None
    state = first.db
    later = Session(state, random.Random(1), {})
    assert later.folder == first.folder
    assert later.logged_earlier("TwitterAPI") and not later.logged_earlier("TicketAPI")
    later.end_turn(tw_post(later, 1))
    assert [c.name for c in later.turns[0].calls] == ["post_tweet"]
    assert later.earlier_booking() is None
    with pytest.raises(Exception, match="no booking"):
        tv_insure(later, 1)
    assert state.get(TABLE, "TravelAPI") is domain.base(seed)[TABLE]["TravelAPI"]


def test_a_drafts_own_gold_run_is_the_gold_replay(domain):
    """A skill's draft hands over the gold run of its calls; it equals a replay of the
    task on a fresh state (effects, states, results, outputs)."""
    from rods_env.synthesis.execute import execute
    from rods_env.synthesis.plan import plan

    compared = 0
    for parent in domain.seed_tasks("train")[:60:3]:
        for attempt in range(3):
            try:
                cand = execute(
                    domain, plan(domain, parent, "resample"), random.Random(f"g{attempt}")
                )
            except Exception:
                continue
            fresh = replay_gold(domain, cand.task)
            assert cand.gold.turns == fresh.turns and cand.gold.final == fresh.final
            assert cand.gold.call_outputs == fresh.call_outputs
            compared += 1
            break
    assert compared >= 15


# -- layout worlds ---------------------------------------------------------------------------
def test_a_fresh_world_keeps_its_parents_layout_and_draws_everything_else_anew(domain):
    from environments.bfcl.world.generator import LAYOUT_WORLDS
    from environments.bfcl.world.layout import Layout, fresh_world, layout_of_seed
    from environments.bfcl.world.state import PEOPLE

    layouts = set()
    for parent in domain.seed_tasks()[:40]:
        seed = fresh_world(parent, random.Random(parent.id))
        assert seed >= LAYOUT_WORLDS >= FRESH_WORLDS
        want = Layout.of(domain.base(parent.db_seed, "default"))
        world = domain.base(seed, "default")
        assert Layout.of(world) == want == layout_of_seed(seed)
        layouts.add(want)
        # the same variant of a layout world keeps it again
        assert (
            layout_of_seed(
                fresh_world(parent.model_copy(update={"db_seed": seed}), random.Random(1))
            )
            == want
        )
        person = world[PEOPLE]["owner"]
        assert person != domain.base(parent.db_seed, "default")[PEOPLE]["owner"]
    assert len(layouts) >= 10
    assert all(Layout.decode(layout.code()) == layout for layout in layouts)
    with pytest.raises(ValueError):
        Layout.decode(3 << 5)


def test_a_layout_world_holds_what_every_skill_picks(domain):
    from environments.bfcl.world.generator import LAYOUT_WORLDS
    from environments.bfcl.world.layout import SPAN
    from environments.bfcl.world.state import PEOPLE, TABLE

    for draw in range(20):
        world = domain.base(LAYOUT_WORLDS + (draw % 128) * SPAN + draw, "default")
        apis, person = world[TABLE], world[PEOPLE]["owner"]
        root = apis["GorillaFileSystem"].state["root"]["contents"]
        sizes = set()  # n: a folder holds exactly n files of one kind, and other files
        for folder in root.values():
            files = [n for n, f in folder.get("contents", {}).items() if "content" in f]
            kinds = Counter(n.rpartition(".")[2] for n in files)
            sizes |= {n for n in kinds.values() if n < len(files)}
        assert {1, 2, 3} <= sizes
        tickets = apis["TicketAPI"].state["ticket_queue"]
        assert any(
            t["created_by"] == person.ticket_user and t["status"] != "Closed" for t in tickets
        )
        orders = apis["TradingBot"].state["orders"].values()
        assert any(o["status"] in ("Open", "Pending") for o in orders)
        cards = apis["TravelAPI"].state["credit_card_list"].values()
        assert any(c["balance"] >= 6000 for c in cards)
        doors = set(apis["VehicleControlAPI"].state["doorStatus"].values())
        assert doors == {"locked", "unlocked"}


def test_a_layout_world_builds_only_the_classes_a_task_reads(domain, monkeypatch):
    from environments.bfcl.world import layout
    from environments.bfcl.world.generator import LAYOUT_WORLDS, ORDER
    from environments.bfcl.world.state import TABLE

    built = []
    record = layout.state_record
    monkeypatch.setattr(
        layout, "state_record", lambda api, i, **kw: built.append(api) or record(api, i, **kw)
    )
    table = layout.layout_world(LAYOUT_WORLDS + 12345, "default")[TABLE]
    assert built == [] and list(table) == list(ORDER)
    twitter = table["TwitterAPI"]
    assert table["TwitterAPI"] is twitter and built == ["TwitterAPI"]
    again = layout.layout_world(LAYOUT_WORLDS + 12345, "default")[TABLE]["TwitterAPI"]
    assert again == twitter and again.blob == twitter.blob  # deterministic


def test_resample_accepts_most_base_candidates_on_layout_worlds(domain):
    """Issue 28: on a world drawn at random, 16-24% of base candidates were accepted
    (mostly "skill unavailable": a turn that does not log in found its user logged out).
    On layout worlds the skill finds what it needs."""
    seeds = [t for t in domain.seed_tasks("train") if t.variant == "base"][:40]
    out = list(synthesize(seeds, per_seed=1, mode="resample", attempts=1, domains=domain))
    reasons = Counter(o.reason for o in out if not o.accepted)
    accepted = sum(o.accepted for o in out)
    assert accepted >= 0.6 * len(out), reasons
    assert reasons["skill_unavailable"] <= 0.1 * len(out), reasons
    assert all(o.task.db_seed >= FRESH_WORLDS for o in out if o.accepted)


# -- the exploit panel's proofs ----------------------------------------------------------------
def test_the_panels_proofs_never_rule_out_a_pass_a_real_episode_finds(domain, generations, seeds):
    """read_only, late and early are played only when their proofs say they could pass:
    on seeds, synthesized tasks of every step and style, and tasks made exploitable, every
    turn such an agent passes in a real episode is one its proof allows."""
    made = [
        o.task
        for o in synthesize(seeds[:10], per_seed=1, augment=STYLES, domains=domain)
        if o.accepted
    ]
    tasks = [*seeds, *made, *(g[i] for g in generations for i in range(0, len(g), 7))]
    # exploitable on purpose: a task whose last turn repeats the one before (late passes
    # it), and one whose first turn asks for nothing and repeats nothing (early may pass)
    writer = next(t for t in seeds if t.variant == "base" and len(t.turns) >= 2)
    repeat = writer.model_copy(
        update={"turns": (*writer.turns, writer.turns[-1].model_copy(update={"calls": ()}))}
    )
    tasks.append(repeat)
    skipped = passed = 0
    for task in tasks:
        gold = replay_gold(domain, task)
        infos = run_panel(domain, task, gold, ("read_only", "late", "early"), panel_steps(task))
        for agent, allowed in (
            ("read_only", read_only_may_pass(domain, task, gold)),
            ("late", shifted_may_pass(domain, task, gold, 1)),
            ("early", shifted_may_pass(domain, task, gold, -1)),
        ):
            info = infos[agent]
            won = info["success"] or any(r["passed"] for r in info["turn_results"])
            assert allowed or not won, (task.id, agent, info["turn_results"])
            skipped += not allowed
            passed += won
    assert skipped > 2 * len(tasks)  # the proofs save most of these episodes
    assert passed >= 1  # the exploitable task is exploited, and allowed


def test_the_late_agents_run_is_the_golds_one_turn_late(domain, seeds):
    """The proof reads the late agent's states and results from the gold; a replay of its
    shifted calls gives the same."""
    for task in seeds[:12]:
        late = shifted(task, 1)
        gold, moved = replay_gold(domain, task), replay_gold(domain, late)
        for t in range(1, len(task.turns)):
            assert moved.turns[t].state == gold.turns[t - 1].state
            assert moved.turns[t].results == gold.turns[t - 1].results
