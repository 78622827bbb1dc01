"""The skills: each a recipe of turn pools over one to three API classes, and the request
skills *expand* composes (every action alone, and the follow-ups)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from environments.bfcl.world.skills.car import (
    vc_climate,
    vc_fill,
    vc_lights,
    vc_liters,
    vc_navigate,
    vc_park,
    vc_start,
    vc_tires,
)
from environments.bfcl.world.skills.files import (
    fs_copy,
    fs_count,
    fs_list,
    fs_note,
    fs_organize,
    fs_remove,
    fs_rename,
    fs_sorted,
    fs_stats,
)
from environments.bfcl.world.skills.messages import (
    msg_again_new,
    msg_new_contact,
    msg_send,
    msg_share_file,
    msg_unsend,
)
from environments.bfcl.world.skills.session import Action, Session
from environments.bfcl.world.skills.tickets import (
    tk_close,
    tk_close_new,
    tk_file,
    tk_open,
    tk_priority,
    tk_resolve,
    tk_resolve_new,
    tk_tell_new,
)
from environments.bfcl.world.skills.trading import (
    tr_average,
    tr_buy,
    tr_buy_name,
    tr_cancel,
    tr_cancel_new,
    tr_deposit,
    tr_tell,
    tr_unwatch,
    tr_watch,
)
from environments.bfcl.world.skills.travel import (
    tv_book,
    tv_book_new_card,
    tv_budget,
    tv_cancel,
    tv_card,
    tv_insure,
    tv_message,
    tv_ticket,
)
from environments.bfcl.world.skills.twitter import (
    tw_comment,
    tw_comment_new,
    tw_follow,
    tw_post,
    tw_retweet,
    tw_share_file,
)
from rods_env.database import Database
from rods_env.domain import Draft, Skill


@dataclass(frozen=True)
class Recipe:
    """A skill's turn pools: turn ``t`` draws its action from ``pools[min(t, len - 1)]``.

    Attributes:
        name: The skill's name.
        description: One line.
        classes: The API classes its tasks involve.
        pools: Per turn, the actions it may take.
        turns: Least and most turns.
    """

    name: str
    description: str
    classes: tuple[str, ...]
    pools: tuple[tuple[Action, ...], ...]
    turns: tuple[int, int] = (2, 4)


FS_WRITES = (fs_note, fs_organize, fs_copy, fs_rename, fs_remove, fs_count, fs_sorted)
TWITTER = (tw_post, tw_comment, tw_follow, tw_retweet)
MESSAGES = (msg_send, msg_new_contact, msg_unsend)
TICKETS = (tk_open, tk_close, tk_resolve, tk_priority)
TRADING = (tr_buy, tr_buy_name, tr_watch, tr_unwatch, tr_cancel, tr_deposit)
CAR = (vc_start, vc_fill, vc_liters, vc_climate, vc_lights, vc_tires, vc_navigate, vc_park)


RECIPES: tuple[Recipe, ...] = (
    Recipe("files", "organize, write and report on files", ("GorillaFileSystem",),
           (FS_WRITES, (*FS_WRITES, fs_list))),
    Recipe("twitter", "post, comment, follow and retweet", ("TwitterAPI",), (TWITTER,)),
    Recipe("messages", "send, add contacts and unsend messages", ("MessageAPI",), (MESSAGES,)),
    Recipe("tickets", "open, close, resolve and reprioritize tickets", ("TicketAPI",), (TICKETS,)),
    Recipe("trading", "buy stocks, manage the watchlist and orders", ("TradingBot",), (TRADING,)),
    Recipe("travel", "book flights, insure, cancel, budget and cards", ("TravelAPI",),
           ((tv_book, tv_budget, tv_card), (tv_insure, tv_cancel, tv_budget, tv_card))),
    Recipe("car", "drive-ready the car: engine, fuel, climate, lights, navigation",
           ("VehicleControlAPI",), (CAR,)),
    Recipe("files_twitter", "files, then tweet a file's content", ("GorillaFileSystem", "TwitterAPI"),
           (FS_WRITES, (tw_share_file,), (*FS_WRITES, *TWITTER))),
    Recipe("files_messages", "files, then message a file's content",
           ("GorillaFileSystem", "MessageAPI"), (FS_WRITES, (msg_share_file,), (*FS_WRITES, *MESSAGES))),
    Recipe("files_math", "statistics of data files with MathAPI", ("GorillaFileSystem", "MathAPI"),
           ((fs_stats,), FS_WRITES, (fs_stats, *FS_WRITES))),
    Recipe("files_tickets", "files, then a ticket from a file", ("GorillaFileSystem", "TicketAPI"),
           (FS_WRITES, (tk_file,), (*FS_WRITES, *TICKETS))),
    Recipe("trading_messages", "trade, then message prices", ("TradingBot", "MessageAPI"),
           (TRADING, (tr_tell,), (*TRADING, *MESSAGES))),
    Recipe("trading_math", "watchlist statistics with MathAPI, then trade", ("TradingBot", "MathAPI"),
           ((tr_average,), TRADING)),
    Recipe("travel_tickets", "book a trip, then file it as a ticket", ("TravelAPI", "TicketAPI"),
           ((tv_book,), (tv_ticket,), (tv_insure, *TICKETS))),
    Recipe("travel_messages", "book a trip, then tell a contact", ("TravelAPI", "MessageAPI"),
           ((tv_book,), (tv_message,), (tv_insure, tv_cancel, *MESSAGES))),
    Recipe("car_twitter", "get the car ready, then tweet about it", ("VehicleControlAPI", "TwitterAPI"),
           (CAR, (tw_post,), (*CAR, *TWITTER))),
    Recipe("files_tickets_messages", "a file becomes a ticket and a message",
           ("GorillaFileSystem", "TicketAPI", "MessageAPI"),
           (FS_WRITES, (tk_file,), (msg_share_file, *MESSAGES))),
    Recipe("travel_twitter_messages", "book, tell a contact, tweet",
           ("TravelAPI", "MessageAPI", "TwitterAPI"),
           ((tv_book,), (tv_message,), (tw_post,), (tv_insure, *TWITTER))),
)  # fmt: skip
"""The skills, by class combination."""


# A follow-up takes an id that an earlier request's call returned (a ticket, a tweet, an
# order, a contact, a card), so its calls depend on that request's: *expand*'s ``chain``
# step adds them. On a world of its own (no earlier request) none applies.
FOLLOW_UPS: tuple[Action, ...] = (
    tk_close_new, tk_resolve_new, tk_tell_new, tw_comment_new, tr_cancel_new, msg_again_new,
    tv_book_new_card,
)  # fmt: skip
"""Requests that build on an earlier request's result (besides the booking's follow-ups,
which the skills' own turns already use: insurance, cancelling, a ticket, a message)."""


