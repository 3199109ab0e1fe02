"""What one update step of a sliding-window view's one table computes, named column by column, so a
kernel (kernels/window_steps.py) can run the step without its SQL: the window's length in parts, the
stream it reads, the group columns, the state columns (age, idle, cumulative counts and sums), the
monotonic queues of min/max, and the query's items. streams/windows.py writes it beside the SQL of
the views it applies to (integer sums, no HAVING); the SQL stays the definition of record."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueColumns:
    """One ``min`` or ``max`` of a column, kept as a monotonic queue: the batch's extreme per group
    (``batch``, not stored), the stored entries (``entry``) and the window's extreme (``head``).
    ``entries`` names the list column of the earlier entries (``STRUCT(v, at)``) in the group's
    one row (views made since round 36); None: each earlier entry is a row of its own, ``entry``
    holding its value and the step's ``at`` column the age it was made at (earlier views)."""

    function: str
    attribute: str
    batch: str
    entry: str
    head: str
    entries: str | None = None


@dataclass(frozen=True)
class ItemColumn:
    """One aggregate of the query as stored: ``function(attribute)`` (attribute None for
    ``count(*)``) kept in column ``stored``."""

    stored: str
    function: str
    attribute: str | None


@dataclass(frozen=True)
class WindowStep:
    """The named columns of a window view's incremental step (streams/windows.py, one table).

    ``count`` counts a group's rows per batch (stored and cumulated when ``keeps_count``);
    ``sums`` and ``counts`` map an attribute to its cumulative sum and non-null count columns;
    ``wide``: the sum columns of BIGINT attributes, stored as DECIMAL(38,0) and shown as BIGINT;
    ``at`` is the age a queue entry was made at."""

    parts: int
    stream: str
    groups: tuple[str, ...]
    age: str
    idle: str
    count: str
    keeps_count: bool
    sums: tuple[tuple[str, str], ...]
    counts: tuple[tuple[str, str], ...]
    queues: tuple[QueueColumns, ...]
    at: str
    items: tuple[ItemColumn, ...]
    wide: tuple[str, ...] = ()

    def cumulated(self) -> list[str]:
        """The cumulative columns, in the order the SQL keeps them."""
        return (
            ([self.count] if self.keeps_count else [])
            + [column for _, column in self.sums]
            + [column for _, column in self.counts]
        )

    def to_dict(self) -> dict:
        return {
            "parts": self.parts,
            "stream": self.stream,
            "groups": list(self.groups),
            "age": self.age,
            "idle": self.idle,
            "count": self.count,
            "keeps_count": self.keeps_count,
            "sums": [list(pair) for pair in self.sums],
            "counts": [list(pair) for pair in self.counts],
            "queues": [
                [q.function, q.attribute, q.batch, q.entry, q.head, *([q.entries] if q.entries else [])]
                for q in self.queues
            ],
            "at": self.at,
            "items": [[i.stored, i.function, i.attribute] for i in self.items],
            "wide": list(self.wide),
        }

    @classmethod
    def from_dict(cls, data: dict) -> WindowStep:
        return cls(
            parts=int(data["parts"]),
            stream=str(data["stream"]),
            groups=tuple(str(g) for g in data["groups"]),
            age=str(data["age"]),
            idle=str(data["idle"]),
            count=str(data["count"]),
            keeps_count=bool(data["keeps_count"]),
            sums=tuple((str(a), str(c)) for a, c in data["sums"]),
            counts=tuple((str(a), str(c)) for a, c in data["counts"]),
            queues=tuple(QueueColumns(*(str(v) for v in q)) for q in data["queues"]),
            at=str(data["at"]),
            items=tuple(
                ItemColumn(str(s), str(f), None if a is None else str(a)) for s, f, a in data["items"]
            ),
            wide=tuple(str(c) for c in data.get("wide", ())),
        )
