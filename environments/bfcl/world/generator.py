"""Worlds over BFCL's API classes, drawn by our own generator (never from BFCL's tasks).

``generate(seed, size)`` draws one person's world: a home directory of folders and files
with their contents, a messaging workspace with contacts and sent messages, a Twitter
account with tweets, a ticket queue, a brokerage account with stocks, orders and a
watchlist, travel credit cards and bookings, and a car. Every class's configuration goes
through the class's own ``_load_scenario``, so the instances are exactly what BFCL would
build from such a configuration; the world is the eight :class:`~.state.ApiState` records
and the :class:`~.state.Person`.

Sizes: ``tiny`` (fewer entities), ``default``, and ``long-<n>k`` for long-context variants:
the ``default`` world of the same seed with about ``n`` thousand tokens of extra entries
in the listings the tools return (files in every folder, older messages, other users'
tweets, closed tickets, past orders and transactions, other cards and bookings). The
entities of the ``default`` world stay as they are, and no padded entry takes an id, a
name or a counter value a task could use, so a task's gold runs the same on both.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from typing import Any

from faker import Faker

from environments.bfcl.world.state import OWNER, PEOPLE, TABLE, Person, load_instance, state_record
from rods_env.padding import long_size_tokens

SIZES: tuple[str, ...] = ("tiny", "default", "long-4k", "long-8k")

FOLDERS = (
    "projects", "notes", "reports", "archive", "research", "drafts", "finance", "travel",
    "recipes", "music", "photos", "meetings", "backups", "clients", "scripts", "datasets",
    "invoices", "lectures", "garden", "fitness",
)  # fmt: skip
SUBFOLDERS = ("old", "2023", "2024", "q1", "q2", "shared", "private", "misc", "final", "wip")
STEMS = (
    "summary", "budget", "plan", "todo", "ideas", "results", "minutes", "schedule", "inventory",
    "expenses", "agenda", "changelog", "checklist", "contacts", "readings", "timeline",
    "feedback", "metrics", "outline", "roster", "survey", "quotes", "playlist", "tasks",
)  # fmt: skip
EXTENSIONS = (".txt", ".md", ".csv", ".log", ".json", ".py")
WORDS = (
    "apple", "bridge", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "indigo",
    "juniper", "kettle", "lantern", "meadow", "nectar", "orbit", "pepper", "quartz", "ripple",
    "saffron", "timber", "umber", "velvet", "willow", "yarrow", "zephyr", "anchor", "beacon",
    "canyon", "drift", "echo", "fable", "glacier", "hollow", "island", "jasper", "kelp",
)  # fmt: skip
TOPICS = (
    "the quarterly review", "the website launch", "the garden project", "the budget meeting",
    "the new office", "the hiring plan", "the conference talk", "the data migration",
    "the spring fair", "the product demo", "the team offsite", "the book club",
)  # fmt: skip
VERBS = ("review", "update", "send", "check", "finish", "plan", "draft", "book", "call", "fix")
STOCK_POOL: Mapping[str, str] = {
    "AAPL": "Apple", "GOOG": "Google", "TSLA": "Tesla", "MSFT": "Microsoft", "NVDA": "Nvidia",
    "ZETA": "Zeta Corp", "ALPH": "Alpha Tech", "OMEG": "Omega Industries", "QUAS": "Quasar Ltd.",
    "NEPT": "Neptune Systems", "SYNX": "Synex Solutions", "AMZN": "Amazon",
}  # fmt: skip
"""Symbols the trading API knows by company name (``get_symbol_by_name``)."""
EXTRA_SYMBOLS = ("KRNL", "VRTX", "BLZE", "NOVA", "PRSM", "HALO", "FJRD", "LUMN")
TWITTER_TAGS = ("#weekend", "#update", "#coffee", "#travel", "#work", "#books", "#running")
TICKET_TITLES = (
    "Printer not responding", "VPN drops every hour", "Laptop battery swelling",
    "Email sync failing", "Badge does not open door", "Monitor flickers",
    "Password reset needed", "Projector in room B broken", "Slow shared drive",
    "Calendar invites missing", "Keyboard keys sticking", "Wi-Fi weak in kitchen",
)  # fmt: skip
CAR_DOORS = ("driver", "passenger", "rear_left", "rear_right")
AIRPORT_CITIES = (
    "Rivermist", "Stonebrook", "Maplecrest", "Silverpine", "Shadowridge", "Sunset Valley",
    "Oakendale", "Willowbend", "Crescent Hollow", "Autumnville", "Pinehaven", "Greenfield",
    "San Francisco", "Los Angeles", "New York", "Chicago", "Boston",
)  # fmt: skip
"""Cities the travel API maps to an airport (``get_nearest_airport_by_city``)."""


def _gerund(verb: str) -> str:
    return (verb[:-1] if verb.endswith("e") else verb) + "ing"


LEVELS = ("INFO", "WARN", "ERROR")
COLUMNS: Mapping[str, tuple[Any, ...]] = {
    ".csv": (WORDS, range(1, 41), range(2, 401)),
    ".log": (LEVELS, WORDS, VERBS),
    ".py": (WORDS,),
    ".json": (WORDS, range(1, 100)),
    ".txt": (VERBS, TOPICS, WORDS),
}
"""What each line of a file of each kind draws, in order (a ``range``: an integer in it)."""


def _lines(rng: random.Random, ext: str, n: int) -> str:
    """``n`` lines of a file of kind ``ext``, each drawn in turn."""
    columns = COLUMNS.get(ext, COLUMNS[".txt"])
    rows = [
        tuple(
            rng.randint(c.start, c.stop - 1) if isinstance(c, range) else rng.choice(c)
            for c in columns
        )
        for _ in range(n)
    ]
    return file_text(ext, rows)


def drawn_lines(rng: random.Random, ext: str, n: int) -> str:
    """``n`` lines of a file of kind ``ext``, the values of each column drawn at once (a
    tenth of the random calls of :func:`_lines`; its own draws, for worlds of their own)."""
    columns = [rng.choices(c, k=n) for c in COLUMNS.get(ext, COLUMNS[".txt"])]
    return file_text(ext, list(zip(*columns, strict=True)))


def file_text(ext: str, rows: list[tuple[Any, ...]]) -> str:
    """A file of kind ``ext`` whose lines hold the drawn ``rows`` (see :data:`COLUMNS`)."""
    if ext == ".csv":
        lines = ["item, qty, price"]  # ", ": "3,315" would read as one number
        return "\n".join([*lines, *(f"{w}, {q}, {p}" for w, q, p in rows)])
    if ext == ".log":
        return "\n".join(f"{level} {w} service {v}ed" for level, w, v in rows)
    if ext == ".py":
        return "\n".join(f"def {w}_{i}():\n    return {i}" for i, (w,) in enumerate(rows))
    if ext == ".json":
        return "{" + ", ".join(f'"{w}": {k}' for w, k in rows) + "}"
    return "\n".join(f"{v.capitalize()} {t} with {w}" for v, t, w in rows)


def _file_system(rng: random.Random, owner: str, scale: int) -> dict[str, Any]:
    contents: dict[str, Any] = {}
    for folder in rng.sample(FOLDERS, 2 + scale):
        files: dict[str, Any] = {}
        for stem in rng.sample(STEMS, rng.randint(1, 2 + scale)):
            ext = rng.choice(EXTENSIONS)
            files[stem + ext] = {"type": "file", "content": _lines(rng, ext, rng.randint(2, 7))}
        if rng.random() < 0.6:
            sub: dict[str, Any] = {}
            for stem in rng.sample(STEMS, rng.randint(1, 3)):
                ext = rng.choice(EXTENSIONS)
                sub[stem + ext] = {"type": "file", "content": _lines(rng, ext, rng.randint(2, 6))}
            files[rng.choice(SUBFOLDERS)] = {"type": "directory", "contents": sub}
        contents[folder] = {"type": "directory", "contents": files}
    for stem in rng.sample(STEMS, rng.randint(0, 2)):
        ext = rng.choice(EXTENSIONS)
        contents.setdefault(stem + ext, {"type": "file", "content": _lines(rng, ext, 3)})
    return {"root": {owner: {"type": "directory", "contents": contents}}}


_FAKERS = threading.local()


def _faker(seed: int) -> Faker:
    """This thread's Faker, seeded (building one costs tens of milliseconds)."""
    fake = getattr(_FAKERS, "fake", None)
    if fake is None:
        fake = _FAKERS.fake = Faker("en_US")
    fake.seed_instance(seed)
    return fake


