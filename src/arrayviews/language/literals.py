"""How statements show a literal in their errors, and why a literal is no time of a datetime64 attribute."""

from __future__ import annotations

from arrayviews.language import syntax as ast
from arrayviews.model.errors import SchemaError
from arrayviews.model.time_scale import instant_nanoseconds


def literal_text(value: ast.Value) -> str:
    """A literal as a statement writes it (``true``, ``'text'``, ``1.5``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def time_problem(value: ast.Value) -> str | None:
    """Why an INSERT literal is no value of a datetime64 attribute (ISO text within datetime64[ns])."""
    if not isinstance(value, str):
        return f"{literal_text(value)} is not a time (write it as text, e.g. '2026-01-31T06:00', UTC)"
    try:
        nanoseconds = instant_nanoseconds(value)
    except SchemaError as error:
        return str(error)
    if not -(2**63) < nanoseconds < 2**63:
        return f"{value!r} is outside the datetime64[ns] range (1677-09-21 to 2262-04-11)"
    return None
