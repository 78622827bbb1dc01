"""Actionable hints for BFCL's API classes (``actionable_hints=True``; :mod:`rods_env.hints`).

Environment Tuning (arXiv 2510.10197) augmented BFCL by editing the classes' error messages
(``EnvTuning/bfcl_env/func_source_code/*.py`` in inclusionAI/AWorld-RL): the file system
says that a path is not allowed and to ``cd`` one level at a time, and that a name is not
in the current directory; ``get_flight_cost`` names ``list_all_airports`` and
``get_nearest_airport_by_city`` for a bad airport code; ``estimate_distance`` names
``get_zipcode_based_on_city``; ``get_outside_temperature_from_weather_com`` names
``get_outside_temperature_from_google``. Here the classes stay BFCL's own (their error texts
are what BFCL's response check compares): the same advice is a hint read from the error
text and the agent's own arguments, appended to the observation only.

Like every rods hint, these never state a value of the state the agent has not seen (no
directory listing, no airport or symbol): they name the function that finds it, or
restate the agent's own value.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from rods_env.hints import Hint

FILE_SYSTEM: frozenset[str] = frozenset(
    {
        "cat", "cd", "cp", "diff", "du", "echo", "find", "grep", "ls", "mkdir", "mv", "pwd",
        "rm", "rmdir", "sort", "tail", "touch", "wc",
    }
)  # fmt: skip
"""GorillaFileSystem's functions."""

NAME_PARAMS: frozenset[str] = frozenset(
    {"file_name", "dir_name", "source", "destination", "file_name1", "file_name2", "folder"}
)
"""File-system parameters that take one name in the current directory (``find``'s
``path`` is a path)."""

_LOGIN_TEXT = re.compile(
    r"not (?:currently )?(?:logged in|authenticated)|please log ?in|authenticate before|"
    r"no user is currently logged in",
    re.IGNORECASE,
)
_TOKEN_TEXT = re.compile(r"token (?:expired|not initialized)|invalid access token", re.IGNORECASE)

OWNER_LOGIN: Mapping[str, str] = {
    "MessageAPI": "message_login",
    "TwitterAPI": "authenticate_twitter",
    "TicketAPI": "ticket_login",
    "TradingBot": "trading_login",
    "TravelAPI": "authenticate_travel",
}
"""The function that logs a class's user in (BFCL's classes refuse most calls before it)."""

ADVICE: tuple[tuple[re.Pattern[str], tuple[str, ...], str], ...] = (
    # Environment Tuning's vehicle_control.py: the tool that finds a zip code
    (
        re.compile(r"distance not found", re.IGNORECASE),
        ("get_zipcode_based_on_city",),
        "estimate_distance takes the zip codes of the two cities: {0} gives a city's zip code.",
    ),
    # Environment Tuning's vehicle_control.py: the other temperature service
    (
        re.compile(r'^\{"error": 404\}$'),
        ("get_outside_temperature_from_google",),
        "This weather service is unavailable: {0} gives the outside temperature.",
    ),
    # Environment Tuning's travel_booking.py: the tools that find an airport code
    (
        re.compile(r"airport code|no available route", re.IGNORECASE),
        ("list_all_airports", "get_nearest_airport_by_city"),
        "Use airport codes the system knows: {0} lists them, {1} finds the airport of a city.",
    ),
    # dependency order, as the classes' own errors state it
    (
        re.compile(r"doors must be locked", re.IGNORECASE),
        ("lockDoors",),
        "Lock the doors with {0} first, then retry.",
    ),
    (
        re.compile(r"brake pedal needs to be pressed|press the brake fully", re.IGNORECASE),
        ("pressBrakePedal",),
        "Press the brake pedal fully with {0} first, then retry.",
    ),
    (
        re.compile(r"start the engine before", re.IGNORECASE),
        ("startEngine",),
        "Start the engine with {0} first, then retry.",
    ),
    (
        re.compile(r"fuel tank is empty\.\"", re.IGNORECASE),
        ("fillFuelTank",),
        "Fill the tank with {0} first, then retry.",
    ),
    (
        re.compile(r"card not registered", re.IGNORECASE),
        ("get_all_credit_cards", "register_credit_card"),
        "{0} lists the registered cards; {1} registers a new one.",
    ),
    (
        re.compile(r"booking not found", re.IGNORECASE),
        ("get_booking_history",),
        "Check the booking id: {0} lists the bookings.",
    ),
    (
        re.compile(r"invalid stock symbol|stock with symbol .* not found", re.IGNORECASE),
        ("get_symbol_by_name", "get_available_stocks"),
        "Check the symbol: {0} gives a company's symbol, {1} lists the symbols of a sector.",
    ),
    (
        re.compile(r"order with id .* not found", re.IGNORECASE),
        ("get_order_history",),
        "Check the order id: {0} lists your orders.",
    ),
    (
        re.compile(r"receiver id .* not found|user '.*' not found", re.IGNORECASE),
        ("get_user_id", "list_users"),
        "Messages go to user ids: {0} gives a user's id, {1} lists the users.",
    ),
)
"""Error text -> the functions that help (each must be shown) -> what to do."""