def _unique_names(fake: Any, n: int, avoid: set[str]) -> list[str]:
    names: list[str] = []
    while len(names) < n:
        name = fake.first_name()
        if name not in avoid and name not in names:
            names.append(name)
    return names


LAYOUT_WORLDS = 1_000_000_000_000
"""Seeds at or above this are layout worlds (:mod:`~.layout`): fresh worlds of synthesized
tasks that keep their parent world's layout."""


def generate(seed: int, size: str) -> Mapping[str, Mapping[str, Any]]:
    """The world of ``seed`` at ``size`` (see the module docstring), for a seed below
    :data:`LAYOUT_WORLDS` (the domain draws every seed through
    :func:`~.layout.world_of_seed`, which sends the others to :func:`~.layout.layout_world`)."""
    tokens = long_size_tokens(size)
    if tokens is not None:
        return _padded(seed, tokens)
    if size not in ("tiny", "default"):
        raise ValueError(f"unknown size '{size}'; sizes: {', '.join(SIZES)}")
    configs, person = world_configs(seed, size)
    return _tables(configs, person)


def _tables(configs: Mapping[str, Any], person: Person) -> dict[str, dict[str, Any]]:
    from environments.bfcl.apis import CLASS_NAMES

    # the configurations are this call's own: handed over, not copied
    apis = {  # each instance is dropped once recorded: its containers become the state
        api: state_record(api, load_instance(api, configs.get(api), copy_config=False), owned=True)
        for api in CLASS_NAMES
    }
    return {TABLE: apis, PEOPLE: {OWNER: person}}


