from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rods_env.database import DELETED, Database, LazyTable, freeze_tables
from tests.core.toy_domain import TOY, Account


@pytest.fixture
def db() -> Database:
    return TOY.database(0, "tiny")


def test_fresh_states_share_the_base_and_are_equal(db):
    other = TOY.database(0, "tiny")
    assert other.base is db.base
    assert other == db
    assert db.fingerprint() == other.fingerprint()


def test_put_changes_fingerprint_and_reset_restores(db):
    before = db.fingerprint()
    acc = db.get("accounts", "ACC0001")
    db.put("accounts", acc.id, acc.model_copy(update={"balance": acc.balance + 1}))
    assert db.fingerprint() != before
    assert db.get("accounts", "ACC0001").balance == acc.balance + 1
    assert TOY.base(0, "tiny")["accounts"]["ACC0001"].balance == acc.balance  # base untouched
    db.reset()
    assert db.fingerprint() == before


def test_writing_back_the_base_value_is_no_change(db):
    before = db.fingerprint()
    acc = db.get("accounts", "ACC0002")
    db.put("accounts", acc.id, acc.model_copy(update={"balance": 1}))
    db.put("accounts", acc.id, acc.model_copy())
    assert db.changes() == {}
    assert db.fingerprint() == before


def test_same_changes_by_different_paths_are_equal(db):
    other = TOY.database(0, "tiny")
    a = db.get("accounts", "ACC0001")
    db.put("accounts", a.id, a.model_copy(update={"balance": 5}))
    other.put("accounts", a.id, a.model_copy(update={"balance": 9}))
    other.put("accounts", a.id, a.model_copy(update={"balance": 5}))
    assert db == other and db.fingerprint() == other.fingerprint()


def test_checkpoint_rollback_and_changed_since(db):
    a = db.get("accounts", "ACC0001")
    db.put("accounts", a.id, a.model_copy(update={"balance": 5}))
    cp = db.checkpoint()
    db.put("accounts", "ACC0003", db.get("accounts", "ACC0003").model_copy(update={"frozen": True}))
    db.delete("accounts", "ACC0004")
    assert db.changed_since(cp) == {("accounts", "ACC0003"), ("accounts", "ACC0004")}
    db.rollback(cp)
    assert db.changed_since(cp) == set()
    assert db.get("accounts", "ACC0001").balance == 5
    assert db.get("accounts", "ACC0004") is not None


def test_atomic_undoes_on_exception(db):
    before = db.fingerprint()
    with pytest.raises(RuntimeError), db.atomic():
        db.put(
            "accounts", "ACC0001", db.get("accounts", "ACC0001").model_copy(update={"balance": 0})
        )
        raise RuntimeError("boom")
    assert db.fingerprint() == before


def test_delete_insert_and_iteration(db):
    n = db.count("accounts")
    db.delete("accounts", "ACC0000")
    new = Account(id="NEW1", owner_email="n@x.com", balance=1)
    db.put("accounts", new.id, new)
    keys = list(db.keys("accounts"))
    assert "ACC0000" not in keys and keys[-1] == "NEW1"
    assert db.count("accounts") == n
    assert db.changes()[("accounts", "ACC0000")] is DELETED
    db.delete("accounts", "NEW1")
    assert ("accounts", "NEW1") not in db.changes()


def test_fork_is_independent(db):
    db.put("accounts", "ACC0001", db.get("accounts", "ACC0001").model_copy(update={"balance": 3}))
    fork = db.fork()
    fork.put(
        "accounts", "ACC0001", fork.get("accounts", "ACC0001").model_copy(update={"balance": 4})
    )
    assert db.get("accounts", "ACC0001").balance == 3


def test_base_is_read_only():
    tables = freeze_tables({"t": {}})
    with pytest.raises(TypeError):
        tables["t"]["x"] = 1  # type: ignore[index]


def test_records_are_immutable(db):
    acc = db.get("accounts", "ACC0001")
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError
        acc.balance = 3


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(["put", "delete"]), st.integers(0, 12), st.integers(0, 99)),
        max_size=12,
    )
)
def test_values_are_the_records_of_the_keys_in_order_under_any_overlay(ops):
    """values() walks the base once under the overlay (no look-up per key): the same records
    in the same order as reading every key of keys() with get()."""
    db = TOY.database(0, "tiny")
    keys = list(db.keys("accounts"))
    template = db.get("accounts", keys[0])
    for op, k, balance in ops:
        key = keys[k] if k < len(keys) else f"NEW{k}"
        if op == "put":
            db.put("accounts", key, template.model_copy(update={"id": key, "balance": balance}))
        else:
            db.delete("accounts", key)
    expected = [db.get("accounts", key) for key in db.keys("accounts")]
    assert [r for r in db.values("accounts")] == expected
    assert all(a is b for a, b in zip(db.values("accounts"), expected, strict=True))


def test_a_lazy_table_builds_each_record_on_first_look_up_once():
    built: list[str] = []

    def account(key: str):
        def build():
            built.append(key)
            return Account(id=key, owner_email="o@x.org", balance=1)

        return build

    from types import MappingProxyType

    lazy = LazyTable({k: account(k) for k in ("a", "b", "c")})
    base = freeze_tables({"accounts": MappingProxyType(lazy)})
    assert base["accounts"] is not None and built == []  # shared as it is, nothing built
    db = Database(base)
    assert db.get("accounts", "b").id == "b" and built == ["b"]
    assert db.get("accounts", "b") is db.get("accounts", "b") and built == ["b"]
    assert "a" in lazy and "z" not in lazy and db.get("accounts", "z") is None
    with pytest.raises(KeyError):
        lazy["z"]
    assert [r.id for r in db.values("accounts")] == ["a", "b", "c"] and sorted(built) == [
        "a",
        "b",
        "c",
    ]
