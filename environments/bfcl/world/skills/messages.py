"""The messaging actions (MessageAPI): send, add a contact, unsend, a file sent, another
message to the conversation's new contact; :func:`tell`, which other APIs' actions use."""

from __future__ import annotations

from environments.bfcl.world.skills.files import file_text
from environments.bfcl.world.skills.logins import log_in
from environments.bfcl.world.skills.session import Act, Session, led, quoted, sentence
from rods_env.domain import SkillUnavailable

NEW_NAMES = (
    "Harriet", "Osvaldo", "Priyanka", "Tobias", "Leonie", "Marek", "Ingrid", "Caspian",
    "Delphine", "Rafferty", "Soraya", "Anselm",
)  # fmt: skip


def contacts(s: Session, n: int) -> list[str]:
    """``n`` of the user's contacts (names, sorted), drawn."""
    msg = s.live("MessageAPI")
    names = sorted(n for n in msg.user_map if n != s.person.first)
    if len(names) < n:
        raise SkillUnavailable("not enough contacts")
    return sorted(s.rng.sample(names, n))


def tell(s: Session, name: str, text: str) -> None:
    """Message contact ``name`` (their user id looked up first)."""
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=text)


def msg_send(s: Session, items: int) -> Act:
    names = contacts(s, items)
    text = sentence(s.rng)
    lead = log_in(s, "MessageAPI")
    for name in names:
        tell(s, name, text)
    body = s.pick((
        f"send {quoted(names)} the message '{text}'.",
        f"message {quoted(names)}: '{text}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"recipient": names[0], "message": text})


def msg_new_contact(s: Session, items: int) -> Act:
    msg = s.live("MessageAPI")
    name = s.rng.choice([n for n in NEW_NAMES if n not in msg.user_map])
    text = sentence(s.rng)
    lead = log_in(s, "MessageAPI")
    uid = s.call("add_contact", user_name=name)["user_id"]
    s.call("send_message", receiver_id=uid, message=text)
    body = s.pick((
        f"add {name} as a new contact and send them '{text}'.",
        f"save {name} to my contacts, then message them '{text}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"contact": name, "message": text})


def msg_unsend(s: Session, items: int) -> Act:
    msg = s.live("MessageAPI")
    ids = {v: k for k, v in msg.user_map.items()}
    received = sorted(
        {ids[next(iter(m))] for m in msg.inbox if next(iter(m)) in ids} - {s.person.first}
    )
    if not received:
        raise SkillUnavailable("no message to delete")
    name = s.rng.choice(received)
    lead = log_in(s, "MessageAPI")
    s.call("view_messages_sent")
    uid = s.call("get_user_id", user=name)["user_id"]
    s.call("delete_message", receiver_id=uid)
    body = s.pick((
        f"look at the messages I've sent and delete the last one to {name}.",
        f"go through my sent messages and take back my latest one to {name}.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"recipient": name})


def msg_share_file(s: Session, items: int) -> Act:
    folder, file, content = file_text(s)
    name = contacts(s, 1)[0]
    lead = log_in(s, "MessageAPI")
    tell(s, name, content)
    body = s.pick((
        f"send {name} the content of {file} from {folder} as a message.",
        f"message {name} exactly what {file} in {folder} says.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"folder": folder, "file": file, "recipient": name})


def msg_again_new(s: Session, items: int) -> Act:
    """Follow-up: send the contact the conversation added another message."""
    name = s.the_new("MessageAPI", "user_map", "contact")
    uid = s.live("MessageAPI").user_map[name]
    text = sentence(s.rng)
    lead = log_in(s, "MessageAPI")
    s.call("send_message", receiver_id=uid, message=text)
    body = s.pick((
        f"send the contact I just added another message: '{text}'.",
        f"message {name} again, with their new user id: '{text}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"message": text})
