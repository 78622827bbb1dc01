"""Fresh worlds for synthesized tasks: the parent world's layout, new entities, built lazily.

Every task of the BFCL API world has a world of its own, and a synthesized candidate is
drawn on a fresh one. A world drawn at random is unlike the parent's in what the task's
structure depends on: the parent's turn did not log in because its user was logged in, its
average read a watchlist of three, its car needed a tire shop. So most base candidates found
their skill unavailable on the new world, or took another structure (16-24% of them were
accepted, issue 28). A *layout* is what a task's structure depends on in a world:

- the services the owner is logged in to (Twitter, messages, tickets, trading, travel);
- how many stocks the watchlist holds (an average of the watchlist reads each one);
- whether the tires need a shop.

:func:`fresh_world` writes the parent world's layout into the fresh world's seed
(``LAYOUT_WORLDS + code * SPAN + draw``); :func:`layout_world` keeps that layout and draws
every entity anew from ``draw``. Everything else a skill picks is in every such world: a
folder holding exactly one, two and three files of one kind besides others, a CSV file,
short text files, an open ticket of the owner's, an open order, a card that can pay for a
flight, both locked and unlocked doors, room in the tank. Each class's configuration comes
from a random stream of its own and is built on first use (a task reads two or three of the
eight classes: :class:`rods_env.database.LazyTable`), so a fresh world costs what its task
reads. Seed tasks' worlds (below :data:`~rods_env.synthesis.execute.FRESH_WORLDS`) and the
fresh worlds drawn before layouts (below :data:`LAYOUT_WORLDS`) are generated as before.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any

from environments.bfcl.world.generator import (
    EXTENSIONS,
    FOLDERS,
    LAYOUT_WORLDS,
    ORDER,
    SIZES,
    STEMS,
    SUBFOLDERS,
    drawn_lines,
    generate,
    message_config,
    owner,
    pad_config,
    padding_entries,
    ticket_config,
    trading_config,
    travel_config,
    travel_login,
    twitter_config,
    vehicle_config,
    world_configs,
)
from environments.bfcl.world.state import OWNER, PEOPLE, TABLE, Person, load_instance, state_record
from rods_env.database import LazyTable, Record
from rods_env.padding import long_size_tokens
from rods_env.task import Task

SPAN = 1_000_000_000
"""Draws per layout: a layout world's seed is ``LAYOUT_WORLDS + code * SPAN + draw``."""

LOGIN_CLASSES: tuple[str, ...] = (
    "TwitterAPI",
    "MessageAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
)
"""The services the owner may be logged in to, in the order of the layout code's bits."""

TIRES = ("frontLeftTirePressure", "frontRightTirePressure", "rearLeftTirePressure",
         "rearRightTirePressure")  # fmt: skip


def logged_in(api: str, state: Mapping[str, Any], person: Person) -> bool:
    """Whether the owner is logged in to ``api`` in its public ``state``."""
    if api in ("TwitterAPI", "TradingBot"):
        return bool(state.get("authenticated"))
    if api == "MessageAPI":
        return state.get("current_user") is not None
    if api == "TicketAPI":
        return state.get("current_user") == person.ticket_user
    return state.get("access_token") is not None  # TravelAPI


def tires_low(pressures: list[float]) -> bool:
    """Whether the tires need a shop (the skills' test: mean pressure outside 30-35)."""
    mean = sum(pressures) / len(pressures)
    return not 30 <= mean <= 35


@dataclass(frozen=True)
class Layout:
    """What a task's structure depends on in a world (see the module docstring).

    Attributes:
        logged_in: The services (of :data:`LOGIN_CLASSES`) the owner is logged in to.
        watchlist: Stocks on the watchlist (1 to 3).
        tires_low: Whether the tires need a shop.
    """

    logged_in: frozenset[str]
    watchlist: int
    tires_low: bool

    def code(self) -> int:
        """The layout as a number below 256."""
        bits = sum(1 << i for i, api in enumerate(LOGIN_CLASSES) if api in self.logged_in)
        return bits | (self.watchlist - 1) << 5 | int(self.tires_low) << 7

    @classmethod
    def decode(cls, code: int) -> Layout:
        """The layout of :meth:`code` ``code``."""
        if not 0 <= code < 256 or (code >> 5 & 3) == 3:
            raise ValueError(f"not a layout code: {code}")
        apis = frozenset(api for i, api in enumerate(LOGIN_CLASSES) if code >> i & 1)
        return cls(apis, (code >> 5 & 3) + 1, bool(code >> 7 & 1))

    @classmethod
    def of(cls, tables: Mapping[str, Mapping[str, Record]]) -> Layout:
        """The layout of a world's tables."""
        apis, person = tables[TABLE], tables[PEOPLE][OWNER]
        assert isinstance(person, Person)
        return cls.read({api: getattr(apis[api], "state", {}) for api in READ}, person)

    @classmethod
    def read(cls, states: Mapping[str, Mapping[str, Any]], person: Person) -> Layout:
        """The layout of a world whose classes' public states (or configurations, which
        name these fields alike) are ``states``."""
        watched = len(states["TradingBot"].get("watch_list") or ())
        car = states["VehicleControlAPI"]
        return cls(
            frozenset(api for api in LOGIN_CLASSES if logged_in(api, states[api], person)),
            min(max(watched, 1), 3),
            tires_low([float(car[t]) for t in TIRES]),
        )


