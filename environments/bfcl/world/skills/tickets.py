"""The ticket system's actions (TicketAPI): open, close, resolve, reprioritize, a ticket
from a file, and follow-ups on the ticket the conversation opened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from environments.bfcl.world.skills.files import file_text
from environments.bfcl.world.skills.logins import log_in
from environments.bfcl.world.skills.messages import contacts, tell
from environments.bfcl.world.skills.session import Act, Session, led, sentence
from rods_env.domain import SkillUnavailable


def tk_open(s: Session, items: int) -> Act:
    title = s.pick(("Desk lamp broken", "Need a second monitor", "Parking pass expired",
                    "Chair squeaks", "Cannot print in color", "Locker key lost"))  # fmt: skip
    desc = f"{title}. {sentence(s.rng)}."
    priority = s.rng.randint(1, 5)
    lead = log_in(s, "TicketAPI")
    s.call("create_ticket", title=title, description=desc, priority=priority)
    body = s.pick((
        f"open a ticket titled '{title}' with the description '{desc}' and priority {priority}.",
        f"file a priority {priority} ticket, title '{title}', description '{desc}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"ticket title": title, "description": desc})


def _own_ticket(s: Session, statuses: Sequence[str]) -> dict[str, Any]:
    """One of the user's tickets in one of ``statuses``, drawn."""
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
    lead = log_in(s, "TicketAPI")
    s.call("get_user_tickets")
    s.call("close_ticket", ticket_id=ticket["id"])
    body = s.pick((
        f"close my ticket '{ticket['title']}'.",
        f"my ticket about '{ticket['title']}' can be closed now.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"ticket title": ticket["title"]})


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
    lead = log_in(s, "TicketAPI")
    s.call("create_ticket", title=title, description=content)
    body = s.pick((
        f"open a ticket titled '{title}' whose description is the content of {file} in {folder}.",
        f"create a ticket '{title}' and use what {file} ({folder}) says as its description.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"folder": folder, "file": file, "ticket title": title})


def _new_open_ticket(s: Session) -> dict[str, Any]:
    """The ticket the conversation opened, still open."""
    ticket: dict[str, Any] = s.the_new("TicketAPI", "ticket_queue", "ticket")
    if ticket["status"] not in ("Open", "In Progress"):
        raise SkillUnavailable("the new ticket is not open")
    return ticket


def tk_close_new(s: Session, items: int) -> Act:
    """Follow-up: close the ticket the conversation opened."""
    ticket = _new_open_ticket(s)
    lead = log_in(s, "TicketAPI")
    s.call("close_ticket", ticket_id=ticket["id"])
    body = s.pick(
        ("please close the ticket I just opened.", "the ticket I opened can be closed now.")
    )
    return Act(led(lead, body))


def tk_resolve_new(s: Session, items: int) -> Act:
    """Follow-up: resolve the ticket the conversation opened, with a note."""
    ticket = _new_open_ticket(s)
    note = s.pick(("Sorted it out myself.", "Fixed after a restart.", "No longer needed."))
    lead = log_in(s, "TicketAPI")
    s.call("resolve_ticket", ticket_id=ticket["id"], resolution=note)
    body = s.pick((
        f"mark the ticket I opened as resolved, with the note '{note}'.",
        f"resolve that new ticket of mine; resolution: '{note}'.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"resolution": note})


def tk_tell_new(s: Session, items: int) -> Act:
    """Follow-up: message a contact the id of the ticket the conversation opened."""
    ticket = s.the_new("TicketAPI", "ticket_queue", "ticket")
    name = contacts(s, 1)[0]
    lead = log_in(s, "MessageAPI")
    tell(s, name, str(ticket["id"]))
    body = s.pick((
        f"send {name} the id of the ticket I opened, nothing else.",
        f"message {name} just the number of my new ticket.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"recipient": name})
