"""Full garbage collections deferred while synthesis works (rods_env.gcpause)."""

from __future__ import annotations

import gc
import threading

import pytest

from rods_env.gcpause import NEVER, no_full_collections, paused


@pytest.fixture
def collections():
    """The generations collected while the test runs (from the collector's callbacks)."""
    seen: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    was = gc.isenabled()
    gc.enable()
    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)
    if not was:
        gc.disable()


def _work(n: int) -> list:
    """Cycles left to the collector, and as many lists that stay alive (promoted to the
    oldest generation: what makes a full collection due)."""
    kept = []
    for _ in range(n):
        a: list = []
        a.append(a)
        kept.append([])
    return kept


def test_young_collections_go_on_and_full_ones_wait(collections):
    before = gc.get_threshold()
    gc.collect()
    collections.clear()
    with no_full_collections():
        assert gc.get_threshold() == (before[0], before[1], NEVER)
        kept = _work(400_000)
        assert len(collections) > 10 and 2 not in collections  # young ones ran, no full one
    assert gc.get_threshold() == before
    del kept
    collections.clear()
    # the same work makes a full collection due without the pause
    assert _work(400_000) and 2 in collections


def test_nested_and_concurrent_pauses_restore_the_threshold_once_the_last_leaves():
    before = gc.get_threshold()
    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with no_full_collections():
            entered.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    with no_full_collections():
        with no_full_collections():
            assert gc.get_threshold()[2] == NEVER
        thread.start()
        assert entered.wait(10)
    assert gc.get_threshold()[2] == NEVER  # the other thread is still inside
    leave.set()
    thread.join(10)
    assert gc.get_threshold() == before


def test_a_change_to_the_young_thresholds_made_during_a_pause_stays():
    before = gc.get_threshold()
    try:
        with no_full_collections():
            gc.set_threshold(before[0] + 1, before[1], NEVER)
        assert gc.get_threshold() == (before[0] + 1, before[1], before[2])
    finally:
        gc.set_threshold(*before)


def test_paused_makes_each_item_in_a_pause_and_leaves_the_consumer_out():
    before = gc.get_threshold()
    closed = []

    def items():
        try:
            for i in range(3):
                yield i, gc.get_threshold()[2]
        finally:
            closed.append(True)

    seen = []
    for i, third in paused(items()):
        seen.append(third)
        assert gc.get_threshold() == before, i  # the consumer runs without the pause
    assert seen == [NEVER] * 3 and closed == [True]
    early = paused(items())
    next(early)
    early.close()  # a consumer that stops early closes the items
    assert len(closed) == 2 and gc.get_threshold() == before

    def failing():
        yield 1
        raise ValueError("bad")

    with pytest.raises(ValueError):
        list(paused(failing()))
    assert gc.get_threshold() == before
