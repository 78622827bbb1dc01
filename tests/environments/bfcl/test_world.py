"""The BFCL API world (bfcl-api): its tools are BFCL's functions, run as BFCL runs them; its
state is what BFCL's checker compares; its worlds are our own."""

from __future__ import annotations

import pickle
import random

import pytest

from rods_env.database import tables_digest


@pytest.fixture(scope="module")
def world(bfcl):
    from environments.bfcl import world

    return world


@pytest.fixture(scope="module")
def domain(world):
    return world.DOMAIN


def test_every_function_is_a_tool_with_bfcls_own_schema(domain):
    from environments.bfcl.apis import functions

    table = functions()
    assert set(domain.toolkit.names()) == set(table) and len(table) == 128
    for name, spec in domain.toolkit.specs().items():
        assert spec.schema == table[name].schema, name


def test_the_gold_gives_bfcls_result_texts_and_states(domain):
    """Each seed's gold, run through BFCL's own execution layer on the same instances,
    gives the same result texts and the same public state as the domain's replay."""
    from environments.bfcl.apis import World, functions
    from environments.bfcl.world.state import TABLE, public_state
    from rods_env.gold import replay_gold

    allowed = frozenset(functions())
    for task in domain.seed_tasks()[::4]:
        base = domain.base(task.db_seed, task.db_size)[TABLE]
        bfcl = World({cls: record.instance() for cls, record in base.items()})
        gold = replay_gold(domain, task)
        for turn, tg in zip(task.turns, gold.turns, strict=True):
            texts = [bfcl.call(c.name, c.arguments, allowed).text for c in turn.calls]
            assert tuple(texts) == tg.results, task.id
        final = {key[1]: record.state for key, record in gold.final.items()}
        for cls, state in final.items():
            assert public_state(bfcl.instances[cls]) == state, (task.id, cls)


def _random_args(fn, rng):
    from environments.bfcl.agents import RandomAgent

    agent = RandomAgent(rng.randrange(10**6))
    params = fn.schema["function"]["parameters"]
    return {
        name: agent._value(prop)
        for name, prop in params["properties"].items()
        if name in params.get("required", ()) or rng.random() < 0.5
    }


def test_reads_change_nothing_and_private_only_functions_no_public_state(domain, world):
    """The classification behind ``writes``, checked on the real classes: a pure function
    leaves its instance byte for byte, a private-only one leaves its public state; over the
    seeds' gold calls (valid arguments) and random arguments for every such function."""
    from environments.bfcl.apis import functions
    from environments.bfcl.world.state import public_state
    from environments.bfcl.world.tools import PRIVATE_ONLY, PURE

    table = functions()
    assert domain.toolkit.write_names() == frozenset(table) - PURE - PRIVATE_ONLY
    rng = random.Random(3)
    checked: set[str] = set()

    def run(tools, name, args):
        live = tools.instance(table[name].owner)
        before, state = pickle.dumps(live), public_state(live)
        tools.call(name, args)
        live = tools.instance(table[name].owner)
        if name in PURE:
            assert pickle.dumps(live) == before, name
        if name in PURE | PRIVATE_ONLY:
            assert public_state(live) == state, name
            checked.add(name)

    for task in domain.seed_tasks()[::3]:
        tools = domain.toolkit(domain.database(task.db_seed, task.db_size))
        for call in task.gold_calls:
            run(tools, call.name, call.arguments)
        for name in sorted(PURE | PRIVATE_ONLY):
            run(tools, name, _random_args(table[name], rng))
    assert checked == PURE | PRIVATE_ONLY


def test_a_records_equality_is_bfcls_state_check(domain):
    """``cd`` moves only the private current directory: the record is new, yet equal (BFCL
    does not compare it); a new file is a difference."""
    from environments.bfcl.world.state import TABLE

    task = domain.seed_tasks()[0]
    db = domain.database(task.db_seed)
    tools = domain.toolkit(db)
    folder = next(iter(db.get(TABLE, "GorillaFileSystem").state["root"]["contents"]))
    before = db.get(TABLE, "GorillaFileSystem")
    assert tools.call("cd", {"folder": folder}).ok
    after = db.get(TABLE, "GorillaFileSystem")
    assert after is not before and after == before and db.changes() == {}
    assert tools.call("touch", {"file_name": "new_note.txt"}).ok
    assert db.get(TABLE, "GorillaFileSystem") != before
    assert list(db.changes()) == [(TABLE, "GorillaFileSystem")]


def test_bad_calls_are_error_observations_and_change_nothing(domain):
    from environments.bfcl.world.state import TABLE

    task = domain.seed_tasks()[0]
    db = domain.database(task.db_seed)
    tools = domain.toolkit(db)
    for name, args, needle in (
        ("ticket_get_login_status", {"x": 1}, "not an argument"),
        ("get_ticket", {"ticket_id": "3"}, "valid integer"),
        ("lockDoors", {"unlock": False, "door": ["trunk"]}, "door"),
        ("logarithm", {"value": 5.0, "base": 2.0, "precision": 10**7}, "precision must be"),
        ("mkdir", {"dir_name": "bad\ud800"}, "surrogate"),
    ):
        out = tools.call(name, args)
        assert needle in out.output, (name, out.output)
    assert db.changes() == {} and db.get(TABLE, "VehicleControlAPI") is not None