def draft(recipe: Recipe, db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
    """Draw a task of ``recipe`` for ``shape`` on world ``db`` (see the module docstring)."""
    lo, hi = recipe.turns
    full = dict(shape)
    turns = min(max(int(full.get("turns", lo)), lo), hi)
    full["turns"] = turns
    items = min(max(int(full.get("items", 1)), 1), 3)
    full["items"] = items
    s = Session(db, rng, full)
    for t in range(turns):
        pool = recipe.pools[min(t, len(recipe.pools) - 1)]
        action = pool[s.choice(f"a{t}", len(pool))]
        s.end_turn(action(s, items))
    return s.draft()


def skill(recipe: Recipe) -> Skill:
    """The rods :class:`~rods_env.domain.Skill` of ``recipe``."""

    def generate(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
        return draft(recipe, db, rng, shape)

    def grows(shape: Mapping[str, int]) -> tuple[str, ...]:
        # one more item changes the task only where one of its turns takes several
        turns = int(shape.get("turns", recipe.turns[0]))
        actions = [recipe.pools[min(t, len(recipe.pools) - 1)] for t in range(turns)]
        several = any(
            f"a{t}" in shape and pool[shape[f"a{t}"] % len(pool)] in SEVERAL
            for t, pool in enumerate(actions)
        )
        return ("turns", "items") if several else ("turns",)

    return Skill(
        name=recipe.name,
        description=recipe.description,
        generate=generate,
        shape={"turns": recipe.turns[0], "items": 1},
        limits={"turns": recipe.turns, "items": (1, 3)},
        grows=grows,
    )


SKILLS: tuple[Skill, ...] = tuple(skill(r) for r in RECIPES)


RECIPE_BY_NAME: Mapping[str, Recipe] = {r.name: r for r in RECIPES}


SEVERAL: frozenset[Action] = frozenset({fs_organize, tw_follow, msg_send, tr_watch})
"""Actions on ``items`` entities (files moved, accounts followed, contacts messaged,
symbols watched)."""


READS: frozenset[Action] = frozenset({fs_list, tr_average})
"""Actions that change nothing (they ask for a value to say)."""


def action_skill(action: Action) -> Skill:
    """A skill of one request: ``action`` alone, in one turn, on the state it is given (a
    fresh world, or a conversation's state when *expand* adds it to a task)."""
    several = action in SEVERAL

    def generate(db: Database, rng: random.Random, shape: Mapping[str, int]) -> Draft:
        full = dict(shape)
        items = min(max(int(full.get("items", 1)), 1), 3)
        if several:
            full["items"] = items
        s = Session(db, rng, full)
        s.end_turn(action(s, items))
        return s.draft()

    doc = (action.__doc__ or "").strip().splitlines()
    return Skill(
        name=action.__name__,
        description=doc[0] if doc else f"one request: {action.__name__.replace('_', ' ')}",
        generate=generate,
        shape={"items": 1} if several else {},
        limits={"items": (1, 3)} if several else {},
        writes=action not in READS,
    )


ACTIONS: tuple[Action, ...] = tuple(
    dict.fromkeys([*(a for recipe in RECIPES for pool in recipe.pools for a in pool), *FOLLOW_UPS])
)
"""Every action of the skills' turn pools, once each, and the follow-ups."""


REQUEST_SKILLS: tuple[Skill, ...] = tuple(action_skill(a) for a in ACTIONS)
"""The requests *expand* adds to a task (``join``: in its last turn; ``append``: in a new
turn): every action of every class, each on the state the task leaves."""
