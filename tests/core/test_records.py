"""rods_env.records: records written piece by piece are written exactly as pydantic writes them.

``canonical_text`` must be ``json.dumps(model_dump(mode="json"), sort_keys=True,
separators=(",", ":"))`` character for character (dedupe keys and fingerprints hash it), and
``plain_dump`` must equal ``model_dump(mode="json")`` (gold outputs, value leaves and the
critique read it); where either cannot promise that, it answers None and the caller takes
pydantic's path.
"""

from __future__ import annotations

import enum
import json
import random
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer

import rods_env
from rods_env.database import DELETED, Database, record_digest
from rods_env.gold import replay_gold
from rods_env.records import canonical_text, plain, plain_dump
from rods_env.synthesis import AUGMENTS, synthesize


def _pydantic_text(record: BaseModel) -> str:
    return json.dumps(record.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _agrees(record: BaseModel) -> bool:
    """Both forms are pydantic's, or the function declined (None); checked twice, the
    second time from what was remembered."""
    for _ in range(2):
        text = canonical_text(record)
        dumped = plain_dump(record)
        if text is not None and text != _pydantic_text(record):
            return False
        if dumped is not None:
            expected = record.model_dump(mode="json")
            if dumped != expected or json.dumps(dumped) != json.dumps(expected):
                return False  # equal as data and in key order
    return True


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_every_record_of_a_world_is_written_as_pydantic_writes_it(name):
    domain = rods_env.load_domain(name)
    tables = domain.base(0, "default")
    checked = 0
    for table, rows in tables.items():
        for record in rows.values():
            assert canonical_text(record) == _pydantic_text(record), (table, record)
            assert plain_dump(record) == record.model_dump(mode="json"), (table, record)
            checked += 1
        # the fast path is taken for every record class of the shipped domains
        assert all(plain(type(r)) for r in rows.values()), table
    assert checked > 1000


@pytest.mark.parametrize("name", ["retail", "airline"])
def test_records_synthesis_changes_are_written_as_pydantic_writes_them(name):
    """A changed record shares most of its parts with the original (model_copy): its text
    and dump, assembled from the parts' remembered ones, are still pydantic's."""
    domain = rods_env.load_domain(name)
    seeds = domain.seed_tasks("train")[::6]
    checked = 0
    for mode in ("resample", "expand"):
        for outcome in synthesize(seeds, per_seed=1, mode=mode, augment=AUGMENTS, domains=domain):
            if not outcome.accepted:
                continue
            gold = replay_gold(domain, outcome.task)
            for record in gold.final.values():
                if record is DELETED:
                    continue
                assert record_digest(record) == _pydantic_text(record)
                assert plain_dump(record) == record.model_dump(mode="json")
                checked += 1
    assert checked > 20


def test_a_changed_record_is_not_read_from_its_originals_text():
    domain = rods_env.load_domain("airline")
    db = Database(domain.base(0, "default"))
    flight = next(iter(db.values("flights")))
    before = canonical_text(flight)
    day = next(iter(flight.dates))
    status = flight.dates[day].model_copy(update={"status": "cancelled"})
    changed = flight.model_copy(update={"dates": {**flight.dates, day: status}})
    assert canonical_text(changed) == _pydantic_text(changed) != before
    assert plain_dump(changed)["dates"][day]["status"] == "cancelled"
    assert canonical_text(flight) == before  # the original is untouched


# -- generated classes and values ---------------------------------------------------------------
class Colour(str, enum.Enum):
    RED = "red"


class Leaf(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    n: int = 0


class SubLeaf(Leaf):
    extra_field: str = "x"


class Node(BaseModel):
    model_config = ConfigDict(frozen=True)
    s: str
    i: int
    f: float
    b: bool
    o: int | None = None
    lit: Literal["a", "b", 3] = "a"
    items: list[int] = Field(default_factory=list)
    names: tuple[str, ...] = ()
    table: dict[str, float] = Field(default_factory=dict)
    leaf: Leaf | None = None
    leaves: dict[str, Leaf] = Field(default_factory=dict)


_TEXT = st.text(max_size=6) | st.sampled_from(["é", '"q"', "\\", "\n", "\u2028", "\x00", "🙂"])
# an int in a float field: pydantic writes 5.0
_FLOATS = st.floats() | st.integers(-(10**20), 10**20)
_LEAVES = st.builds(
    lambda cls, name, n: (
        cls.model_construct(name=name, n=n)
        if cls is Leaf
        else cls.model_construct(name=name, n=n, extra_field="y")
    ),
    st.sampled_from([Leaf, Leaf, SubLeaf]),
    _TEXT | st.just(Colour.RED),
    st.integers(-(10**20), 10**20) | st.booleans(),
)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    s=_TEXT | st.just(Colour.RED),
    i=st.integers(-(10**30), 10**30) | st.booleans(),
    f=_FLOATS,
    b=st.booleans() | st.integers(0, 1),
    o=st.none() | st.integers(),
    lit=st.sampled_from(["a", "b", 3, True, 3.0]),
    items=st.lists(st.integers() | st.booleans(), max_size=3) | st.tuples(st.integers()),
    names=st.tuples(_TEXT) | st.lists(_TEXT, max_size=2),
    table=st.dictionaries(_TEXT, _FLOATS, max_size=3),
    leaf=st.none() | _LEAVES,
    leaves=st.dictionaries(_TEXT, _LEAVES, max_size=2),
)
def test_generated_values_are_written_as_pydantic_writes_them_or_declined(**values: Any):
    """Values built without validation (model_construct) hold every type a careless writer
    could put in a field: each is written exactly as pydantic writes it, or declined."""
    node = Node.model_construct(**values)
    try:
        _pydantic_text(node)
    except (TypeError, ValueError):  # pydantic itself cannot write it as JSON
        assert canonical_text(node) is None
        return
    assert _agrees(node)


def test_validated_values_are_written_piece_by_piece():
    """The fast path is taken for ordinary, validated records (not only declined)."""
    rng = random.Random(0)
    for _ in range(50):
        node = Node(
            s=str(rng.random()),
            i=rng.randint(-99, 99),
            f=rng.random(),
            b=True,
            items=[1, 2],
            names=("x",),
            table={"z": 1.5, "a": 2.0},
            leaf=Leaf(name="é"),
            leaves={"k": Leaf(name="k", n=3)},
        )
        assert canonical_text(node) == _pydantic_text(node)
        assert plain_dump(node) == node.model_dump(mode="json")


class Aliased(BaseModel):
    x: int = Field(serialization_alias="y")


class Serialized(BaseModel):
    x: int

    @field_serializer("x")
    def _double(self, x: int) -> int:
        return 2 * x


class Computed(BaseModel):
    x: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def y(self) -> int:
        return self.x + 1


class Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: int


class Loose(BaseModel):
    x: Any


class Enumerated(BaseModel):
    colour: Colour


class Excluded(BaseModel):
    x: int
    secret: str = Field(default="s", exclude=True)


@pytest.mark.parametrize(
    "record",
    [
        Aliased(x=1),
        Serialized(x=1),
        Computed(x=1),
        Extra(x=1, z=2),
        Loose(x={"a": 1}),
        Enumerated(colour=Colour.RED),
        Excluded(x=1),
    ],
    ids=lambda r: type(r).__name__,
)
def test_classes_pydantic_writes_otherwise_are_declined(record):
    assert not plain(type(record))
    assert canonical_text(record) is None and plain_dump(record) is None
    assert record_digest(record) == _pydantic_text(record)  # pydantic's own path
