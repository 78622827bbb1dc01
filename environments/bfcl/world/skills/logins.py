"""Logging in: one helper for every API that a request may log in to first.

Whether a turn logs in is a structural choice (shape ``l<turn>``, :meth:`Session.login`).
Where it does, the call goes into the gold, the credentials become facts the user can
repeat, and the request opens with them; the travel API's log-in also leaves the access
token that later calls take.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from environments.bfcl.world.skills.session import Session


@dataclass(frozen=True)
class Login:
    """How a request logs in to one API with the user's credentials.

    Attributes:
        function: The log-in function.
        logged_in: ``(session, live API) ->`` whether the user is logged in already.
        credentials: ``(session, live API) ->`` the log-in call's arguments.
        facts: Fact label to the argument the user can tell again.
        leads: The request's openings, formatted with the arguments.
    """

    function: str
    logged_in: Callable[[Session, Any], bool]
    credentials: Callable[[Session, Any], dict[str, Any]]
    facts: Mapping[str, str]
    leads: tuple[str, ...]


USER_PASSWORD = {"username": "username", "password": "password"}

LOGIN_FORMS: Mapping[str, Login] = {
    "TwitterAPI": Login(
        "authenticate_twitter",
        lambda s, tw: tw.authenticated,
        lambda s, tw: {"username": tw.username, "password": tw.password},
        USER_PASSWORD,
        (
            "Log in to Twitter as {username} with password {password}, then ",
            "My Twitter login is {username} / {password}. ",
        ),
    ),
    "MessageAPI": Login(
        "message_login",
        lambda s, msg: bool(msg.current_user),
        lambda s, msg: {"user_id": s.person.message_id},
        {"user id": "user_id"},
        ("Log me in to messages as {user_id}, then ", "My user id is {user_id}; "),
    ),
    "TicketAPI": Login(
        "ticket_login",
        lambda s, tk: tk.current_user == s.person.ticket_user,
        lambda s, tk: {"username": s.person.ticket_user, "password": s.person.ticket_password},
        USER_PASSWORD,
        (
            "Log in to the ticket system as {username} (password {password}), then ",
            "With my ticket account {username} / {password}, ",
        ),
    ),
    "TradingBot": Login(
        "trading_login",
        lambda s, tr: tr.authenticated,
        lambda s, tr: {"username": s.person.trading_user, "password": s.person.trading_password},
        USER_PASSWORD,
        (
            "Log in to my trading account ({username}, password {password}) and ",
            "Sign in as {username} with {password}, then ",
        ),
    ),
}
"""The log-in of each API that takes a user's credentials (travel takes a token)."""


def log_in(s: Session, api: str) -> str:
    """Log in to ``api`` if this turn does: returns the request's opening that gives the
    credentials, or "" where the turn does not log in (the user is logged in already, or
    an earlier turn of the conversation logged in)."""
    if api == "TravelAPI":
        return _travel_login(s)
    form = LOGIN_FORMS[api]
    live = s.live(api)
    if not s.login(api, form.logged_in(s, live)):
        return ""
    arguments = form.credentials(s, live)
    s.call(form.function, **arguments)
    for label, argument in form.facts.items():
        s.facts.setdefault(label, arguments[argument])
    return s.pick(tuple(lead.format(**arguments) for lead in form.leads))


def _travel_login(s: Session) -> str:
    """The travel log-in: with the client's credentials, or by the access token the user
    holds; either way ``s.token`` is the token afterwards."""
    tv = s.live("TravelAPI")
    if s.token is not None:
        return ""
    if s.logged_earlier("TravelAPI"):  # the agent has the conversation's token
        s.logged.add("TravelAPI")
        s.token = str(tv.access_token)
        return ""
    p = s.person
    if s.login("TravelAPI", tv.access_token is not None):
        out = s.call(
            "authenticate_travel",
            client_id=p.travel_client_id,
            client_secret=p.travel_secret,
            refresh_token=p.travel_refresh,
            grant_type="read_write",
            user_first_name=p.first,
            user_last_name=p.last,
        )
        s.token = out["access_token"]
        for label, value in (("client id", p.travel_client_id),
                             ("client secret", p.travel_secret),
                             ("refresh token", p.travel_refresh)):  # fmt: skip
            s.facts.setdefault(label, value)
        return (
            f"Log me in to the travel system (client id {p.travel_client_id}, secret "
            f"{p.travel_secret}, refresh token {p.travel_refresh}, full read_write access, "
            f"name {p.first} {p.last}). Then "
        )
    s.token = str(tv.access_token)
    s.facts.setdefault("access token", s.token)
    return f"My travel access token is {s.token}. "
