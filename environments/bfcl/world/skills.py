"""Skills of the BFCL API world: multi-turn tasks over one to three API classes.

A skill drafts a task turn by turn. Each turn is one *action* (posting a tweet, moving a
file into a new folder, booking a flight, starting the car...), drawn from the skill's
pool for that turn; the action picks entities of the world that fit, words the request
with one of several phrasings, and runs its gold calls at once on a live copy of the
world (:class:`Session`), so later calls can use what earlier ones returned (a booking id,
a file's content, a stock's price, an access token).

Every structural choice is in the task's shape, so a resample with the same shape on a
fresh world has the same calls: ``turns``, ``items`` (entities of an action that takes
several: files moved, contacts messaged, symbols watched), ``a<t>`` (the action of turn
``t`` in its pool) and ``l<t>`` (whether turn ``t`` logs in to its service: where it does
not, the world must have the user logged in already).

Every task changes the state in at least one turn, and a turn that changes nothing asks
for a value the agent must say (the exploit panel then passes nothing).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from environments.bfcl.apis import ERROR_PREFIX
from environments.bfcl.world.generator import (
    EXTENSIONS,
    STEMS,
    STOCK_POOL,
    SUBFOLDERS,
    TOPICS,
    VERBS,
    WORDS,
)
from environments.bfcl.world.state import OWNER, PEOPLE, TABLE
from environments.bfcl.world.tools import toolkit_class
from rods_env.database import Database
from rods_env.domain import Draft, Skill, SkillUnavailable
from rods_env.gold import GoldRun
from rods_env.registry import load_domain
from rods_env.task import ToolCall, Turn, UserProfile

ROUTES: frozenset[tuple[str, str]] = frozenset({
    ("SFO", "LAX"), ("SFO", "JFK"), ("SFO", "ORD"), ("SFO", "BOS"), ("LAX", "SFO"),
    ("LAX", "JFK"), ("LAX", "ORD"), ("LAX", "BOS"), ("JFK", "ORD"), ("JFK", "BOS"),
    ("JFK", "LAX"), ("ORD", "LAX"), ("ORD", "BOS"), ("RMS", "BOS"), ("RMS", "JFK"),
    ("SBK", "MPC"), ("SBK", "SVP"), ("MPC", "SVP"), ("SVP", "SHD"), ("SHD", "SSV"),
    ("SSV", "OKD"), ("OKD", "WLB"), ("WLB", "CRH"), ("CRH", "ATV"), ("ATV", "PHV"),
    ("PHV", "GFD"), ("CRH", "SFO"), ("OKD", "LAX"), ("BOS", "RMS"), ("ORD", "RMS"),
})  # fmt: skip
"""Routes the travel API prices (``get_flight_cost``'s table; a subset)."""

CITY_AIRPORT: Mapping[str, str] = {
    "Rivermist": "RMS", "Stonebrook": "SBK", "Maplecrest": "MPC", "Silverpine": "SVP",
    "Shadowridge": "SHD", "Sunset Valley": "SSV", "Oakendale": "OKD", "Willowbend": "WLB",
    "Crescent Hollow": "CRH", "Autumnville": "ATV", "Pinehaven": "PHV", "Greenfield": "GFD",
    "San Francisco": "SFO", "Los Angeles": "LAX", "New York": "JFK", "Chicago": "ORD",
    "Boston": "BOS",
}  # fmt: skip
ZIP_CITIES = (
    "Rivermist", "Stonebrook", "Maplecrest", "Silverpine", "Shadowridge", "Sunset Valley",
    "Oakendale", "Willowbend", "Crescent Hollow", "Autumnville", "San Francisco",
)  # fmt: skip
CURRENCIES = ("EUR", "GBP", "CAD", "AUD", "JPY")
NEW_NAMES = (
    "Harriet", "Osvaldo", "Priyanka", "Tobias", "Leonie", "Marek", "Ingrid", "Caspian",
    "Delphine", "Rafferty", "Soraya", "Anselm",
)  # fmt: skip


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


def gerund(verb: str) -> str:
    """``review`` -> ``reviewing``, ``update`` -> ``updating``."""
    return (verb[:-1] if verb.endswith("e") else verb) + "ing"


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(VERBS).capitalize()} {rng.choice(TOPICS)} by {rng.choice(WORDS)}"