def bfcl_hints(
    name: str, arguments: Mapping[str, Any], text: str, shown: Collection[str], owner: str | None
) -> list[Hint]:
    """Hints for a failed call of one of BFCL's API functions.

    Args:
        name: The function called (as BFCL reads it).
        arguments: The call's arguments.
        text: The result text the agent sees.
        shown: The functions shown in this turn (only these are named).
        owner: The function's class (None when it is not one of BFCL's).

    Returns:
        The hints, most specific first (empty when none applies).
    """
    if name in FILE_SYSTEM:
        found = _file_system(name, arguments, text, shown)
        if found:
            return found
    login = OWNER_LOGIN.get(owner or "")
    if login is not None and login in shown and _LOGIN_TEXT.search(text):
        return [
            Hint("login_first", f"{name} needs the user logged in: call {login} first, then retry.")
        ]
    if _TOKEN_TEXT.search(text) and "authenticate_travel" in shown:
        return [
            Hint(
                "login_first",
                f"{name} needs a valid access token: authenticate_travel returns one; pass "
                "that token as access_token.",
            )
        ]
    for pattern, tools, advice in ADVICE:
        if pattern.search(text) and all(t in shown for t in tools) and name not in tools:
            return [Hint("bfcl_advice", advice.format(*(f"{t}()" for t in tools)))]
    return []


def _file_system(
    name: str, arguments: Mapping[str, Any], text: str, shown: Collection[str]
) -> list[Hint]:
    lowered = text.lower()
    for param, value in arguments.items():
        if param not in NAME_PARAMS or not isinstance(value, str):
            continue
        path = value.rstrip("/")
        if path in {"", ".", "..", "/"} or "/" not in path:
            continue
        parts = [p for p in path.split("/") if p]
        if not parts:
            continue
        steps = ", ".join(f"cd(folder='{p}')" for p in parts[:-1] if p != ".")
        if name == "cd":
            walk = ", ".join(f"cd(folder='{p}')" for p in parts)
            return [
                Hint(
                    "bfcl_path",
                    f"cd moves one folder level at a time: {walk}, one call each.",
                )
            ]
        if param == "destination":
            return [
                Hint(
                    "bfcl_path",
                    f"{name}'s destination is one name in the current directory (an existing "
                    f"directory there receives it), not a path like '{value}'.",
                )
            ]
        return [
            Hint(
                "bfcl_path",
                f"'{value}' is a path, but {name} takes one name in the current directory: "
                + (f"{steps} first, then " if steps else "")
                + f"call {name} with {param}='{parts[-1]}'.",
            )
        ]
    subject = _subject(name, arguments)
    if "no such file" in lowered or "no such directory" in lowered:
        if name == "echo" and "touch" in shown:
            return [
                Hint(
                    "bfcl_create_first",
                    f"echo writes only to an existing file: create '{subject}' with "
                    "touch(file_name=...) first, then retry.",
                )
            ]
        where = "ls() lists the current directory, pwd() shows where you are"
        if "find" in shown:
            where += ", find(name=...) searches below the current directory"
        return [
            Hint(
                "bfcl_not_here",
                f"'{subject}' is not in the current directory: {where}; cd moves one folder "
                "level at a time.",
            )
        ]
    if "is a directory" in lowered:
        return [
            Hint(
                "bfcl_is_directory",
                f"'{subject}' is a directory, not a file: cd(folder='{subject}') enters it and "
                "ls() lists it.",
            )
        ]
    if "not a directory" in lowered:
        return [
            Hint(
                "bfcl_not_directory",
                f"{name}'s destination names a file, not a directory: give a new name, or the "
                "name of a directory in the current directory.",
            )
        ]
    if "file exists" in lowered:
        return [
            Hint(
                "bfcl_exists",
                f"'{subject}' already exists in the current directory: use it, or choose "
                "another name.",
            )
        ]
    if "directory not empty" in lowered:
        return [
            Hint(
                "bfcl_not_empty",
                "rmdir removes only an empty directory: remove what is inside it first "
                "(cd into it, rm each item, cd('..')).",
            )
        ]
    if "invalid character" in lowered:
        return [
            Hint(
                "bfcl_name",
                'A name cannot contain any of | / \\ ? % * : " > <; paths are not allowed, '
                "cd one folder level at a time.",
            )
        ]
    if "already the root" in lowered:
        return [
            Hint(
                "bfcl_root",
                "You are at the root: cd('..') cannot go higher; ls() lists its folders.",
            )
        ]
    return []


def _subject(name: str, arguments: Mapping[str, Any]) -> str:
    """The name the agent gave the file-system call (its first name argument)."""
    if name == "diff":
        return f"{arguments.get('file_name1')}' or '{arguments.get('file_name2')}"[:160]
    for param in ("file_name", "dir_name", "folder", "source", "file_name1"):
        value = arguments.get(param)
        if isinstance(value, str):
            return value[:80]
    return name