def test_a_method_that_raises_gives_bfcls_error_text(domain):
    task = domain.seed_tasks()[0]
    tools = domain.toolkit(domain.database(task.db_seed))
    out = tools.call(
        "compute_exchange_rate", {"base_currency": "XXX", "target_currency": "YYY", "value": 3.0}
    )
    assert (
        out.output == "Error during execution: No available exchange rate for the given currencies."
    )


def test_omitted_defaults_are_fresh_every_call(domain):
    """BFCL's post_tweet keeps its default mentions list, which mention() extends: each
    call here gets its own, as BFCL's source writes it, so one episode never leaks into the
    next, even after BFCL's own code changed the process's default (its checker does)."""
    from environments.bfcl.apis import api_class
    from environments.bfcl.world.state import TABLE
    from tests.environments.bfcl.official import restore_bfcl_module_state

    bfcl = api_class("TwitterAPI")()
    bfcl._load_scenario({"username": "u", "password": "p", "authenticated": True})
    polluted = bfcl.post_tweet("the process's default list")
    bfcl.mention(polluted["id"], ["@old"])
    assert bfcl.post_tweet("later")["mentions"] == ["@old"]  # BFCL's own leak
    try:
        _check_fresh_defaults(domain, TABLE)
    finally:
        restore_bfcl_module_state()


def _check_fresh_defaults(domain, TABLE):
    for seed in (1, 2):
        db = domain.database(seed)
        tools = domain.toolkit(db)
        tw = db.get(TABLE, "TwitterAPI").instance()
        assert tools.call(
            "authenticate_twitter", {"username": tw.username, "password": tw.password}
        ).ok
        tweet = tools.call("post_tweet", {"content": "hello"}).value
        assert tweet["mentions"] == [], tweet
        assert tools.call("mention", {"tweet_id": tweet["id"], "mentioned_usernames": ["zed"]}).ok


def test_worlds_are_deterministic_and_long_worlds_keep_every_default_entity(world):
    from environments.bfcl.world.generator import generate, world_configs

    assert tables_digest(generate(5, "default")) == tables_digest(generate(5, "default"))
    assert tables_digest(generate(5, "default")) != tables_digest(generate(6, "default"))
    short = generate(5, "default")["apis"]
    long = generate(5, "long-8k")["apis"]
    configs, _ = world_configs(5)

    def files(d, path=""):
        for name, item in d["contents"].items():
            if "content" in item:
                yield f"{path}/{name}", item["content"]
            else:
                yield from files(item, f"{path}/{name}")

    base_files = dict(files(short["GorillaFileSystem"].state["root"]))
    long_files = dict(files(long["GorillaFileSystem"].state["root"]))
    assert base_files.items() <= long_files.items() and len(long_files) > 4 * len(base_files)
    for cls, key in (("TicketAPI", "ticket_queue"), ("MessageAPI", "inbox")):
        assert all(x in long[cls].state[key] for x in short[cls].state[key]), cls
    assert short["TwitterAPI"].state["tweets"].items() <= long["TwitterAPI"].state["tweets"].items()
    for cls in ("TicketAPI", "TwitterAPI", "TradingBot"):  # counters: new ids stay the same
        counter = {
            "TicketAPI": "ticket_counter",
            "TwitterAPI": "tweet_counter",
            "TradingBot": "order_counter",
        }[cls]
        assert short[cls].state[counter] == long[cls].state[counter]
    assert configs["MessageAPI"]["user_count"] == long["MessageAPI"].state["user_count"]


def test_tasks_offer_their_classes_and_one_they_do_not_need(domain):
    from environments.bfcl.apis import functions
    from environments.bfcl.world.skills import DECOYS, RECIPE_BY_NAME, decoy

    table = functions()
    for task in domain.seed_tasks():
        classes = {table[n].owner for n in domain.tools_for(task)}
        needed = set(RECIPE_BY_NAME[task.skill].classes)
        assert needed <= classes and {table[c.name].owner for c in task.gold_calls} <= needed
        extra = classes - needed
        assert len(extra) == 1 and extra <= set(DECOYS) and extra == {decoy(task, sorted(needed))}