def world_configs(seed: int, size: str = "default") -> tuple[dict[str, Any], Person]:
    """The configuration of each class in the world of ``seed`` (``_load_scenario``'s
    input) and its owner."""
    rng = random.Random(f"bfcl-world:{seed}")
    fake = _faker(seed)
    scale = 1 if size == "tiny" else 3
    person, contacts = owner(rng, fake, scale)
    message, person = message_config(rng, person, contacts, scale)
    configs = {
        "MathAPI": {},
        "MessageAPI": message,
        "TwitterAPI": twitter_config(rng, person, contacts, scale),
        "TicketAPI": ticket_config(rng, person, contacts, scale),
        "TradingBot": trading_config(rng, scale),
        "TravelAPI": travel_config(rng, person),
        "VehicleControlAPI": vehicle_config(rng),
    }
    configs["GorillaFileSystem"] = _file_system(rng, person.first.lower(), scale)
    return {api: configs[api] for api in ORDER}, person


ORDER = (
    "GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot",
    "TravelAPI", "VehicleControlAPI",
)  # fmt: skip
"""The classes in the order a world lists them."""


def owner(rng: random.Random, fake: Any, scale: int) -> tuple[Person, list[str]]:
    """The world's owner (their message id still unset) and their contacts' first names
    (``fake``: a Faker, or anything with its ``first_name`` and ``last_name``)."""
    first, last = fake.first_name(), fake.last_name()
    handle = f"{first.lower()}_{rng.choice(WORDS)}{rng.randint(1, 99)}"
    contacts = _unique_names(fake, 2 + scale, {first})
    person = Person(
        first=first,
        last=last,
        twitter_user=handle,
        twitter_password=f"{rng.choice(WORDS)}{rng.randint(100, 999)}",
        message_id="",
        ticket_user=f"{first[0].lower()}{last.lower()}",
        ticket_password=f"{rng.choice(WORDS)}-{rng.randint(1000, 9999)}",
        trading_user=f"{first.lower()}.{last.lower()}",
        trading_password=f"{rng.choice(WORDS).capitalize()}{rng.randint(10, 99)}!",
        travel_client_id=f"client_{rng.randint(10000, 99999)}",
        travel_secret=f"secret_{rng.choice(WORDS)}_{rng.randint(100, 999)}",
        travel_refresh=f"rt_{rng.randint(1000000, 9999999)}",
    )
    return person, contacts


