"""The largest counts and durations accepted (stream partition lengths, gaps, lateness, windows,
versions kept): one check, called by the Python API and by the statement parser alike."""

from __future__ import annotations

from arrayviews.model.errors import ValidationError

#: The largest count (parts of gap or lateness, versions kept): it fits a signed 64-bit integer.
INT64_MAX = 2**63 - 1
#: The longest duration in seconds (partition and window lengths): its microseconds fit in int64.
MAX_SECONDS = INT64_MAX // 1_000_000


def at_most(value: int, limit: int, what: str, owner: str | None = None) -> int:
    """``value`` when it is at most ``limit``; else a ValidationError naming ``what`` (e.g. "the
    partition length in seconds"), the value and the limit, prefixed with ``owner`` when given
    (e.g. "stream M")."""
    if value > limit:
        prefix = f"{owner}: " if owner else ""
        raise ValidationError(
            f"{prefix}{what} is too large: {value} (at most {limit})", array=owner, value=value
        )
    return value


__all__ = ["INT64_MAX", "MAX_SECONDS", "at_most"]
