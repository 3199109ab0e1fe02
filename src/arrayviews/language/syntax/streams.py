"""The syntax tree of streams and stream views: CREATE STREAM, the three forms of CREATE VIEW
(a hand-written ViewDF, a pattern query, a sliding-window query), ALTER VIEW and DROP STREAM."""

from __future__ import annotations

from dataclasses import dataclass, field

from arrayviews.language.syntax.base import Statement, _identifier, _set
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.streams.queries import PatternQuery, WindowQuery

#: Time units of PARTITION LENGTH and WINDOW, in seconds.
TIME_UNITS = {"second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}


@dataclass(frozen=True)
class StreamColumn:
    """One column of CREATE STREAM: a name and a Spark SQL type (``timestamp``, ``string``, ...)."""

    name: str
    type: str

    def __post_init__(self) -> None:
        _identifier(self.name, "column")
        if not isinstance(self.type, str) or not self.type.strip():
            raise ValueError(f"column {self.name} needs a type")


@dataclass(frozen=True)
class CreateStream(Statement):
    """``CREATE STREAM name (column type, ...) PARTITION LENGTH n [unit] TIME COLUMN column
    [WITH MAX GAP n PARTS]``.

    ``partition_length`` is in seconds; ``time_column`` names a timestamp column;
    ``max_gap_parts`` (None: the default) how many parts past the newest part a batch may reach.
    """

    name: str
    columns: tuple[StreamColumn, ...]
    partition_length: int
    time_column: str
    max_gap_parts: int | None = None

    def __post_init__(self) -> None:
        _identifier(self.name, "stream")
        columns = tuple(self.columns)
        if not columns or not all(isinstance(c, StreamColumn) for c in columns):
            raise ValueError("a stream needs at least one column")
        _set(self, "columns", columns)
        if isinstance(self.partition_length, bool) or not isinstance(self.partition_length, int):
            raise ValueError(f"the partition length must be an integer, got {self.partition_length!r}")
        if self.partition_length < 1:
            raise ValueError(f"the partition length must be positive, got {self.partition_length}")
        _identifier(self.time_column, "column")
        gap = self.max_gap_parts
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, int) or gap < 1):
            raise ValueError(f"the largest gap must be a positive number of parts, got {gap!r}")

    @property
    def ddl(self) -> str:
        """The columns as Spark DDL (``ts timestamp, src string``)."""
        return ", ".join(f"{c.name} {c.type}" for c in self.columns)


@dataclass(frozen=True)
class DropStream(Statement):
    """``DROP STREAM name``."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "stream")


def _lateness(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"the lateness allowance is a number of parts >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class CreateViewDF(Statement):
    """``CREATE VIEW H [WITH LATENESS n PARTS] AS INITIALIZE H[i] AS ... UPDATE H[j] AS ...
    PARTITION LENGTH n``."""

    definition: ViewDFDefinition
    lateness: int | None = None

    def __post_init__(self) -> None:
        _set(self, "lateness", _lateness(self.lateness))

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True)
class CreatePatternView(Statement):
    """``CREATE VIEW V AS SELECT ... FROM S PATTERN [...] ...``: translated into ViewDFs."""

    name: str
    query: PatternQuery
    text: str = field(default="", compare=False)
    lateness: int | None = None

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        _set(self, "lateness", _lateness(self.lateness))


#: A sliding-window view's plans (streams/windows.py): chosen by cost, or forced.
WINDOW_PLANS = ("auto", "incremental", "recompute")


@dataclass(frozen=True)
class CreateWindowView(Statement):
    """``CREATE VIEW V [USING plan] AS SELECT ... FROM S [WINDOW n MINUTES] ...``: translated into
    ViewDFs by the ``plan`` (one of :data:`WINDOW_PLANS`)."""

    name: str
    query: WindowQuery
    text: str = field(default="", compare=False)
    lateness: int | None = None
    plan: str = "auto"

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        _set(self, "lateness", _lateness(self.lateness))
        plan = self.plan.lower() if isinstance(self.plan, str) else self.plan
        if plan not in WINDOW_PLANS:
            raise ValueError(f"a window view's plan is one of {', '.join(WINDOW_PLANS)}, got {self.plan!r}")
        _set(self, "plan", plan)


#: The statements that create a stream view.
CreateStreamView = CreateViewDF | CreatePatternView | CreateWindowView


@dataclass(frozen=True)
class AlterViewLateness(Statement):
    """``ALTER VIEW V SET LATENESS n PARTS``: how many parts late rows may be behind before the view's
    helpers are rebuilt from the base parts."""

    name: str
    lateness: int

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        if _lateness(self.lateness) is None:
            raise ValueError("ALTER VIEW ... SET LATENESS needs a number of parts")


@dataclass(frozen=True)
class AlterViewKeepVersions(Statement):
    """``ALTER VIEW V SET KEEP n VERSIONS``: how many of its newest versions a stream view keeps
    (older ones are forgotten after maintenance, ``streams.bounded_history``)."""

    name: str
    versions: int

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        if isinstance(self.versions, bool) or not isinstance(self.versions, int) or self.versions < 1:
            raise ValueError("ALTER VIEW ... SET KEEP needs a number of versions of at least 1")


__all__ = [
    "TIME_UNITS",
    "AlterViewKeepVersions",
    "AlterViewLateness",
    "CreatePatternView",
    "CreateStream",
    "CreateStreamView",
    "CreateViewDF",
    "CreateWindowView",
    "DropStream",
    "StreamColumn",
    "WINDOW_PLANS",
]