def message_config(
    rng: random.Random, person: Person, contacts: list[str], scale: int
) -> tuple[dict[str, Any], Person]:
    """The messaging workspace (the owner is one of its users) and the owner with their
    user id."""
    users = [person.first, *contacts]
    rng.shuffle(users)
    user_map = {name: f"USR{i + 1:03d}" for i, name in enumerate(users)}
    person = person.model_copy(update={"message_id": user_map[person.first]})
    others = [user_map[c] for c in contacts]
    inbox = [
        {rng.choice(others): f"{rng.choice(VERBS).capitalize()} {rng.choice(TOPICS)} please"}
        for _ in range(rng.randint(1, 2 + scale))
    ]
    message = {
        "random_seed": rng.randint(1, 10**6),
        "generated_ids": set(),
        "user_count": len(user_map),
        "user_map": user_map,
        "inbox": inbox,
        "message_count": len(inbox),
        "current_user": user_map[person.first] if rng.random() < 0.5 else None,
    }
    return message, person


def twitter_config(
    rng: random.Random, person: Person, contacts: list[str], scale: int
) -> dict[str, Any]:
    """The owner's Twitter account: their tweets and others', ids from a random start
    (padding stays below)."""
    start = 5000 + rng.randint(0, 400)
    handle = person.twitter_user
    tweeters = [handle, *(f"{c.lower()}{rng.randint(1, 9)}" for c in contacts)]
    tweets: dict[str, Any] = {}
    for k in range(rng.randint(2, 2 + scale)):
        tid = start + k
        tweets[str(tid)] = {
            "id": tid,
            "username": rng.choice(tweeters),
            "content": f"{_gerund(rng.choice(VERBS)).capitalize()} {rng.choice(TOPICS)} today",
            "tags": rng.sample(TWITTER_TAGS, rng.randint(0, 2)),
            "mentions": [],
        }
    return {
        "username": handle,
        "password": person.twitter_password,
        "authenticated": rng.random() < 0.4,
        "tweets": tweets,
        "comments": {},
        "retweets": {},
        "following_list": rng.sample(tweeters[1:], min(len(tweeters) - 1, rng.randint(1, 3))),
        "tweet_counter": start + len(tweets),
    }


def ticket_config(
    rng: random.Random, person: Person, contacts: list[str], scale: int
) -> dict[str, Any]:
    """The ticket queue, ids from a random start (padding stays below)."""
    tstart = 600 + rng.randint(0, 300)
    queue = []
    for k, title in enumerate(rng.sample(TICKET_TITLES, rng.randint(2, 2 + scale))):
        queue.append(
            {
                "id": tstart + k,
                "title": title,
                "description": f"{title}. Noticed during {rng.choice(TOPICS)}.",
                "status": rng.choice(("Open", "Open", "In Progress", "Closed")),
                "priority": rng.randint(1, 5),
                "created_by": person.ticket_user if rng.random() < 0.7 else contacts[0].lower(),
            }
        )
    return {
        "ticket_queue": queue,
        "ticket_counter": tstart + len(queue),
        "current_user": person.ticket_user if rng.random() < 0.5 else None,
    }


def trading_config(rng: random.Random, scale: int) -> dict[str, Any]:
    """The brokerage account: stocks, orders, the watchlist."""
    symbols = rng.sample(list(STOCK_POOL), 4 + scale) + rng.sample(EXTRA_SYMBOLS, 2)
    stocks = {}
    for sym in symbols:
        price = round(rng.uniform(15, 900), 2)
        stocks[sym] = {
            "price": price,
            "percent_change": round(rng.uniform(-3, 3), 2),
            "volume": round(rng.uniform(0.3, 4), 3),
            "MA(5)": round(price * rng.uniform(0.97, 1.03), 2),
            "MA(20)": round(price * rng.uniform(0.94, 1.06), 2),
        }
    ostart = 20000 + rng.randint(0, 5000)
    orders = {}
    for k in range(rng.randint(1, 3)):
        sym = rng.choice(symbols)
        orders[str(ostart + k)] = {
            "id": ostart + k,
            "order_type": rng.choice(("Buy", "Sell")),
            "symbol": sym,
            "price": stocks[sym]["price"],
            "amount": rng.randint(1, 30),
            "status": rng.choice(("Completed", "Pending", "Open")),
        }
    return {
        "orders": orders,
        "account_info": {
            "account_id": rng.randint(10000, 99999),
            "balance": float(rng.randint(2000, 60000)),
            "binding_card": rng.randint(10**15, 10**16 - 1),
        },
        "authenticated": rng.random() < 0.4,
        "market_status": rng.choice(("Open", "Closed")),
        "order_counter": ostart + len(orders),
        "stocks": stocks,
        "watch_list": rng.sample(symbols, rng.randint(1, 3)),
        "transaction_history": [],
        "random_seed": rng.randint(1, 10**6),
    }