def test_a_held_toolkit_writes_the_same_records_once_per_sync(domain):
    """hold(): a class's record is written once at sync, not after every call; the records
    equal those written call by call (their instances too: a file's private timestamp
    aside), and an unchanged attribute's value is shared with the record before (states
    never change)."""
    from environments.bfcl.world.state import TABLE, public_state

    task = next(t for t in domain.seed_tasks() if t.skill == "files" and t.variant == "base")
    eager_db, held_db = domain.database(task.db_seed), domain.database(task.db_seed)
    eager, held = domain.toolkit(eager_db), domain.toolkit(held_db)
    held.hold()
    writes = []
    for call in task.turns[0].calls:
        before = held_db.checkpoint()
        assert (
            eager.call(call.name, call.arguments).output
            == held.call(call.name, call.arguments).output
        )
        writes.append(held_db.checkpoint() == before)
    assert all(writes)  # nothing written before sync
    held.sync()
    new, old = held_db.get(TABLE, "GorillaFileSystem"), eager_db.get(TABLE, "GorillaFileSystem")
    assert new == old and held_db == eager_db
    assert public_state(new.instance()) == public_state(old.instance()) == new.state
    assert new.instance()._current_dir.name == old.instance()._current_dir.name
    base = domain.base(task.db_seed)[TABLE]["GorillaFileSystem"]
    assert new.state["long_context"] is base.state["long_context"]
    held.sync()  # nothing left to write
    assert held_db.get(TABLE, "GorillaFileSystem") is new


def test_a_record_is_the_state_it_was_taken_at_though_pickled_later(domain):
    """A record keeps the instance it was taken from and pickles it when first made live
    again (most never are): a later write through the toolkit seals it first, so each
    record's instance is its own state then, with the private current directory of then;
    reads leave a record unpickled."""
    from environments.bfcl.world.state import TABLE, public_state

    task = next(t for t in domain.seed_tasks() if t.skill == "files" and t.variant == "base")
    db = domain.database(task.db_seed)
    tools = domain.toolkit(db)
    root = db.get(TABLE, "GorillaFileSystem").state["root"]
    folder = next(k for k, v in root["contents"].items() if "contents" in v)
    assert tools.call("cd", {"folder": folder}).ok
    moved = db.get(TABLE, "GorillaFileSystem")
    assert tools.call("ls", {}).ok  # a read: the record stays unpickled
    assert moved._blob is None
    assert tools.call("touch", {"file_name": "first.txt"}).ok
    first = db.get(TABLE, "GorillaFileSystem")
    assert moved._blob is not None  # sealed before the write
    assert tools.call("cd", {"folder": ".."}).ok
    assert tools.call("touch", {"file_name": "second.txt"}).ok
    second = db.get(TABLE, "GorillaFileSystem")
    assert moved != first != second
    for record, directory in ((moved, folder), (first, folder), (second, None)):
        live = record.instance()
        assert public_state(live) == record.state
        if directory is not None:
            assert live._current_dir.name == directory
    assert "first.txt" in str(first.state) and "second.txt" not in str(first.state)
    assert pickle.loads(pickle.dumps(second)).instance()._current_dir.name != folder


def test_a_record_lends_changed_listings_until_sealed(world):
    """A record taken with ``lent`` shares the dicts and lists that changed with the live
    instance (never copied when nothing changes them again); sealing copies them, so a
    later change of the instance leaves the record's state and instance as they were."""
    from types import SimpleNamespace

    from environments.bfcl.world.state import state_record

    live = SimpleNamespace(items=[1], table={"a": 1}, count=1)
    first = state_record("X", live)
    live.items.append(2)
    second = state_record("X", live, first, lent=True)
    assert second.state["items"] is live.items and second._lent == ("items",)
    assert second.state["table"] is first.state["table"]  # unchanged: shared with before
    second.seal()
    assert second.state["items"] == [1, 2] and second.state["items"] is not live.items
    live.items.append(3)
    live.table["b"] = 2
    assert second.state == {"items": [1, 2], "table": {"a": 1}, "count": 1}
    assert vars(second.instance()) == second.state
    assert first.state["items"] == [1]


def test_records_written_turn_by_turn_keep_their_state(domain):
    """The records a held toolkit writes at each turn's end (their changed listings lent
    to the live instance until the next write seals them) keep the state they were taken
    at through every later turn, and each one's instance is that state."""
    import copy

    from environments.bfcl.world.state import TABLE, public_state

    tasks = [t for t in domain.seed_tasks() if len(t.turns) >= 3][:12]
    assert tasks
    for task in tasks:
        db = domain.database(task.db_seed, task.db_size)
        tools = domain.toolkit(db)
        tools.hold()
        taken = []
        for turn in task.turns:
            for call in turn.calls:
                assert tools.call(call.name, call.arguments).ok
            tools.sync()
            for api in db.keys(TABLE):
                record = db.get(TABLE, api)
                taken.append((record, copy.deepcopy(record.state)))
        for record, state in taken:
            assert record.state == state, task.id
            assert public_state(record.instance()) == state, task.id


def test_arguments_and_results_are_copies_whatever_they_hold(domain):
    from environments.bfcl.world.tools import _copied

    nested = {"a": [1, {"b": {2, 3}}], "c": (4, "x")}
    copy = _copied(nested)
    assert copy == nested and copy is not nested and copy["a"][1] is not nested["a"][1]
    shared = [1]
    pair = _copied([shared, shared])
    assert pair[0] is pair[1] and pair[0] is not shared  # shared parts stay shared, as deepcopy
    assert _copied("text") == "text" and _copied(None) is None
