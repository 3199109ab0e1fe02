"""Time coordinates of a dimension: cell ``c`` is the instant ``origin + c * step``, exact in integers.

A satellite grid's or a sky survey's time axis is a dimension of integer cells like any other; its
scale labels each cell with a ``numpy.datetime64`` (UTC, no time zone). The step and the origin are
whole counts of one resolution (day, hour, ..., nanosecond), kept in the coarsest resolution that
holds both exactly, so a scale has one canonical form: equal scales compare equal whatever text or
xarray coordinate they came from. Months and years are not a fixed length and are refused.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np

from arrayviews.model.errors import SchemaError

#: Resolutions from the coarsest, each with the count of the next finer one it holds.
RESOLUTIONS = ("D", "h", "m", "s", "ms", "us", "ns")
_FINER = {"D": 24, "h": 60, "m": 60, "s": 1000, "ms": 1000, "us": 1000}
#: Words of the schema text (singular; a trailing "s" is accepted), as (resolution, count).
UNIT_WORDS = {
    "week": ("D", 7),
    "day": ("D", 1),
    "hour": ("h", 1),
    "minute": ("m", 1),
    "second": ("s", 1),
    "millisecond": ("ms", 1),
    "microsecond": ("us", 1),
    "nanosecond": ("ns", 1),
}
_WORD_OF = {"D": "DAY", "h": "HOUR", "m": "MINUTE", "s": "SECOND", "ms": "MILLISECOND", "us": "MICROSECOND"}
_WORD_OF["ns"] = "NANOSECOND"
_INT64 = (-(2**63) + 1, 2**63 - 1)  # -2**63 is NaT
_ZONE = re.compile(r"(Z|[+-]\d\d(:?\d\d)?)$")


def _per(resolution: str, finer: str) -> int:
    """How many ``finer`` units one ``resolution`` unit holds (``finer`` at or below it)."""
    count = 1
    for unit in RESOLUTIONS[RESOLUTIONS.index(resolution) : RESOLUTIONS.index(finer)]:
        count *= _FINER[unit]
    return count


def _coarsest(step: int, origin: int, resolution: str) -> tuple[int, int, str]:
    """``(step, origin, resolution)`` in the coarsest resolution holding both counts exactly."""
    while resolution != "D":
        coarser = RESOLUTIONS[RESOLUTIONS.index(resolution) - 1]
        factor = _FINER[coarser]
        if step % factor or origin % factor:
            break
        step, origin, resolution = step // factor, origin // factor, coarser
    return step, origin, resolution


@dataclass(frozen=True)
class TimeScale:
    """Time labels of a dimension: ``origin + cell * step``, counts of ``resolution`` since
    1970-01-01T00:00 UTC. Build one with :meth:`of` (any resolution; it is made canonical)."""

    step: int
    origin: int = 0
    resolution: str = "s"

    def __post_init__(self) -> None:
        for label in ("step", "origin"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise SchemaError(f"time {label} must be a whole count of {self.resolution}, got {value!r}")
            object.__setattr__(self, label, int(value))
        if self.resolution not in RESOLUTIONS:
            raise SchemaError(
                f"time resolution must be one of {', '.join(RESOLUTIONS)}, got {self.resolution!r}"
            )
        if self.step == 0:
            raise SchemaError("time step must not be zero")
        canonical = _coarsest(self.step, self.origin, self.resolution)
        if canonical != (self.step, self.origin, self.resolution):
            step, origin, resolution = canonical
            object.__setattr__(self, "step", step)
            object.__setattr__(self, "origin", origin)
            object.__setattr__(self, "resolution", resolution)
        if not _INT64[0] <= self.origin <= _INT64[1] or not _INT64[0] <= self.step <= _INT64[1]:
            raise SchemaError(f"time step or origin is beyond the range of datetime64[{self.resolution}]")

    @classmethod
    def of(cls, step: np.timedelta64 | dt.timedelta, origin: object = "1970-01-01") -> TimeScale:
        """The scale of cells ``step`` apart with cell 0 at ``origin`` (any :func:`to_instant` form)."""
        if isinstance(step, dt.timedelta):
            step = np.timedelta64(step)
        if not isinstance(step, np.timedelta64) or np.isnat(step):
            raise SchemaError(f"a time step is a numpy.timedelta64 or datetime.timedelta, got {step!r}")
        start = to_instant(origin)
        unit = _unit_of(step.dtype)
        step = step.astype(f"timedelta64[{unit}]")  # weeks as days; a multiplier such as [10s] as seconds
        finest = max(unit, _unit_of(start.dtype), key=RESOLUTIONS.index)
        return cls(
            int(step.astype(np.int64)) * _per(unit, finest),
            int(start.astype(np.int64)) * _per(_unit_of(start.dtype), finest),
            finest,
        )

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(f"datetime64[{self.resolution}]")

    def coordinates(self, cells: np.ndarray | int) -> np.ndarray:
        """The ``datetime64`` labels of integer ``cells``; a label past datetime64's range is an error."""
        cells = np.asarray(cells, dtype=np.int64)
        if cells.size:
            low, high = int(cells.min()), int(cells.max())
            for cell in (low, high):
                value = self.origin + cell * self.step
                if not _INT64[0] <= value <= _INT64[1]:
                    raise SchemaError(
                        f"cell {cell} has no time label: {self.to_text()} passes the range of "
                        f"datetime64[{self.resolution}] there"
                    )
            start = self.origin + low * self.step
            counts = np.int64(start) + (cells - np.int64(low)) * np.int64(self.step)
            return counts.astype(self.dtype)
        return cells.astype(self.dtype)

    def coordinate(self, cell: int) -> np.datetime64:
        """The label of one cell."""
        return self.coordinates(np.array([cell]))[0]

    def cells_in(self, span: np.timedelta64) -> int:
        """How many steps ``span`` (a duration, not negative) is; refused unless a whole number."""
        if np.isnat(span):
            raise SchemaError("a duration may not be NaT")
        unit = _unit_of(span.dtype)
        nanoseconds = int(span.astype(f"timedelta64[{unit}]").astype(np.int64)) * _per(unit, "ns")
        step = abs(self.step) * _per(self.resolution, "ns")
        if nanoseconds < 0:
            raise SchemaError(f"a duration may not be negative, got {span}")
        if nanoseconds % step:
            raise SchemaError(
                f"{span} is not a whole number of the dimension's steps ({self.to_text().split(' OFFSET')[0]})"
            )
        return nanoseconds // step

    def cells_of(self, instants: np.ndarray) -> tuple[np.ndarray, int | None]:
        """The cells labelled ``instants`` (``datetime64`` of a day or finer, no NaT) and the index
        of the first instant that is no label (between two, or past the range of int64 counts), or
        None. Exact: integer counts in the finer of the instants' and the scale's resolutions."""
        unit = _unit_of(instants.dtype)
        finest = max(unit, self.resolution, key=RESOLUTIONS.index)
        counts = instants.astype(f"datetime64[{unit}]").astype(np.int64)
        scale = _per(unit, finest)
        origin = self.origin * _per(self.resolution, finest)
        step = self.step * _per(self.resolution, finest)
        if not (_INT64[0] <= origin <= _INT64[1] and _INT64[0] <= step <= _INT64[1]):
            return np.zeros(len(counts), np.int64), 0 if len(counts) else None
        bad = np.abs(counts) > _INT64[1] // scale
        scaled = counts * np.int64(scale)
        with np.errstate(over="ignore"):
            offsets = scaled - np.int64(origin)
        bad |= ((scaled ^ np.int64(origin)) & (scaled ^ offsets)) < 0  # the subtraction wrapped
        bad |= offsets % np.int64(step) != 0
        first = int(np.flatnonzero(bad)[0]) if bad.any() else None
        return np.where(bad, 0, offsets // np.int64(step)), first

    def nanoseconds(self, cell: int) -> int:
        """The label of ``cell`` as nanoseconds since 1970-01-01 (a Python integer: exact at any cell)."""
        return (self.origin + cell * self.step) * _per(self.resolution, "ns")

    def to_text(self) -> str:
        """``SCALE n UNIT[S] [OFFSET 'iso']`` in the coarsest whole unit of the step."""
        count, unit = self.step, self.resolution
        if unit == "D" and count % 7 == 0:
            count, word = count // 7, "WEEK"
        else:
            while unit != "D":
                coarser = RESOLUTIONS[RESOLUTIONS.index(unit) - 1]
                if count % _FINER[coarser]:
                    break
                count, unit = count // _FINER[coarser], coarser
            word = _WORD_OF[unit]
        text = f"SCALE {count} {word}{'' if abs(count) == 1 else 'S'}"
        if self.origin != 0:
            text += f" OFFSET '{self.origin_text()}'"
        return text

    def origin_text(self) -> str:
        """The origin in ISO 8601 at the scale's resolution (days show only the date)."""
        return _iso(np.datetime64(self.origin, self.resolution))

    def label_text(self, cell: int) -> str:
        """The label of one cell in ISO 8601, as :meth:`origin_text` writes it."""
        return _iso(self.coordinate(cell))

    def regridded(self, low: int, block: int) -> TimeScale:
        """The scale of a regrid by ``block`` cells from ``low``: each output cell is labelled with the
        time of its block's first input cell."""
        if block == 1:
            return self
        step = self.step * block
        return TimeScale(step, self.origin + low * self.step - low * step, self.resolution)

    def to_json(self) -> dict:
        return {"kind": "time", "step": self.step, "origin": self.origin, "resolution": self.resolution}

    @classmethod
    def from_json(cls, data: dict) -> TimeScale:
        return cls(int(data["step"]), int(data["origin"]), str(data["resolution"]))


def _iso(instant: np.datetime64) -> str:
    unit = np.datetime_data(instant.dtype)[0]
    return str(instant.astype("datetime64[m]") if unit == "h" else instant)  # 'T06:00', not 'T06'


def _unit_of(dtype: np.dtype) -> str:
    """The resolution of a ``datetime64``/``timedelta64`` dtype (weeks count as days); months, years
    and units finer than nanoseconds are refused."""
    unit, _ = np.datetime_data(dtype)
    if unit == "W":
        return "D"
    if unit in ("Y", "M"):
        raise SchemaError("months and years are not a fixed length; give the time step in days or finer")
    if unit not in RESOLUTIONS:
        raise SchemaError(f"time unit {unit!r} is not one of {', '.join(RESOLUTIONS)}")
    return unit


def instant_nanoseconds(value: object) -> int:
    """A time label (any :func:`to_instant` form) as nanoseconds since 1970-01-01, exactly."""
    instant = to_instant(value)
    unit = _unit_of(instant.dtype)
    return int(instant.astype(np.int64)) * _per(unit, "ns")


def period_nanoseconds(value: object) -> tuple[int, int]:
    """The first and last nanosecond of the period a time label names, since 1970-01-01. ISO text
    names the whole period of its precision, as pandas' partial-string indexing does ('2026-01' is
    all of January, '2026-01-02T06' the hour); any other label is one instant."""
    first = instant_nanoseconds(value)
    if not isinstance(value, str):
        return first, first
    local, offset = _split_zone(value)
    written = np.datetime64(local.replace(" ", "T", 1))
    unit = np.datetime_data(written.dtype)[0]
    following = (
        (written + np.timedelta64(1, unit)).astype("datetime64[D]") if unit in ("Y", "M", "W") else None
    )
    if following is None:
        return first, first + _per(_unit_of(written.dtype), "ns") - 1
    return first, (int(following.astype(np.int64)) * _per("D", "ns") - offset * _per("m", "ns")) - 1


def _split_zone(text: str) -> tuple[str, int]:
    """``text`` without its zone designator, and the designator's offset from UTC in minutes
    (``Z`` 0, ``+05:30`` 330, ``-0800`` -480; none written: 0, the time is UTC)."""
    text = text.strip()
    zone = _ZONE.search(text) if "T" in text or " " in text else None
    if zone is None or zone.group() == "Z":
        return (text if zone is None else text[: zone.start()]), 0
    digits = zone.group()[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 18 or minutes > 59:
        raise SchemaError(f"time {text!r} has the offset {zone.group()}, which is no UTC offset")
    sign = -1 if zone.group()[0] == "-" else 1
    return text[: zone.start()], sign * (60 * hours + minutes)


def to_instant(value: object) -> np.datetime64:
    """A time label given as ISO 8601 text, ``datetime.datetime``/``date``, ``numpy.datetime64`` or
    ``pandas.Timestamp`` as a ``numpy.datetime64`` (UTC; an aware time is converted to UTC)."""
    if hasattr(value, "to_datetime64") and hasattr(value, "tzinfo"):  # pandas.Timestamp
        if np.isnat(value.to_datetime64()):  # pandas.NaT, which would compare before every time
            raise SchemaError("a time label may not be NaT")
        if value.tzinfo is not None:
            value = value.tz_convert("UTC").tz_localize(None)
        return value.to_datetime64()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return np.datetime64(value)
    if isinstance(value, dt.date):
        return np.datetime64(value, "D")
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise SchemaError("a time label may not be NaT")
        if np.datetime_data(value.dtype)[0] in ("Y", "M", "W"):
            return value.astype("datetime64[D]")  # the first day of the year, month or week
        if np.datetime_data(value.dtype)[0] == "generic":
            raise SchemaError("a time label needs a unit (numpy.datetime64 without one)")
        return value.astype(f"datetime64[{_unit_of(value.dtype)}]")  # a multiplier such as [10s] undone
    if isinstance(value, str):  # with an offset from UTC, the instant it names (as Spark reads it)
        text, offset = _split_zone(value)
        try:
            local = to_instant(np.datetime64(text.replace(" ", "T", 1)))
            return local - np.timedelta64(offset, "m") if offset else local
        except ValueError:
            raise SchemaError(
                f"{value!r} is not an ISO 8601 time such as '2026-01-31' or '2026-01-31T06:00'"
            ) from None
    raise SchemaError(
        f"a time label is ISO text, a datetime, numpy.datetime64 or pandas.Timestamp; got {value!r}"
    )


__all__ = [
    "RESOLUTIONS",
    "UNIT_WORDS",
    "TimeScale",
    "instant_nanoseconds",
    "period_nanoseconds",
    "to_instant",
]
