"""Tables derived from a base table on demand: the building block of long-context worlds.

A long-context variant is a controlled pair of its base task: the same entities, the same
gold calls and effect, but larger records and tool outputs (a customer with thousands of
past orders, products with many more variants). A domain builds such a world from its
``default`` tables without copying them: a :class:`DerivedTable` serves every base record
(transformed on access, e.g. a user record with a longer order history) and *virtual*
records that exist only by key (the past orders themselves), built when looked up and kept
in a small cache. Iterating a derived table lists the base records only.

Wrap a derived table in :class:`types.MappingProxyType` before returning it from a
generator: :func:`rods_env.database.freeze_tables` shares a table that is already behind a
read-only proxy as it is, instead of copying it into a dict.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, ItemsView, Iterator, Mapping, ValuesView
from threading import Lock
from typing import Any

from rods_env.database import Record

LONG_SIZE = re.compile(r"^long-(\d+)k$")
"""Names of long-context sizes: ``long-<n>k`` is about ``n`` thousand tokens of padding."""


def long_size_tokens(size: str) -> int | None:
    """Tokens of padding a size name stands for (``"long-8k"`` gives 8000), else None."""
    m = LONG_SIZE.match(size)
    return int(m.group(1)) * 1000 if m else None


class DerivedTable(Mapping[str, Record]):
    """A read-only table: base records (optionally transformed) plus virtual records.

    Look-ups by key (``table[key]``, ``get``, ``in``) see the derived records. Scans
    (iteration, ``keys``, ``values``, ``items``, ``len``) see the base records as they are:
    building every derived record (a thousand-order history per customer) to scan a table
    would cost seconds, and what scans and indexes key on (an email, a name) is never what
    a transform changes. A transform may only add to a record.

    Args:
        base: The table it derives from (never copied).
        transform: Applied to a base record when it is read (e.g. a longer order list);
            None keeps base records as they are.
        virtual: ``key -> record or None`` for keys not in ``base``.
        cache_size: Derived records kept (least recently used are rebuilt on demand).
    """

    def __init__(
        self,
        base: Mapping[str, Record],
        *,
        transform: Callable[[Record], Record] | None = None,
        virtual: Callable[[str], Record | None] | None = None,
        cache_size: int = 64,
    ) -> None:
        self._base = base
        self._transform = transform
        self._virtual = virtual
        self._cache: OrderedDict[str, Record] = OrderedDict()
        self._cache_size = cache_size
        self._lock = Lock()

    def _cached(self, key: str, build: Callable[[], Record | None]) -> Record | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        record = build()
        if record is not None:
            with self._lock:
                self._cache[key] = record
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return record

    def __getitem__(self, key: str) -> Record:
        record = self._base.get(key)
        if record is not None:
            if self._transform is None:
                return record
            transform = self._transform
            out = self._cached(key, lambda: transform(record))
        elif self._virtual is not None and isinstance(key, str):
            virtual = self._virtual
            out = self._cached(key, lambda: virtual(key))
        else:
            out = None
        if out is None:
            raise KeyError(key)
        return out

    def get(self, key: str, default: Any = None) -> Any:
        """The record ``key`` (base or virtual), or ``default``."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        if key in self._base:
            return True
        if self._virtual is None or not isinstance(key, str):
            return False
        return self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def values(self) -> ValuesView[Record]:
        """The base records (see the class docstring)."""
        return self._base.values()

    def items(self) -> ItemsView[str, Record]:
        """``(key, base record)`` pairs (see the class docstring)."""
        return self._base.items()

    def __len__(self) -> int:
        return len(self._base)

    def __repr__(self) -> str:
        return f"DerivedTable({len(self._base)} base records, virtual={self._virtual is not None})"


class KeyCodec:
    """A bijection between ``(owner index, i)`` and fixed-width ids, for virtual records.

    Ids are spread over the id space by an affine permutation, so virtual ids look like
    real ones; decoding needs no table.

    Args:
        alphabet: Characters of an id (e.g. ``"0123456789"``).
        width: Characters per id.
        per_owner: Most virtual records per owner.
        prefix: Text before the characters (``"#W"``).
        first: Digits (in ``alphabet``) the first character may take, e.g. ``"123456789"`` for
            ids without a leading zero.
    """

    def __init__(
        self,
        alphabet: str,
        width: int,
        per_owner: int,
        *,
        prefix: str = "",
        first: str | None = None,
        multiplier: int = 1_000_003,
        offset: int = 987_654,
    ) -> None:
        self.alphabet = alphabet
        self.width = width
        self.per_owner = per_owner
        self.prefix = prefix
        self.first = first or alphabet
        base = len(alphabet)
        self.space = len(self.first) * base ** (width - 1)
        self.multiplier = multiplier
        self.offset = offset
        self._inverse = pow(multiplier, -1, self.space)  # raises when not coprime
        self._index = {c: i for i, c in enumerate(alphabet)}
        self._first_index = {c: i for i, c in enumerate(self.first)}
        # decimal ids without a leading zero are plain numbers: format them at C speed
        self._decimal = alphabet == "0123456789" and self.first == "123456789"
        self._lowest = base ** (width - 1)
        # other ids of an even width over one alphabet: two characters per table look-up
        self._pairs: list[str] | None = None
        if self.first == alphabet and width % 2 == 0:
            self._pairs = [a + b for a in alphabet for b in alphabet]

    def encode(self, owner: int, i: int) -> str:
        """The id of virtual record ``i`` of owner ``owner``."""
        m = ((owner * self.per_owner + i) * self.multiplier + self.offset) % self.space
        if self._decimal:
            return f"{self.prefix}{self._lowest + m}"
        if self._pairs is not None:
            pairs, size, chunks = self._pairs, len(self._pairs), []
            for _ in range(self.width // 2):
                m, r = divmod(m, size)
                chunks.append(pairs[r])
            return self.prefix + "".join(reversed(chunks))
        base = len(self.alphabet)
        chars = []
        for _ in range(self.width - 1):
            m, r = divmod(m, base)
            chars.append(self.alphabet[r])
        chars.append(self.first[m])
        return self.prefix + "".join(reversed(chars))

    def encode_range(self, owner: int, count: int) -> list[str]:
        """The ids of virtual records ``0 .. count - 1`` of ``owner`` (``encode`` in bulk)."""
        space, mult = self.space, self.multiplier
        m = ((owner * self.per_owner) * mult + self.offset) % space
        prefix = self.prefix
        out: list[str] = []
        append = out.append
        if self._decimal:
            low = self._lowest
            for _ in range(count):
                append(f"{prefix}{low + m}")
                m = (m + mult) % space
            return out
        if self._pairs is not None and self.width == 6:
            pairs, size, size2 = self._pairs, len(self._pairs), len(self._pairs) ** 2
            for _ in range(count):
                append(prefix + pairs[m // size2] + pairs[(m // size) % size] + pairs[m % size])
                m = (m + mult) % space
            return out
        return [self.encode(owner, i) for i in range(count)]

    def decode(self, key: str) -> tuple[int, int] | None:
        """``(owner, i)`` of a virtual id, or None when ``key`` is not one."""
        if not key.startswith(self.prefix) or len(key) != len(self.prefix) + self.width:
            return None
        body = key[len(self.prefix) :]
        m = self._first_index.get(body[0])
        if m is None:
            return None
        base = len(self.alphabet)
        for c in body[1:]:
            d = self._index.get(c)
            if d is None:
                return None
            m = m * base + d
        n = ((m - self.offset) * self._inverse) % self.space
        return divmod(n, self.per_owner)
