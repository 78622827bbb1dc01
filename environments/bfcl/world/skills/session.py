"""The session a skill drafts a task in: a live copy of the world that runs each gold call
as it is planned (:class:`Session`), what a turn asks (:class:`Act`), and the wording
helpers every API family's actions share."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from environments.bfcl.apis import ERROR_PREFIX
from environments.bfcl.world.generator import EXTENSIONS, TOPICS, VERBS, WORDS
from environments.bfcl.world.state import OWNER, PEOPLE, TABLE
from environments.bfcl.world.tools import toolkit_class
from rods_env.database import Database
from rods_env.domain import Draft, SkillUnavailable
from rods_env.gold import GoldRun
from rods_env.registry import load_domain
from rods_env.task import ToolCall, Turn, UserProfile

LOGINS: Mapping[str, str] = {
    "TwitterAPI": "authenticated", "MessageAPI": "current_user", "TicketAPI": "current_user",
    "TradingBot": "authenticated", "TravelAPI": "access_token",
}  # fmt: skip
"""The public field that says a service has someone logged in."""


class _Unread:
    """Marks a value not read from the world yet."""


UNREAD = _Unread()


@dataclass
class Act:
    """What one turn asks: the request, the values to say, and the facts it states.

    Attributes:
        request: The user's message.
        outputs: Values the agent must say in its reply.
        facts: Fact label to the value the request states (the user can tell it again).
    """

    request: str
    outputs: tuple[str, ...] = ()
    facts: dict[str, str] = field(default_factory=dict)


class Session:
    """A live copy of the world while a skill drafts a task: runs each gold call as it is
    planned and records it in the current turn.

    Args:
        db: The world the task is drawn on (not changed: the session works on a fork).
        rng: The skill's generator.
        shape: The complete shape so far (read for structural choices, added to).
    """

    def __init__(self, db: Database, rng: random.Random, shape: dict[str, int]) -> None:
        self.origin = db  # the state the task starts from (a conversation's, when composed)
        self.db = db.fork()
        self.tools = toolkit_class()(self.db)
        self.tools.on_reset()
        # the calls run as a gold replay runs them: the draft hands its gold over (the
        # domain through the registry: it is built from this module's skills)
        self.run = GoldRun(load_domain("bfcl-api"), self.db, self.tools)
        self.person = db.get(PEOPLE, OWNER)
        self.rng = rng
        self.shape = shape
        self.calls: list[ToolCall] = []
        self.turns: list[Turn] = []
        self.facts: dict[str, str] = {}
        self._folder: str | _Unread | None = UNREAD  # read from the file system when asked
        self.logged: set[str] = set()
        self.token: str | None = None  # the travel access token, once known
        self.booking: tuple[str, str] | None = None  # (booking id, card) booked in this task
        self.turn = 0

    @property
    def folder(self) -> str | None:
        """The file system's current top-level folder (None: home). A task drawn on a fresh
        world starts at home; a request added to a conversation starts where the earlier
        requests left the file system."""
        if isinstance(self._folder, _Unread):
            fs = self.live("GorillaFileSystem")
            cwd = fs._current_dir
            if cwd is fs.root:
                self._folder = None
            elif cwd.parent is fs.root:
                self._folder = str(cwd.name)
            else:
                raise SkillUnavailable("the file system is in a nested folder")
        return self._folder

    @folder.setter
    def folder(self, value: str | None) -> None:
        self._folder = value

    def _states(self, api: str) -> tuple[Any, Any]:
        """The public state of ``api`` as the conversation left it and as the world began
        (the same object when nothing changed it, as in a task of its own)."""
        now = self.origin.get(TABLE, api)
        start = self.origin.base[TABLE].get(api)
        return now, start

    def logged_earlier(self, api: str) -> bool:
        """Whether an earlier request of the conversation this request is added to logged
        in to ``api`` (its log-in field changed and is set)."""
        now, start = self._states(api)
        if now is None or start is None or now is start:
            return False
        field = LOGINS[api]
        value = now.state.get(field)
        return bool(value) and value != start.state.get(field)

    def created(self, api: str, field: str) -> list[Any]:
        """Entries of the listing ``field`` of ``api`` that the conversation this request is
        added to created: keys of a dict not in the world as it began, or items of a list
        of records whose ``id`` was not."""
        now, start = self._states(api)
        if now is None or start is None or now is start:
            return []
        listing, before = now.state.get(field), start.state.get(field)
        if isinstance(listing, dict):
            return [k for k in listing if k not in before]
        if isinstance(listing, list):
            ids = {item.get("id") for item in before if isinstance(item, dict)}
            return [i for i in listing if isinstance(i, dict) and i.get("id") not in ids]
        return []

    def the_new(self, api: str, field: str, what: str) -> Any:
        """The one entry of ``field`` that the conversation created (see :meth:`created`);
        raises when there is none or several (the request could not say which)."""
        new = self.created(api, field)
        if len(new) != 1:
            raise SkillUnavailable(f"no single {what} made earlier in the conversation")
        return new[0]

    def earlier_booking(self) -> tuple[str, str] | None:
        """The one flight booked earlier in the conversation this request is added to, as
        ``(booking id, card)`` (None: none, or several, or a task of its own)."""
        new = self.created("TravelAPI", "booking_record")
        if len(new) != 1:
            return None
        record = self.origin.get(TABLE, "TravelAPI")
        return new[0], str(record.state["booking_record"][new[0]]["card_id"])

    # -- state and calls -------------------------------------------------------------------
    def live(self, api: str) -> Any:
        """The live instance of ``api`` (read it; never change it directly)."""
        return self.tools.instance(api)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Run a gold call now and record it; an error result rules the draft out."""
        result = self.run.call(name, arguments)
        value = result.value
        bad = not result.ok or (isinstance(value, str) and value.startswith(ERROR_PREFIX))
        if isinstance(value, dict) and ("error" in value or value.get("booking_status") is False):
            bad = True
        if isinstance(value, list) and value and isinstance(value[0], dict) and "error" in value[0]:
            bad = True
        if bad:
            shown = result.output
            raise SkillUnavailable(f"{name}({arguments}) gives {shown[:120]}")
        self.calls.append(ToolCall(name=name, arguments=arguments))
        return value

    def choice(self, key: str, n: int) -> int:
        """Structural choice ``key`` among ``n``: from the shape, else drawn and recorded."""
        if key not in self.shape:
            self.shape[key] = self.rng.randrange(n)
        return self.shape[key] % n

    def end_turn(self, act: Act) -> None:
        """Close the turn with its request and the calls made since the last one."""
        for label, value in act.facts.items():  # the first value a label named stays
            self.facts.setdefault(label, value)
        turn = Turn(request=act.request, calls=tuple(self.calls), outputs=act.outputs)
        self.run.end_turn(turn)
        self.turns.append(turn)
        self.calls = []
        self.turn += 1

    def pick(self, options: Sequence[str]) -> str:
        """One of ``options`` (a phrasing, not a structural choice)."""
        return options[self.rng.randrange(len(options))]

    def draft(self) -> Draft:
        """The task drafted so far, its gold handed over; raises when no turn made a call."""
        if not any(turn.calls for turn in self.turns):
            raise SkillUnavailable("no calls")
        return Draft(
            user=UserProfile(name=self.person.name, facts=dict(self.facts)),
            turns=tuple(self.turns),
            shape=self.shape,
            gold=self.run.gold(),
        )

    # -- logins ----------------------------------------------------------------------------
    def login(self, api: str, logged_in: bool) -> bool:
        """Whether this turn logs in to ``api`` (shape ``l<turn>``); raises when it does not
        and the world has the user logged out."""
        if api in self.logged:
            return False
        if self.logged_earlier(api):  # the conversation logged in already
            self.logged.add(api)
            return False
        wants = self.choice(f"l{self.turn}", 3) > 0  # two in three turns log in
        if not wants and not logged_in:
            raise SkillUnavailable(f"{api}: the user is logged out and the turn does not log in")
        self.logged.add(api)
        return wants

    # -- the file system -------------------------------------------------------------------
    def folders(self) -> list[tuple[str, Any]]:
        """Top-level folders of the home directory (name, directory), sorted."""
        root = self.live("GorillaFileSystem").root
        return sorted((n, d) for n, d in root.contents.items() if type(d).__name__ == "Directory")

    def go(self, folder: str) -> None:
        """Go to top-level ``folder`` (from home, or from another top-level folder)."""
        if self.folder == folder:
            raise SkillUnavailable("already in that folder")
        if self.folder is not None:
            self.call("cd", folder="..")
        self.call("cd", folder=folder)
        self.folder = folder

    def folder_with_files(
        self, need: int = 1, ext: str | tuple[str, ...] | None = None
    ) -> tuple[str, list[str]]:
        """A top-level folder (not the current one) with at least ``need`` files, and its
        files, sorted."""
        options = []
        for name, d in self.folders():
            files = sorted(
                n
                for n, item in d.contents.items()
                if type(item).__name__ == "File" and (ext is None or n.endswith(ext))
            )
            if name != self.folder and len(files) >= need:
                options.append((name, files))
        if not options:
            raise SkillUnavailable("no folder with enough files")
        return self.rng.choice(options)

    def file_in_folder(
        self, need: int = 1, ext: str | tuple[str, ...] | None = None
    ) -> tuple[str, str]:
        """A file drawn from a folder drawn as :meth:`folder_with_files` draws it."""
        folder, files = self.folder_with_files(need, ext)
        return folder, self.rng.choice(files)

    def new_name(self, folder: str, pool: Sequence[str], suffix: str = "") -> str:
        """A name from ``pool`` (plus ``suffix``) not yet in ``folder``."""
        contents = dict(self.folders())[folder].contents
        options = [f"{p}{suffix}" for p in pool if f"{p}{suffix}" not in contents]
        if not options:
            raise SkillUnavailable("no free name")
        return self.rng.choice(options)

    def content(self, folder: str, file: str) -> str:
        """The content of ``file`` in top-level ``folder``."""
        return str(dict(self.folders())[folder].contents[file].content)

    def kinds(self) -> list[tuple[str, str, list[str], int]]:
        """Each top-level folder but the current one, with each file extension: ``(folder,
        extension, the folder's files of that extension sorted, how many files it holds)``."""
        found = []
        for name, d in self.folders():
            files = [n for n, i in d.contents.items() if type(i).__name__ == "File"]
            for ext in EXTENSIONS:
                hits = sorted(f for f in files if f.endswith(ext))
                if name != self.folder:
                    found.append((name, ext, hits, len(files)))
        return found

    def save(self, file: str, content: str) -> None:
        """Create ``file`` in the current folder and write ``content`` in it."""
        self.call("touch", file_name=file)
        self.call("echo", content=content, file_name=file)


Action = Callable[[Session, int], Act]


def gerund(verb: str) -> str:
    """``review`` -> ``reviewing``, ``update`` -> ``updating``."""
    return (verb[:-1] if verb.endswith("e") else verb) + "ing"


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(VERBS).capitalize()} {rng.choice(TOPICS)} by {rng.choice(WORDS)}"


def quoted(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def led(lead: str, body: str) -> str:
    """A request: ``lead`` (a log-in, or nothing) then ``body``, capitalized when alone."""
    return lead + body if lead else body[0].upper() + body[1:]