def travel_config(rng: random.Random, person: Person) -> dict[str, Any]:
    """Travel credit cards; the owner logged in half of the time."""
    cards = {}
    for _ in range(rng.randint(1, 3)):
        cards[str(rng.randint(10**11, 10**12 - 1))] = {
            "card_number": str(rng.randint(10**15, 10**16 - 1)),
            "expiration_date": f"{rng.randint(1, 12):02d}/{rng.randint(2027, 2032)}",
            "cardholder_name": person.name,
            "card_verification_number": rng.randint(100, 999),
            "balance": float(rng.randint(1500, 30000)),
        }
    logged = rng.random() < 0.5
    travel: dict[str, Any] = {
        "random_seed": rng.randint(1, 10**6),
        "credit_card_list": cards,
        "booking_record": {},
        "budget_limit": None,
    }
    travel.update(travel_login(person, str(rng.randint(100000, 999999)) if logged else None))
    return {k: travel[k] for k in TRAVEL_FIELDS}


TRAVEL_FIELDS = (
    "random_seed", "credit_card_list", "booking_record", "access_token", "token_type",
    "token_expires_in", "token_scope", "user_first_name", "user_last_name", "budget_limit",
)  # fmt: skip


def travel_login(person: Person, token: str | None) -> dict[str, Any]:
    """The travel configuration's log-in fields: the owner logged in with ``token``, or
    nobody (None)."""
    logged = token is not None
    return {
        "access_token": token,
        "token_type": "Bearer" if logged else None,
        "token_expires_in": 2 if logged else None,
        "token_scope": "read_write" if logged else None,
        "user_first_name": person.first if logged else None,
        "user_last_name": person.last if logged else None,
    }


def vehicle_config(rng: random.Random) -> dict[str, Any]:
    """The car."""
    doors = {d: rng.choice(("locked", "unlocked")) for d in CAR_DOORS}
    return {
        "random_seed": rng.randint(1, 10**6),
        "fuelLevel": float(rng.randint(3, 40)),
        "batteryVoltage": round(rng.uniform(11.8, 13.2), 1),
        "engineState": "stopped",
        "doorStatus": doors,
        "acTemperature": float(rng.randint(18, 28)),
        "fanSpeed": rng.choice((20, 30, 40, 50, 60)),
        "acMode": rng.choice(("auto", "cool", "heat")),
        "humidityLevel": float(rng.randint(30, 70)),
        "headLightStatus": rng.choice(("on", "off")),
        "parkingBrakeStatus": rng.choice(("engaged", "released")),
        "brakePedalStatus": "released",
        "distanceToNextVehicle": float(rng.choice((40, 50, 60, 80))),
        "cruiseStatus": "inactive",
        "destination": "None",
        "frontLeftTirePressure": float(rng.randint(26, 36)),
        "frontRightTirePressure": float(rng.randint(26, 36)),
        "rearLeftTirePressure": float(rng.randint(26, 36)),
        "rearRightTirePressure": float(rng.randint(26, 36)),
    }


def _padded(seed: int, tokens: int) -> dict[str, dict[str, Any]]:
    """The default world of ``seed`` with about ``tokens`` tokens of extra listing entries
    per class (see the module docstring)."""
    configs, person = world_configs(seed, "default")
    rng = random.Random(f"bfcl-long:{seed}:{tokens}")
    n = padding_entries(tokens)
    for api in PADDED:  # one stream, in this order
        pad_config(api, configs[api], rng, n, person)
    return _tables(configs, person)