def _quoted(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# -- file system ---------------------------------------------------------------------------
def fs_note(s: Session, items: int) -> Act:
    folder, _ = s.folder_with_files(0)
    name = s.new_name(folder, STEMS, s.rng.choice(EXTENSIONS[:2]))
    text = _sentence(s.rng)
    s.go(folder)
    s.call("touch", file_name=name)
    s.call("echo", content=text, file_name=name)
    request = s.pick((
        f"In {folder}, create {name} and write '{text}' in it.",
        f"Please go into {folder}, make a new file {name} and put '{text}' inside.",
        f"I need a note called {name} in {folder} saying '{text}'.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": name, "text": text})


def fs_organize(s: Session, items: int) -> Act:
    """Move every file of one kind in a folder (found by listing it) into a new folder."""
    options = []
    for name, d in s.folders():
        files = [n for n, i in d.contents.items() if type(i).__name__ == "File"]
        for ext in EXTENSIONS:
            hits = sorted(f for f in files if f.endswith(ext))
            if name != s.folder and len(hits) == items and len(files) > len(hits):
                options.append((name, ext, hits))
    if not options:
        raise SkillUnavailable(f"no folder with exactly {items} files of one kind")
    folder, ext, moved = s.rng.choice(options)
    new = s.new_name(folder, [*SUBFOLDERS, *WORDS])
    s.go(folder)
    s.call("ls")
    s.call("mkdir", dir_name=new)
    for f in moved:
        s.call("mv", source=f, destination=new)
    kind = ext[1:]  # "csv": a word, where ".csv" would read as stray punctuation
    request = s.pick((
        f"Inside {folder}, make a folder called {new} and move all the {kind} files into it.",
        f"Tidy up {folder}: create a subfolder {new} and put every {kind} file in there.",
        f"Could you gather the {kind} files of {folder} into a new folder named {new}?",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "new folder": new})


def fs_copy(s: Session, items: int) -> Act:
    folder, files = s.folder_with_files(1)
    file = s.rng.choice(files)
    stem, _, ext = file.rpartition(".")
    copy = s.new_name(folder, [f"{stem}_{w}" for w in ("copy", "backup", "v2", "old")], "." + ext)
    s.go(folder)
    s.call("cp", source=file, destination=copy)
    request = s.pick((
        f"Make a copy of {file} in {folder} and call it {copy}.",
        f"Duplicate {file} (it's in {folder}) as {copy}.",
        f"In {folder}, copy {file} to {copy}, please.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "copy name": copy})


def fs_rename(s: Session, items: int) -> Act:
    folder, files = s.folder_with_files(1)
    file = s.rng.choice(files)
    ext = "." + file.rpartition(".")[2]
    new = s.new_name(folder, [f"{w}_{st}" for w in WORDS[:6] for st in STEMS[:4]], ext)
    s.go(folder)
    s.call("mv", source=file, destination=new)
    request = s.pick((
        f"Rename {file} in {folder} to {new}.",
        f"Over in {folder}, {file} should be called {new} from now on.",
        f"Change the name of {file} ({folder} folder) to {new}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "new name": new})


def fs_remove(s: Session, items: int) -> Act:
    folder, files = s.folder_with_files(2)
    file = s.rng.choice(files)
    s.go(folder)
    s.call("rm", file_name=file)
    request = s.pick((
        f"Delete {file} from {folder}; I don't need it anymore.",
        f"Please remove {file} in {folder}.",
        f"Get rid of {file}, it's in {folder}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file})


def fs_count(s: Session, items: int) -> Act:
    folder, files = s.folder_with_files(1)
    file = s.rng.choice(files)
    mode, unit = s.rng.choice((("l", "lines"), ("w", "words"), ("c", "characters")))
    out = s.new_name(folder, [f"{w}_count" for w in ("line", "word", "char", "total")], ".txt")
    s.go(folder)
    count = s.call("wc", file_name=file, mode=mode)["count"]
    s.call("touch", file_name=out)
    s.call("echo", content=str(count), file_name=out)
    request = s.pick((
        f"How many {unit} does {file} in {folder} have? Save just the number in a new file "
        f"{out} and tell me.",
        f"Count the {unit} of {file} (in {folder}), write the count alone into {out} there, "
        "and let me know what it is.",
    ))  # fmt: skip
    return Act(request, outputs=(str(count),), facts={"folder": folder, "file": file})


def fs_sorted(s: Session, items: int) -> Act:
    folder, files = s.folder_with_files(1, (".txt", ".md"))
    file = s.rng.choice(files)
    out = s.new_name(
        folder, [f"{file.rpartition('.')[0]}_{w}" for w in ("sorted", "ordered")], ".txt"
    )
    s.go(folder)
    content = s.call("sort", file_name=file)["sorted_content"]
    s.call("touch", file_name=out)
    s.call("echo", content=content, file_name=out)
    request = s.pick((
        f"Sort the lines of {file} in {folder} and save the sorted text as {out}.",
        f"In {folder}, put the lines of {file} in order and store them in a new file {out}.",
    ))  # fmt: skip
    return Act(request, facts={"folder": folder, "file": file, "new file": out})


def fs_list(s: Session, items: int) -> Act:
    """A read turn: the files of a folder with one extension (others compete)."""
    options = []
    for name, d in s.folders():
        files = [n for n, i in d.contents.items() if type(i).__name__ == "File"]
        for ext in EXTENSIONS:
            hits = sorted(f for f in files if f.endswith(ext))
            if name != s.folder and hits and len(files) - len(hits) >= 2:
                options.append((name, ext, hits))
    if not options:
        raise SkillUnavailable("no folder mixes file kinds")
    folder, ext, hits = s.rng.choice(options)
    s.go(folder)
    s.call("ls")
    request = s.pick((
        f"Which {ext[1:]} files are in {folder}? Just name them.",
        f"List the {ext[1:]} files I have in {folder}.",
    ))  # fmt: skip
    return Act(request, outputs=tuple(hits), facts={"folder": folder})


def fs_stats(s: Session, items: int) -> Act:
    """Mean of a CSV column, saved to a file (MathAPI)."""
    folder, files = s.folder_with_files(1, ".csv")
    file = s.rng.choice(files)
    rows = [r.split(", ") for r in s.content(folder, file).splitlines()[1:]]
    column, label = s.rng.choice(((1, "qty"), (2, "price")))
    numbers = [float(r[column]) for r in rows]
    out = s.new_name(folder, [f"{label}_{w}" for w in ("mean", "average", "avg")], ".txt")
    s.go(folder)
    s.call("cat", file_name=file)
    mean = s.call("mean", numbers=numbers)["result"]
    s.call("touch", file_name=out)
    s.call("echo", content=str(mean), file_name=out)
    request = s.pick((
        f"What's the average {label} in {file} in {folder}? Write it into a new file {out} "
        "there and tell me the value.",
        f"Work out the mean of the {label} column of {file} ({folder}), save it as {out}, "
        "and tell me what it is.",
    ))  # fmt: skip
    return Act(request, outputs=(str(mean),), facts={"folder": folder, "file": file})


def file_text(s: Session) -> tuple[str, str, str]:
    """Read a short text file (folder, file, content) for a cross-class action."""
    folder, files = s.folder_with_files(1, (".txt", ".md"))
    file = s.rng.choice(files)
    s.go(folder)
    content = s.call("cat", file_name=file)["file_content"]
    return folder, file, content


# -- twitter -------------------------------------------------------------------------------
def _twitter_login(s: Session) -> str:
    tw = s.live("TwitterAPI")
    if s.login("TwitterAPI", tw.authenticated):
        s.call("authenticate_twitter", username=tw.username, password=tw.password)
        s.facts.setdefault("username", tw.username)
        s.facts.setdefault("password", tw.password)
        return s.pick(
            (
                f"Log in to Twitter as {tw.username} with password {tw.password}, then ",
                f"My Twitter login is {tw.username} / {tw.password}. ",
            )
        )
    return ""


def tw_post(s: Session, items: int) -> Act:
    tw = s.live("TwitterAPI")
    text = f"{gerund(s.rng.choice(VERBS)).capitalize()} {s.rng.choice(TOPICS)} today!"
    tags = sorted(s.rng.sample(["#work", "#life", "#plans", "#team", "#notes"], 2))
    mentions = sorted({t["username"] for t in tw.tweets.values()} - {tw.username})[:1]
    lead = _twitter_login(s)
    s.call("post_tweet", content=text, tags=tags, mentions=mentions)
    extra = f" and mention {mentions[0]}" if mentions else ""
    body = s.pick((
        f"post '{text}' with the tags {tags[0]} and {tags[1]}{extra}.",
        f"tweet '{text}', tagged {tags[0]} and {tags[1]}{extra}.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    facts = {"tweet": text}
    return Act(request, facts=facts)


def _tweet_by_word(s: Session) -> tuple[str, dict[str, Any]]:
    tw = s.live("TwitterAPI")
    words: dict[str, list[int]] = {}
    for tid, t in tw.tweets.items():
        for w in set(str(t["content"]).lower().replace("!", "").split()):
            if len(w) > 5:
                words.setdefault(w, []).append(tid)
    unique = sorted(w for w, ids in words.items() if len(ids) == 1)
    if not unique:
        raise SkillUnavailable("no tweet has a word of its own")
    word = s.rng.choice(unique)
    return word, tw.tweets[words[word][0]]


def tw_comment(s: Session, items: int) -> Act:
    word, tweet = _tweet_by_word(s)
    text = s.pick(("Great news, congrats!", "Count me in.", "Love this, well done!"))
    lead = _twitter_login(s)
    s.call("search_tweets", keyword=word)
    s.call("comment", tweet_id=tweet["id"], comment_content=text)
    body = s.pick((
        f"find the tweet that mentions '{word}' and comment '{text}' on it.",
        f"reply to the tweet about '{word}' with the comment '{text}'.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"keyword": word, "comment": text})


def tw_follow(s: Session, items: int) -> Act:
    tw = s.live("TwitterAPI")
    options = sorted(
        {f"{w}_{n}" for w in WORDS[:12] for n in ("news", "daily")} - set(tw.following_list)
    )
    handles = sorted(s.rng.sample(options, items))
    lead = _twitter_login(s)
    for h in handles:
        s.call("follow_user", username_to_follow=h)
    body = s.pick(
        (f"follow {_quoted(handles)} on Twitter.", f"start following {_quoted(handles)}.")
    )
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"account": handles[0]})


def tw_retweet(s: Session, items: int) -> Act:
    word, tweet = _tweet_by_word(s)
    lead = _twitter_login(s)
    s.call("search_tweets", keyword=word)
    s.call("retweet", tweet_id=tweet["id"])
    body = s.pick(
        (f"retweet the tweet about '{word}'.", f"share the '{word}' tweet with a retweet.")
    )
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"keyword": word})


def tw_share_file(s: Session, items: int) -> Act:
    folder, file, content = file_text(s)
    if len(content) > 200:
        raise SkillUnavailable("too long for a tweet")
    lead = _twitter_login(s)
    s.call("post_tweet", content=content)
    body = s.pick((
        f"post the content of {file} from {folder} as a tweet.",
        f"tweet exactly what {file} in {folder} says.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"folder": folder, "file": file})


# -- messages ------------------------------------------------------------------------------
def _message_login(s: Session) -> str:
    msg = s.live("MessageAPI")
    if s.login("MessageAPI", bool(msg.current_user)):
        uid = s.person.message_id
        s.call("message_login", user_id=uid)
        s.facts.setdefault("user id", uid)
        return s.pick((f"Log me in to messages as {uid}, then ", f"My user id is {uid}; "))
    return ""


def _contacts(s: Session, n: int) -> list[str]:
    msg = s.live("MessageAPI")
    names = sorted(n for n in msg.user_map if n != s.person.first)
    if len(names) < n:
        raise SkillUnavailable("not enough contacts")
    return sorted(s.rng.sample(names, n))


def msg_send(s: Session, items: int) -> Act:
    names = _contacts(s, items)
    text = _sentence(s.rng)
    lead = _message_login(s)
    for name in names:
        uid = s.call("get_user_id", user=name)["user_id"]
        s.call("send_message", receiver_id=uid, message=text)
    body = s.pick((
        f"send {_quoted(names)} the message '{text}'.",
        f"message {_quoted(names)}: '{text}'.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"recipient": names[0], "message": text})


def msg_new_contact(s: Session, items: int) -> Act:
    msg = s.live("MessageAPI")
    name = s.rng.choice([n for n in NEW_NAMES if n not in msg.user_map])
    text = _sentence(s.rng)
    lead = _message_login(s)
    uid = s.call("add_contact", user_name=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=text)
    body = s.pick((
        f"add {name} as a new contact and send them '{text}'.",
        f"save {name} to my contacts, then message them '{text}'.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"contact": name, "message": text})


def msg_unsend(s: Session, items: int) -> Act:
    msg = s.live("MessageAPI")
    ids = {v: k for k, v in msg.user_map.items()}
    received = sorted(
        {ids[next(iter(m))] for m in msg.inbox if next(iter(m)) in ids} - {s.person.first}
    )
    if not received:
        raise SkillUnavailable("no message to delete")
    name = s.rng.choice(received)
    lead = _message_login(s)
    s.call("view_messages_sent")
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("delete_message", receiver_id=uid)
    body = s.pick((
        f"look at the messages I've sent and delete the last one to {name}.",
        f"go through my sent messages and take back my latest one to {name}.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"recipient": name})


def msg_share_file(s: Session, items: int) -> Act:
    folder, file, content = file_text(s)
    name = _contacts(s, 1)[0]
    lead = _message_login(s)
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=content)
    body = s.pick((
        f"send {name} the content of {file} from {folder} as a message.",
        f"message {name} exactly what {file} in {folder} says.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"folder": folder, "file": file, "recipient": name})


# -- tickets -------------------------------------------------------------------------------
def _ticket_login(s: Session) -> str:
    tk = s.live("TicketAPI")
    if s.login("TicketAPI", tk.current_user == s.person.ticket_user):
        user, pw = s.person.ticket_user, s.person.ticket_password
        s.call("ticket_login", username=user, password=pw)
        s.facts.setdefault("username", user)
        s.facts.setdefault("password", pw)
        return s.pick(
            (
                f"Log in to the ticket system as {user} (password {pw}), then ",
                f"With my ticket account {user} / {pw}, ",
            )
        )
    return ""


def tk_open(s: Session, items: int) -> Act:
    title = s.pick(("Desk lamp broken", "Need a second monitor", "Parking pass expired",
                    "Chair squeaks", "Cannot print in color", "Locker key lost"))  # fmt: skip
    desc = f"{title}. {_sentence(s.rng)}."
    priority = s.rng.randint(1, 5)
    lead = _ticket_login(s)
    s.call("create_ticket", title=title, description=desc, priority=priority)
    body = s.pick((
        f"open a ticket titled '{title}' with the description '{desc}' and priority {priority}.",
        f"file a priority {priority} ticket, title '{title}', description '{desc}'.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"ticket title": title, "description": desc})


def _own_ticket(s: Session, statuses: Sequence[str]) -> dict[str, Any]:
    tk = s.live("TicketAPI")
    mine = [
        t for t in tk.ticket_queue
        if t["created_by"] == s.person.ticket_user and t["status"] in statuses
    ]  # fmt: skip
    if not mine:
        raise SkillUnavailable("no ticket of the user in that status")
    return dict(s.rng.choice(sorted(mine, key=lambda t: t["id"])))


def tk_close(s: Session, items: int) -> Act:
    ticket = _own_ticket(s, ("Open", "In Progress"))
    lead = _ticket_login(s)
    s.call("get_user_tickets")
    s.call("close_ticket", ticket_id=ticket["id"])
    body = s.pick((
        f"close my ticket '{ticket['title']}'.",
        f"my ticket about '{ticket['title']}' can be closed now.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"ticket title": ticket["title"]})


def tk_resolve(s: Session, items: int) -> Act:
    ticket = _own_ticket(s, ("Open", "In Progress"))
    note = s.pick(("Replaced the cable.", "Restarted the device.", "Updated the driver."))
    s.call("resolve_ticket", ticket_id=ticket["id"], resolution=note)
    request = s.pick((
        f"Mark ticket {ticket['id']} as resolved with the note '{note}'.",
        f"Resolve ticket {ticket['id']}; resolution: '{note}'.",
    ))  # fmt: skip
    return Act(request, facts={"ticket id": str(ticket["id"]), "resolution": note})


def tk_priority(s: Session, items: int) -> Act:
    ticket = _own_ticket(s, ("Open", "In Progress"))
    priority = s.rng.choice([p for p in range(1, 6) if p != ticket["priority"]])
    s.call("get_ticket", ticket_id=ticket["id"])
    s.call("edit_ticket", ticket_id=ticket["id"], updates={"priority": priority})
    request = s.pick((
        f"Change the priority of ticket {ticket['id']} to {priority}.",
        f"Ticket {ticket['id']} should have priority {priority} now.",
    ))  # fmt: skip
    return Act(request, facts={"ticket id": str(ticket["id"])})


def tk_file(s: Session, items: int) -> Act:
    folder, file, content = file_text(s)
    title = f"Notes from {file}"
    lead = _ticket_login(s)
    s.call("create_ticket", title=title, description=content)
    body = s.pick((
        f"open a ticket titled '{title}' whose description is the content of {file} in {folder}.",
        f"create a ticket '{title}' and use what {file} ({folder}) says as its description.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"folder": folder, "file": file, "ticket title": title})


# -- trading -------------------------------------------------------------------------------
def _trading_login(s: Session) -> str:
    tr = s.live("TradingBot")
    if s.login("TradingBot", tr.authenticated):
        user, pw = s.person.trading_user, s.person.trading_password
        s.call("trading_login", username=user, password=pw)
        s.facts.setdefault("username", user)
        s.facts.setdefault("password", pw)
        return s.pick(
            (
                f"Log in to my trading account ({user}, password {pw}) and ",
                f"Sign in as {user} with {pw}, then ",
            )
        )
    return ""


def tr_buy(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    amount = s.rng.randint(2, 9)
    options = sorted(
        sym for sym, st in tr.stocks.items() if st["price"] * amount < tr.account_info["balance"]
    )
    if not options:
        raise SkillUnavailable("nothing affordable")
    sym = s.rng.choice(options)
    lead = _trading_login(s)
    price = s.call("get_stock_info", symbol=sym)["price"]
    s.call("place_order", order_type="Buy", symbol=sym, price=price, amount=amount)
    body = s.pick((
        f"buy {amount} shares of {sym} at the current price.",
        f"place a Buy order for {amount} {sym} shares at today's market price.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"stock symbol": sym})


def tr_buy_name(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    amount = s.rng.randint(2, 9)
    options = sorted(
        sym for sym, st in tr.stocks.items()
        if sym in STOCK_POOL and st["price"] * amount < tr.account_info["balance"]
    )  # fmt: skip
    if not options:
        raise SkillUnavailable("no company stock affordable")
    sym = s.rng.choice(options)
    company = STOCK_POOL[sym]
    lead = _trading_login(s)
    s.call("get_symbol_by_name", name=company)
    price = s.call("get_stock_info", symbol=sym)["price"]
    s.call("place_order", order_type="Buy", symbol=sym, price=price, amount=amount)
    body = s.pick((
        f"buy {amount} shares of {company} at the current price.",
        f"I'd like {amount} {company} shares, bought at market price.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"company": company})


def tr_watch(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    options = sorted(set(tr.stocks) - set(tr.watch_list))
    if len(options) < items:
        raise SkillUnavailable("nothing to watch")
    syms = sorted(s.rng.sample(options, items))
    for sym in syms:
        s.call("add_to_watchlist", stock=sym)
    request = s.pick((
        f"Add {_quoted(syms)} to my watchlist.",
        f"Put {_quoted(syms)} on my stock watchlist, please.",
    ))  # fmt: skip
    return Act(request, facts={"stock symbol": syms[0]})


def tr_unwatch(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    if not tr.watch_list:
        raise SkillUnavailable("empty watchlist")
    sym = s.rng.choice(sorted(tr.watch_list))
    lead = _trading_login(s)
    s.call("remove_stock_from_watchlist", symbol=sym)
    body = s.pick((f"take {sym} off my watchlist.", f"remove {sym} from the watchlist."))
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"stock symbol": sym})


def tr_cancel(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    open_ = sorted(o for o, d in tr.orders.items() if d["status"] in ("Pending", "Open"))
    if not open_:
        raise SkillUnavailable("no open order")
    oid = s.rng.choice(open_)
    lead = _trading_login(s)
    s.call("get_order_history")
    s.call("get_order_details", order_id=oid)
    s.call("cancel_order", order_id=oid)
    body = s.pick((
        f"check my order history and cancel order {oid}.",
        f"look through my orders and cancel {oid}, it's still pending.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"order id": str(oid)})


def tr_deposit(s: Session, items: int) -> Act:
    amount = float(s.rng.choice((250, 500, 750, 1000, 1500, 2000)))
    lead = _trading_login(s)
    s.call("fund_account", amount=amount)
    body = s.pick((
        f"add {int(amount)} dollars to my trading account.",
        f"fund my account with {int(amount)} dollars.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request)


def tr_average(s: Session, items: int) -> Act:
    """A read turn with MathAPI: the mean price of the watchlist (many values compete)."""
    tr = s.live("TradingBot")
    if len(tr.watch_list) < 2:
        raise SkillUnavailable("watchlist too short")
    lead = _trading_login(s)
    syms = s.call("get_watchlist")["watchlist"]
    prices = [s.call("get_stock_info", symbol=sym)["price"] for sym in syms]
    mean = s.call("mean", numbers=prices)["result"]
    body = s.pick((
        "what's the average current price of the stocks on my watchlist?",
        "tell me the mean price of everything I'm watching.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, outputs=(str(mean),))


def tr_tell(s: Session, items: int) -> Act:
    """Trading to messages: send a contact a stock's price."""
    tr = s.live("TradingBot")
    sym = s.rng.choice(sorted(tr.stocks))
    name = _contacts(s, 1)[0]
    price = s.call("get_stock_info", symbol=sym)["price"]
    lead = _message_login(s)
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=str(price))
    body = s.pick((
        f"look up {sym}'s current price and message it to {name} (just the number).",
        f"send {name} the price of {sym} right now, only the number.",
    ))  # fmt: skip
    request = (lead + body) if lead else body[0].upper() + body[1:]
    return Act(request, facts={"stock symbol": sym, "recipient": name})


# -- travel --------------------------------------------------------------------------------
def _travel_login(s: Session) -> str:
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


def _card(s: Session, at_least: float) -> str:
    tv = s.live("TravelAPI")
    ends = [str(d["card_number"])[-4:] for d in tv.credit_card_list.values()]
    cards = sorted(
        c for c, d in tv.credit_card_list.items()
        if d["balance"] >= at_least and ends.count(str(d["card_number"])[-4:]) == 1
    )  # fmt: skip
    if not cards:
        raise SkillUnavailable("no card with enough balance")
    return s.rng.choice(cards)


def tv_book(s: Session, items: int) -> Act:
    route = s.rng.choice(
        sorted(r for r in ROUTES if r[0] in CITY_AIRPORT.values() and r[1] in CITY_AIRPORT.values())
    )
    by_code = {v: k for k, v in CITY_AIRPORT.items()}
    src, dst = by_code[route[0]], by_code[route[1]]
    travel_class = s.rng.choice(("economy", "business"))
    date = f"2025-{s.rng.randint(1, 12):02d}-{s.rng.randint(1, 28):02d}"
    card = _card(s, 6000)
    digits = str(s.live("TravelAPI").credit_card_list[card]["card_number"])[-4:]
    lead = _travel_login(s)
    s.call("get_all_credit_cards")
    a = s.call("get_nearest_airport_by_city", location=src)["nearest_airport"]
    b = s.call("get_nearest_airport_by_city", location=dst)["nearest_airport"]
    out = s.call("book_flight", access_token=s.token, card_id=card, travel_date=date,
                 travel_from=a, travel_to=b, travel_class=travel_class)  # fmt: skip
    s.booking = (out["booking_id"], card)
    body = s.pick((
        f"book a {travel_class} flight from {src} to {dst} on {date} with my card ending in "
        f"{digits}, and tell me the booking id.",
        f"I need a {travel_class} ticket {src} to {dst} for {date}; pay with the card that "
        f"ends in {digits} and give me the booking id.",
    ))  # fmt: skip
    request = lead + body if lead else body[0].upper() + body[1:]
    facts = {"departure city": src, "destination city": dst, "travel date": date}
    return Act(request, outputs=(out["booking_id"],), facts=facts)


def _booking(s: Session) -> tuple[str, str]:
    """The flight booked in this task, or in the conversation this request is added to."""
    booking = s.booking
    if booking is None and not s.turns:  # an added request: the conversation's booking
        booking = s.booking = s.earlier_booking()
    if booking is None:
        raise SkillUnavailable("no booking made in this task yet")
    return booking


def _led(lead: str, body: str) -> str:
    """A request: ``lead`` (a log-in, or nothing) then ``body``, capitalized when alone."""
    return lead + body if lead else body[0].upper() + body[1:]


def tv_cancel(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    lead = _travel_login(s)  # a request added to a conversation logs in on its own
    s.call("cancel_booking", access_token=s.token, booking_id=booking_id)
    s.booking = None
    body = s.pick(
        ("actually, cancel that booking.", "plans changed: please cancel the flight I just booked.")
    )
    return Act(_led(lead, body))


def tv_insure(s: Session, items: int) -> Act:
    booking_id, card = _booking(s)
    kind = s.rng.choice(("basic", "comprehensive"))
    cost = float(s.rng.choice((45, 60, 85, 120)))
    lead = _travel_login(s)
    s.call("purchase_insurance", access_token=s.token, insurance_type=kind,
           booking_id=booking_id, insurance_cost=cost, card_id=card)  # fmt: skip
    body = s.pick((
        f"add {kind} travel insurance to that booking for {int(cost)} dollars, same card.",
        f"insure that trip too: {kind} coverage, {int(cost)} dollars, on the card I used.",
    ))  # fmt: skip
    return Act(_led(lead, body))


def tv_budget(s: Session, items: int) -> Act:
    currency = s.rng.choice(CURRENCIES)
    value = float(s.rng.choice((800, 1200, 1500, 2500, 4000)))
    lead = _travel_login(s)
    usd = s.call(
        "compute_exchange_rate", base_currency=currency, target_currency="USD", value=value
    )["exchanged_value"]
    s.call("set_budget_limit", access_token=s.token, budget_limit=usd)
    body = s.pick((
        f"my travel budget is {int(value)} {currency}: convert it to USD and set that as my "
        "budget limit.",
        f"set my budget limit to {int(value)} {currency}, converted to USD first.",
    ))  # fmt: skip
    request = lead + body if lead else body[0].upper() + body[1:]
    return Act(request, facts={"currency": currency})


def tv_card(s: Session, items: int) -> Act:
    p = s.person
    number = str(s.rng.randint(10**15, 10**16 - 1))
    exp = f"{s.rng.randint(1, 12):02d}/{s.rng.randint(2028, 2033)}"
    cvv = s.rng.randint(100, 999)
    lead = _travel_login(s)
    card = s.call("register_credit_card", access_token=s.token, card_number=number,
                  expiration_date=exp, cardholder_name=p.name, card_verification_number=cvv)["card_id"]  # fmt: skip
    body = s.pick((
        f"register my new card {number}, expiring {exp}, CVV {cvv}, in my name {p.name}, "
        "and tell me its card id.",
        f"add the card {number} (exp {exp}, security code {cvv}, holder {p.name}) and give me "
        "the new card id.",
    ))  # fmt: skip
    request = lead + body if lead else body[0].upper() + body[1:]
    return Act(request, outputs=(card,), facts={"card number": number})


def tv_ticket(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    title = "Trip expense claim"
    lead = _ticket_login(s)
    s.call("create_ticket", title=title, description=booking_id, priority=2)
    body = s.pick((
        f"open a priority 2 ticket titled '{title}' with the booking id as its description.",
        f"file a ticket '{title}', priority 2, and put the booking id in the description.",
    ))  # fmt: skip
    request = lead + body if lead else body[0].upper() + body[1:]
    return Act(request, facts={"ticket title": title})


def tv_message(s: Session, items: int) -> Act:
    booking_id, _ = _booking(s)
    name = _contacts(s, 1)[0]
    lead = _message_login(s)
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=booking_id)
    body = s.pick(
        (f"send {name} the booking id in a message.", f"message {name} just the booking id.")
    )
    request = lead + body if lead else body[0].upper() + body[1:]
    return Act(request, facts={"recipient": name})


# -- follow-ups: a request that builds on what an earlier request of the conversation made --
# Each takes an id that an earlier request's call returned (a ticket, a tweet, an order, a
# contact, a card), so its calls depend on that request's: *expand*'s ``chain`` step adds
# them. On a world of its own (no earlier request) none applies.
def tk_close_new(s: Session, items: int) -> Act:
    """Follow-up: close the ticket the conversation opened."""
    ticket = s.the_new("TicketAPI", "ticket_queue", "ticket")
    if ticket["status"] not in ("Open", "In Progress"):
        raise SkillUnavailable("the new ticket is not open")
    lead = _ticket_login(s)
    s.call("close_ticket", ticket_id=ticket["id"])
    body = s.pick(
        ("please close the ticket I just opened.", "the ticket I opened can be closed now.")
    )
    return Act(_led(lead, body))


def tk_resolve_new(s: Session, items: int) -> Act:
    """Follow-up: resolve the ticket the conversation opened, with a note."""
    ticket = s.the_new("TicketAPI", "ticket_queue", "ticket")
    if ticket["status"] not in ("Open", "In Progress"):
        raise SkillUnavailable("the new ticket is not open")
    note = s.pick(("Sorted it out myself.", "Fixed after a restart.", "No longer needed."))
    lead = _ticket_login(s)
    s.call("resolve_ticket", ticket_id=ticket["id"], resolution=note)
    body = s.pick((
        f"mark the ticket I opened as resolved, with the note '{note}'.",
        f"resolve that new ticket of mine; resolution: '{note}'.",
    ))  # fmt: skip
    return Act(_led(lead, body), facts={"resolution": note})


def tk_tell_new(s: Session, items: int) -> Act:
    """Follow-up: message a contact the id of the ticket the conversation opened."""
    ticket = s.the_new("TicketAPI", "ticket_queue", "ticket")
    name = _contacts(s, 1)[0]
    lead = _message_login(s)
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=str(ticket["id"]))
    body = s.pick((
        f"send {name} the id of the ticket I opened, nothing else.",
        f"message {name} just the number of my new ticket.",
    ))  # fmt: skip
    return Act(_led(lead, body), facts={"recipient": name})


def tw_comment_new(s: Session, items: int) -> Act:
    """Follow-up: comment on the tweet the conversation posted."""
    tweet_id = s.the_new("TwitterAPI", "tweets", "tweet")
    text = s.pick(("More soon.", "Thanks for the support!", "Details to follow."))
    lead = _twitter_login(s)
    s.call("comment", tweet_id=int(tweet_id), comment_content=text)
    body = s.pick((
        f"add the comment '{text}' under the tweet I just posted.",
        f"comment '{text}' on my new tweet.",
    ))  # fmt: skip
    return Act(_led(lead, body), facts={"comment": text})


def tr_cancel_new(s: Session, items: int) -> Act:
    """Follow-up: cancel the order the conversation placed."""
    order_id = s.the_new("TradingBot", "orders", "order")
    order = s.live("TradingBot").orders[order_id]
    if order["status"] not in ("Open", "Pending"):
        raise SkillUnavailable("the new order is not open")
    lead = _trading_login(s)
    s.call("cancel_order", order_id=int(order_id))
    body = s.pick((
        "actually, cancel the order I just placed.",
        "I changed my mind: cancel that new order.",
    ))  # fmt: skip
    return Act(_led(lead, body))


def msg_again_new(s: Session, items: int) -> Act:
    """Follow-up: send the contact the conversation added another message."""
    name = s.the_new("MessageAPI", "user_map", "contact")
    uid = s.live("MessageAPI").user_map[name]
    text = _sentence(s.rng)
    lead = _message_login(s)
    s.call("send_message", receiver_id=uid, message=text)
    body = s.pick((
        f"send the contact I just added another message: '{text}'.",
        f"message {name} again, with their new user id: '{text}'.",
    ))  # fmt: skip
    return Act(_led(lead, body), facts={"message": text})


def tv_book_new_card(s: Session, items: int) -> Act:
    """Follow-up: book a flight with the card the conversation registered."""
    card = str(s.the_new("TravelAPI", "credit_card_list", "card"))
    by_code = {v: k for k, v in CITY_AIRPORT.items()}
    src, dst = s.rng.choice(sorted((by_code[a], by_code[b]) for a, b in ROUTES
                                   if a in by_code and b in by_code))  # fmt: skip
    travel_class = s.rng.choice(("economy", "business"))
    date = f"2025-{s.rng.randint(1, 12):02d}-{s.rng.randint(1, 28):02d}"
    lead = _travel_login(s)
    a = s.call("get_nearest_airport_by_city", location=src)["nearest_airport"]
    b = s.call("get_nearest_airport_by_city", location=dst)["nearest_airport"]
    out = s.call("book_flight", access_token=s.token, card_id=card, travel_date=date,
                 travel_from=a, travel_to=b, travel_class=travel_class)  # fmt: skip
    s.booking = (out["booking_id"], card)
    body = s.pick((
        f"book a {travel_class} flight from {src} to {dst} on {date} with the card I just "
        "registered, and tell me the booking id.",
        f"use my new card for a {travel_class} ticket {src} to {dst} on {date}; give me the "
        "booking id.",
    ))  # fmt: skip
    facts = {"departure city": src, "destination city": dst, "travel date": date}
    return Act(_led(lead, body), outputs=(out["booking_id"],), facts=facts)


FOLLOW_UPS: tuple[Action, ...] = (
    tk_close_new, tk_resolve_new, tk_tell_new, tw_comment_new, tr_cancel_new, msg_again_new,
    tv_book_new_card,
)  # fmt: skip
"""Requests that build on an earlier request's result (besides the booking's follow-ups,
which the skills' own turns already use: insurance, cancelling, a ticket, a message)."""


# -- the car -------------------------------------------------------------------------------
def vc_start(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    if car.engine_state != "stopped" or car.fuelLevel <= 0:
        raise SkillUnavailable("engine already running or no fuel")
    open_doors = [d for d, status in car.doorStatus.items() if status == "unlocked"]
    if not open_doors or len(open_doors) == len(car.doorStatus):
        raise SkillUnavailable("start needs some doors locked and some not")
    s.call("displayCarStatus", option="doors")
    s.call("lockDoors", unlock=False, door=open_doors)
    s.call("pressBrakePedal", pedalPosition=1.0)
    s.call("startEngine", ignitionMode="START")
    request = s.pick((
        "Start the car: check which doors are still unlocked and lock just those, press the "
        "brake fully, then turn the engine on.",
        "Get the engine running. Lock whatever doors are open first and hold the brake "
        "pedal all the way down.",
        "I'm ready to go: see which doors aren't locked yet, lock them, push the brake "
        "fully and start the engine.",
    ))  # fmt: skip
    return Act(request)


def vc_fill(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    room = int(50 - car.fuelLevel)
    if room < 10:
        raise SkillUnavailable("tank almost full")
    amount = float(s.rng.randint(10, room))
    s.call("displayCarStatus", option="fuel")
    s.call("fillFuelTank", fuelAmount=amount)
    request = s.pick((
        f"Check the fuel level and add {int(amount)} gallons.",
        f"How much fuel is in the tank? Put in another {int(amount)} gallons.",
    ))  # fmt: skip
    return Act(request)


def vc_liters(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    liters = float(s.rng.choice((20, 30, 40, 60)))
    gallons = liters * 0.264172
    if car.fuelLevel + gallons > 50:
        raise SkillUnavailable("would overflow")
    g = s.call("liter_to_gallon", liter=liters)["gallon"]
    s.call("fillFuelTank", fuelAmount=g)
    request = s.pick((
        f"I bought {int(liters)} liters of fuel; convert that to gallons and fill the tank with it.",
        f"Add {int(liters)} liters to the tank (the car takes gallons, so convert first).",
    ))  # fmt: skip
    return Act(request)


def vc_climate(s: Session, items: int) -> Act:
    temp = float(s.rng.randint(18, 26))
    fan = s.rng.choice((20, 40, 60, 80))
    mode = s.rng.choice(("auto", "cool", "heat"))
    s.call("adjustClimateControl", temperature=temp, unit="celsius", fanSpeed=fan, mode=mode)
    request = s.pick((
        f"Set the AC to {int(temp)} degrees celsius, fan speed {fan}, {mode} mode.",
        f"Make it {int(temp)} degrees celsius inside, in {mode} mode with the fan at {fan}.",
    ))  # fmt: skip
    return Act(request)


def vc_lights(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mode = "off" if car.headLightStatus == "on" else "on"
    s.call("setHeadlights", mode=mode)
    request = s.pick((f"Turn the headlights {mode}.", f"Switch the headlights {mode}, please."))
    return Act(request)


def vc_tires(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mean = (car.frontLeftTirePressure + car.frontRightTirePressure + car.rearLeftTirePressure
            + car.rearRightTirePressure) / 4  # fmt: skip
    if 30 <= mean <= 35:
        raise SkillUnavailable("tires are healthy")
    s.call("check_tire_pressure")
    shop = s.call("find_nearest_tire_shop")["shopLocation"]
    s.call("set_navigation", destination=shop)
    request = s.pick((
        "Check my tire pressure; it looks low, so set the navigation to the nearest tire shop.",
        "The tires feel off. Check their pressure and navigate me to the closest tire shop.",
    ))  # fmt: skip
    return Act(request)


def vc_navigate(s: Session, items: int) -> Act:
    city = s.rng.choice(ZIP_CITIES)
    zipcode = s.call("get_zipcode_based_on_city", city=city)["zipcode"]
    s.call("set_navigation", destination=zipcode)
    request = s.pick((
        f"Find the zip code of {city} and set the navigation to it.",
        f"Navigate to {city}; use its zip code as the destination.",
    ))  # fmt: skip
    return Act(request, facts={"city": city})


def vc_park(s: Session, items: int) -> Act:
    car = s.live("VehicleControlAPI")
    mode = "release" if car.parkingBrakeStatus == "engaged" else "engage"
    s.call("activateParkingBrake", mode=mode)
    request = s.pick(
        (f"Please {mode} the parking brake.", f"{mode.capitalize()} the parking brake.")
    )
    return Act(request)


Action = Callable[[Session, int], Act]


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
    if not any(turn.calls for turn in s.turns):
        raise SkillUnavailable("no calls")
    person = s.person
    return Draft(
        user=UserProfile(name=person.name, facts=dict(s.facts)),
        turns=tuple(s.turns),
        shape=full,
        gold=s.run.gold(),
    )


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
        if not s.turns[0].calls:
            raise SkillUnavailable("no calls")
        return Draft(
            user=UserProfile(name=s.person.name, facts=dict(s.facts)),
            turns=tuple(s.turns),
            shape=full,
            gold=s.run.gold(),
        )

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


DECOYS: tuple[str, ...] = ("VehicleControlAPI", "TradingBot", "MessageAPI", "GorillaFileSystem")
"""Classes a task may offer without needing them (each has a write that is always valid:
:func:`unrelated_write`)."""


def decoy(task: Any, classes: Sequence[str]) -> str | None:
    """The class ``task`` offers besides the ones it needs (as BFCL's tasks sometimes list
    a class they never use): one of :data:`DECOYS` not among ``classes``, drawn from the
    task's world (so every variant of a task offers the same)."""
    return _decoy(task.db_seed, classes)


def _decoy(db_seed: int, classes: Sequence[str]) -> str | None:
    import hashlib

    options = [c for c in DECOYS if c not in classes]
    if not options:
        return None
    digest = hashlib.sha256(f"bfcl-decoy:{db_seed}".encode()).digest()
    return options[int.from_bytes(digest[:4], "big") % len(options)]


def task_tools(task: Any) -> frozenset[str]:
    """The functions a task offers: those of its skill's classes (each skill of a composed
    task), of every class its gold calls or withheld tools use, and of one class it does
    not need (:func:`decoy`)."""
    return _task_tools(str(task.skill), _tools_used(task), task.db_seed)


def _tools_used(task: Any) -> tuple[str, ...]:
    """The names of the task's gold calls and withheld tools, turn by turn, in order."""
    return tuple(
        name
        for turn in task.turns
        for name in (*(call.name for call in turn.calls), *turn.withheld_tools)
    )


@lru_cache(maxsize=4096)
def _task_tools(skill: str, used: tuple[str, ...], db_seed: int) -> frozenset[str]:
    """:func:`task_tools` of a task with these parts (a task's variants and its checks ask
    for the same again)."""
    from environments.bfcl.apis import functions_of

    classes = _needed_classes(skill, used)
    extra = _decoy(db_seed, classes)
    return frozenset(functions_of([*classes, *([extra] if extra else [])]))


def needed_classes(task: Any) -> list[str]:
    """The classes a task's skills name and its gold calls and withheld tools use."""
    return _needed_classes(str(task.skill), _tools_used(task))


def _needed_classes(skill: str, used: Sequence[str]) -> list[str]:
    from environments.bfcl.apis import functions

    table = functions()
    classes: dict[str, None] = {}
    for name in skill.split("+"):
        recipe = RECIPE_BY_NAME.get(name)
        if recipe is not None:
            classes.update(dict.fromkeys(recipe.classes))
    for name in used:
        if name in table:
            classes[table[name].owner] = None
    return list(classes)


def unrelated_write(task: Any, db: Database) -> ToolCall:
    """A write in the task's decoy class (valid at any point, and never a change the gold
    makes): the shared tests inject it to check that collateral changes fail a turn."""
    from environments.bfcl.world.state import TABLE

    cls = decoy(task, needed_classes(task))
    if cls == "VehicleControlAPI":
        return ToolCall(name="set_navigation", arguments={"destination": "12 Unrelated Road"})
    if cls == "TradingBot":
        trading = db.get(TABLE, cls).instance()
        stock = sorted(set(trading.stocks) - set(trading.watch_list))[0]
        return ToolCall(name="add_to_watchlist", arguments={"stock": stock})
    if cls == "MessageAPI":
        return ToolCall(name="add_contact", arguments={"user_name": "Unrelated Person"})
    return ToolCall(name="mkdir", arguments={"dir_name": "unrelated_folder"})