READ = (*LOGIN_CLASSES, "VehicleControlAPI")
"""The classes a layout is read from."""


def layout_of_seed(seed: int) -> Layout:
    """The layout of world ``seed``: read from the seed of a layout world, else from the
    world's records."""
    if seed >= LAYOUT_WORLDS:
        return Layout.decode((seed - LAYOUT_WORLDS) // SPAN)
    return _generated_layout(seed)


@lru_cache(maxsize=4096)
def _generated_layout(seed: int) -> Layout:
    configs, person = world_configs(seed, "default")  # no instances built
    return Layout.read(configs, person)


def fresh_world(task: Task, rng: random.Random) -> int:
    """The seed of a fresh world for a variant of ``task``: its world's layout, a new draw
    (:attr:`rods_env.domain.Domain.fresh_world`)."""
    code = layout_of_seed(task.db_seed).code()
    return LAYOUT_WORLDS + code * SPAN + rng.randrange(SPAN)


# -- the generator -------------------------------------------------------------------------
def world_of_seed(seed: int, size: str) -> Mapping[str, Mapping[str, Any]]:
    """The world of any seed at ``size`` (the domain's ``generate``): a layout world
    (:func:`layout_world`) at or above :data:`LAYOUT_WORLDS`, else the world
    :func:`~.generator.generate` draws."""
    if seed >= LAYOUT_WORLDS:
        return layout_world(seed, size)
    return generate(seed, size)


def layout_world(seed: int, size: str) -> dict[str, Mapping[str, Any]]:
    """The world of layout seed ``seed`` at ``size`` (see the module docstring): the owner
    now, each class's record when first read."""
    if size not in SIZES:
        raise ValueError(f"unknown size '{size}'; sizes: {', '.join(SIZES)}")
    code, draw = divmod(seed - LAYOUT_WORLDS, SPAN)
    layout = Layout.decode(code)
    scale = 1 if size == "tiny" else 3
    rng = FastRandom(f"bfcl-layout:{draw}")
    person, contacts = owner(rng, _Names(rng), scale)
    message, person = message_config(rng, person, contacts, scale)
    world = _World(draw, layout, person, contacts, scale, long_size_tokens(size))
    builders = {api: partial(world.record, api, message) for api in ORDER}
    return {TABLE: MappingProxyType(LazyTable(builders)), PEOPLE: {OWNER: person}}


class FastRandom(random.Random):
    """A generator that maps one :meth:`random` draw to an index (CPython draws bits until
    one falls below the range, several Python calls a draw): ``choice``, ``randint``,
    ``sample`` and ``shuffle`` all index through :meth:`_randbelow`. A layout world's
    thousands of draws take a fraction of the time; its draws are its own."""

    def _randbelow(self, n: int) -> int:
        return int(self.random() * n)

    def choice(self, seq: Any) -> Any:
        """One item of ``seq``."""
        return seq[int(self.random() * len(seq))]

    def randint(self, a: int, b: int) -> int:
        """An integer from ``a`` to ``b``, both included."""
        return a + int(self.random() * (b - a + 1))


class _Names:
    """Faker's US first and last names, drawn from ``rng`` (what :func:`owner` asks a Faker
    for, without seeding one per world)."""

    first: tuple[str, ...] = ()
    last: tuple[str, ...] = ()

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        if not _Names.first:
            from faker.providers.person.en_US import Provider

            _Names.first, _Names.last = tuple(Provider.first_names), tuple(Provider.last_names)

    def first_name(self) -> str:
        return self.rng.choice(self.first)

    def last_name(self) -> str:
        return self.rng.choice(self.last)


@dataclass(frozen=True)
class _World:
    draw: int
    layout: Layout
    person: Person
    contacts: list[str]
    scale: int
    tokens: int | None

    def record(self, api: str, message: dict[str, Any]) -> Record:
        """Class ``api``'s record: its configuration from a stream of its own, the layout
        and what every skill needs applied, padded for a long size."""
        rng = FastRandom(f"bfcl-layout:{self.draw}:{api}")
        config = self.config(api, rng, message)
        if self.tokens is not None and api != "MathAPI":
            padding = FastRandom(f"bfcl-layout:{self.draw}:{api}:{self.tokens}")
            pad_config(api, config, padding, padding_entries(self.tokens), self.person)
        instance = load_instance(api, config, copy_config=False)
        return state_record(api, instance, owned=True)  # the instance is dropped

    def config(self, api: str, rng: random.Random, message: dict[str, Any]) -> dict[str, Any]:
        person, layout, on = self.person, self.layout, api in self.layout.logged_in
        if api == "GorillaFileSystem":
            return _files(rng, person.first.lower(), self.scale)
        if api == "MathAPI":
            return {}
        if api == "MessageAPI":
            config = {k: (set(v) if isinstance(v, set) else v) for k, v in message.items()}
            config["current_user"] = person.message_id if on else None
            return config
        if api == "TwitterAPI":
            config = twitter_config(rng, person, self.contacts, self.scale)
            config["authenticated"] = on
            return config
        if api == "TicketAPI":
            config = ticket_config(rng, person, self.contacts, self.scale)
            config["current_user"] = person.ticket_user if on else None
            queue = config["ticket_queue"]
            if not any(_open_ticket(t, person) for t in queue):
                queue[0].update(created_by=person.ticket_user, status="Open")
            return config
        if api == "TradingBot":
            config = trading_config(rng, self.scale)
            config["authenticated"] = on
            config["watch_list"] = rng.sample(sorted(config["stocks"]), layout.watchlist)
            orders = list(config["orders"].values())
            if not any(o["status"] in ("Pending", "Open") for o in orders):
                orders[0]["status"] = "Open"
            return config
        if api == "TravelAPI":
            config = travel_config(rng, person)
            config.update(travel_login(person, str(rng.randint(100000, 999999)) if on else None))
            _ensure_card(config["credit_card_list"], rng)
            return config
        config = vehicle_config(rng)  # VehicleControlAPI
        low, high = (26, 29) if layout.tires_low else (31, 34)
        config.update({t: float(rng.randint(low, high)) for t in TIRES})
        doors = config["doorStatus"]
        if len(set(doors.values())) == 1:  # starting needs some doors locked and some not
            door = rng.choice(sorted(doors))
            doors[door] = "unlocked" if doors[door] == "locked" else "locked"
        config["fuelLevel"] = float(rng.randint(3, 30))  # room for a refill in liters too
        return config


def _open_ticket(ticket: Mapping[str, Any], person: Person) -> bool:
    return ticket["created_by"] == person.ticket_user and ticket["status"] in (
        "Open",
        "In Progress",
    )


def _ensure_card(cards: dict[str, dict[str, Any]], rng: random.Random) -> None:
    """A card that can pay for a flight (the booking skills need 6,000) whose number ends
    unlike every other card's (the user names it by its last four digits)."""
    ends = [c["card_number"][-4:] for c in cards.values()]
    if any(c["balance"] >= 6000 and ends.count(c["card_number"][-4:]) == 1 for c in cards.values()):
        return
    card = cards[next(iter(cards))]
    card["balance"] = float(rng.randint(6000, 30000))
    while ends.count(card["card_number"][-4:]) > 1:
        card["card_number"] = str(rng.randint(10**15, 10**16 - 1))


def _files(rng: random.Random, owner_name: str, scale: int) -> dict[str, Any]:
    """A home folder where every file skill finds what it needs: in five folders, exactly
    one, two and three files of one kind (among others of other kinds), a CSV file and
    short text files (a tweet holds a file's content)."""
    n = 2 + scale
    folders = rng.sample(FOLDERS, n)
    counts = [1, 2, 3, *(rng.randint(1, 3) for _ in range(n - 3))]
    rng.shuffle(counts)
    kinds = [".csv", rng.choice((".txt", ".md"))]
    kinds += rng.sample([e for e in EXTENSIONS if e not in kinds], n - 2)
    rng.shuffle(kinds)
    contents: dict[str, Any] = {}
    for folder, count, kind in zip(folders, counts, kinds, strict=True):
        others = rng.sample([e for e in EXTENSIONS if e != kind], rng.randint(1, 2))
        stems = rng.sample(STEMS, count + len(others))
        files: dict[str, Any] = {}
        for stem, ext in zip(stems, [kind] * count + others, strict=True):
            lines = rng.randint(2, 4) if ext in (".txt", ".md") else rng.randint(2, 7)
            files[stem + ext] = {"type": "file", "content": drawn_lines(rng, ext, lines)}
        if rng.random() < 0.6:
            sub = {
                stem + ext: {"type": "file", "content": drawn_lines(rng, ext, rng.randint(2, 6))}
                for stem in rng.sample(STEMS, rng.randint(1, 3))
                for ext in (rng.choice(EXTENSIONS),)
            }
            files[rng.choice(SUBFOLDERS)] = {"type": "directory", "contents": sub}
        contents[folder] = {"type": "directory", "contents": files}
    return {"root": {owner_name: {"type": "directory", "contents": contents}}}