PADDED = ("GorillaFileSystem", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI")
"""The classes a long world pads, in the order they draw from its stream."""


def padding_entries(tokens: int) -> int:
    """Extra entries per listing for about ``tokens`` tokens (~12 tokens each, over two
    listings a class)."""
    return max(8, tokens // 24)


def pad_config(
    api: str, config: dict[str, Any], rng: random.Random, n: int, person: Person
) -> None:
    """Add ``n``-odd entries to the listings of class ``api``'s ``config`` (in place): none
    takes an id, a name or a counter value a task could use."""
    if api == "GorillaFileSystem":
        # every folder gets cache files (a name that no task uses: tasks pick STEMS)
        root = next(iter(config["root"].values()))

        def pad(folder: dict[str, Any], count: int) -> None:
            for i in range(count):
                name = f"cache_{rng.choice(WORDS)}_{i:04d}.tmp"
                folder["contents"].setdefault(name, {"type": "file", "content": ""})
            for item in list(folder["contents"].values()):
                if item["type"] == "directory":
                    pad(item, count // 2)

        pad(root, n // 4)
    elif api == "MessageAPI":
        # older messages before the real ones (delete_message takes the latest)
        ids = list(config["user_map"].values())
        older = [{rng.choice(ids): f"Archived note {i}: {rng.choice(TOPICS)}"} for i in range(n)]
        config["inbox"] = older + config["inbox"]
        config["message_count"] = len(config["inbox"])
        # more contacts, with ids past any a new contact would get (user_count stays)
        for i in range(min(n, 400)):
            config["user_map"].setdefault(f"Member{i:03d}", f"USR{600 + i}")
    elif api == "TwitterAPI":
        # other users' tweets, ids below the real ones, in words no task searches for; more
        # accounts followed (named unlike any a task follows)
        config["following_list"] = config["following_list"] + [f"fan_{i:04d}" for i in range(n)]
        for i in range(n):
            tid = 1000 + i
            config["tweets"][str(tid)] = {
                "id": tid,
                "username": f"user{rng.randint(100, 999)}",
                "content": f"Archived post number {i}",
                "tags": ["#archive"],
                "mentions": [],
            }
    elif api == "TicketAPI":
        # closed tickets of the owner, ids below the real ones
        old = [
            {
                "id": 100 + i,
                "title": f"Old request {i}",
                "description": f"Archived: {rng.choice(TOPICS)}",
                "status": "Closed",
                "priority": rng.randint(1, 5),
                "created_by": person.ticket_user,
            }
            for i in range(min(n, 450))
        ]
        config["ticket_queue"] = old + config["ticket_queue"]
    elif api == "TradingBot":
        # past orders and transactions
        for i in range(n):
            oid = 10000 + i
            sym = rng.choice(list(config["stocks"]))
            config["orders"][str(oid)] = {
                "id": oid,
                "order_type": rng.choice(("Buy", "Sell")),
                "symbol": sym,
                "price": config["stocks"][sym]["price"],
                "amount": rng.randint(1, 30),
                "status": "Completed",
            }
        config["transaction_history"] = [
            {
                "type": "deposit",
                "amount": float(rng.randint(100, 900)),
                "timestamp": "2024-08-01 09:00:00",
            }
            for _ in range(n)
        ]
    elif api == "TravelAPI":
        # other cards of the owner (their numbers end unlike any real card's) and bookings
        ends = {c["card_number"][-4:] for c in config["credit_card_list"].values()}
        for i in range(n // 3):
            number = str(rng.randint(10**15, 10**16 - 1))
            if number[-4:] in ends:
                continue
            config["credit_card_list"][str(200000000000 + i)] = {
                "card_number": number,
                "expiration_date": "01/2026",
                "cardholder_name": f"{person.first} {person.last}",
                "card_verification_number": rng.randint(100, 999),
                "balance": float(rng.randint(50, 900)),
            }
        card = next(iter(config["credit_card_list"]))
        for i in range(n):
            config["booking_record"][str(3000000 + i)] = {
                "card_id": card,
                "travel_date": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "travel_from": "SFO",
                "travel_to": "LAX",
                "travel_class": "economy",
                "travel_cost": 200.0,
                "transaction_id": str(40000000 + i),
            }
