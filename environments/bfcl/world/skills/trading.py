"""The trading actions (TradingBot, and MathAPI over prices): buy by symbol or company,
the watchlist, orders, deposits, a price told to a contact, and cancelling the
conversation's own order."""

from __future__ import annotations

from environments.bfcl.world.generator import STOCK_POOL
from environments.bfcl.world.skills.logins import log_in
from environments.bfcl.world.skills.messages import contacts, tell
from environments.bfcl.world.skills.session import Act, Session, led, quoted
from rods_env.domain import SkillUnavailable


def _buy(s: Session, symbol: str, amount: int) -> None:
    """Buy ``amount`` shares of ``symbol`` at the price the bot quotes now."""
    price = s.call("get_stock_info", symbol=symbol)["price"]
    s.call("place_order", order_type="Buy", symbol=symbol, price=price, amount=amount)


def tr_buy(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    amount = s.rng.randint(2, 9)
    options = sorted(
        sym for sym, st in tr.stocks.items() if st["price"] * amount < tr.account_info["balance"]
    )
    if not options:
        raise SkillUnavailable("nothing affordable")
    sym = s.rng.choice(options)
    lead = log_in(s, "TradingBot")
    _buy(s, sym, amount)
    body = s.pick((
        f"buy {amount} shares of {sym} at the current price.",
        f"place a Buy order for {amount} {sym} shares at today's market price.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"stock symbol": sym})


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
    lead = log_in(s, "TradingBot")
    s.call("get_symbol_by_name", name=company)
    _buy(s, sym, amount)
    body = s.pick((
        f"buy {amount} shares of {company} at the current price.",
        f"I'd like {amount} {company} shares, bought at market price.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"company": company})


def tr_watch(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    options = sorted(set(tr.stocks) - set(tr.watch_list))
    if len(options) < items:
        raise SkillUnavailable("nothing to watch")
    syms = sorted(s.rng.sample(options, items))
    for sym in syms:
        s.call("add_to_watchlist", stock=sym)
    request = s.pick((
        f"Add {quoted(syms)} to my watchlist.",
        f"Put {quoted(syms)} on my stock watchlist, please.",
    ))  # fmt: skip
    return Act(request, facts={"stock symbol": syms[0]})


def tr_unwatch(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    if not tr.watch_list:
        raise SkillUnavailable("empty watchlist")
    sym = s.rng.choice(sorted(tr.watch_list))
    lead = log_in(s, "TradingBot")
    s.call("remove_stock_from_watchlist", symbol=sym)
    body = s.pick((f"take {sym} off my watchlist.", f"remove {sym} from the watchlist."))
    return Act(led(lead, body), facts={"stock symbol": sym})


def tr_cancel(s: Session, items: int) -> Act:
    tr = s.live("TradingBot")
    open_ = sorted(o for o, d in tr.orders.items() if d["status"] in ("Pending", "Open"))
    if not open_:
        raise SkillUnavailable("no open order")
    oid = s.rng.choice(open_)
    lead = log_in(s, "TradingBot")
    s.call("get_order_history")
    s.call("get_order_details", order_id=oid)
    s.call("cancel_order", order_id=oid)
    body = s.pick((
        f"check my order history and cancel order {oid}.",
        f"look through my orders and cancel {oid}, it's still pending.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"order id": str(oid)})


def tr_deposit(s: Session, items: int) -> Act:
    amount = float(s.rng.choice((250, 500, 750, 1000, 1500, 2000)))
    lead = log_in(s, "TradingBot")
    s.call("fund_account", amount=amount)
    body = s.pick((
        f"add {int(amount)} dollars to my trading account.",
        f"fund my account with {int(amount)} dollars.",
    ))  # fmt: skip
    return Act(led(lead, body))


def tr_average(s: Session, items: int) -> Act:
    """A read turn with MathAPI: the mean price of the watchlist (many values compete)."""
    tr = s.live("TradingBot")
    if len(tr.watch_list) < 2:
        raise SkillUnavailable("watchlist too short")
    lead = log_in(s, "TradingBot")
    syms = s.call("get_watchlist")["watchlist"]
    prices = [s.call("get_stock_info", symbol=sym)["price"] for sym in syms]
    mean = s.call("mean", numbers=prices)["result"]
    body = s.pick((
        "what's the average current price of the stocks on my watchlist?",
        "tell me the mean price of everything I'm watching.",
    ))  # fmt: skip
    return Act(led(lead, body), outputs=(str(mean),))


def tr_tell(s: Session, items: int) -> Act:
    """Trading to messages: send a contact a stock's price."""
    tr = s.live("TradingBot")
    sym = s.rng.choice(sorted(tr.stocks))
    name = contacts(s, 1)[0]
    price = s.call("get_stock_info", symbol=sym)["price"]
    lead = log_in(s, "MessageAPI")
    tell(s, name, str(price))
    body = s.pick((
        f"look up {sym}'s current price and message it to {name} (just the number).",
        f"send {name} the price of {sym} right now, only the number.",
    ))  # fmt: skip
    return Act(led(lead, body), facts={"stock symbol": sym, "recipient": name})


def tr_cancel_new(s: Session, items: int) -> Act:
    """Follow-up: cancel the order the conversation placed."""
    order_id = s.the_new("TradingBot", "orders", "order")
    order = s.live("TradingBot").orders[order_id]
    if order["status"] not in ("Open", "Pending"):
        raise SkillUnavailable("the new order is not open")
    lead = log_in(s, "TradingBot")
    s.call("cancel_order", order_id=int(order_id))
    body = s.pick((
        "actually, cancel the order I just placed.",
        "I changed my mind: cancel that new order.",
    ))  # fmt: skip
    return Act(led(lead, body))
