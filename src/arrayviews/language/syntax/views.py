"""The syntax tree of array views: similarity shapes, dimension mappings, the two SELECT forms of
CREATE ARRAY VIEW, and the statements that refresh, verify, maintain and drop views."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from arrayviews.language.syntax.arrays import ArrayName, Window
from arrayviews.language.syntax.base import Statement, _identifier, _identifiers, _integers, _set

#: Aggregate functions of similarity views (``mean`` is read as ``avg``).
VIEW_FUNCTIONS = ("count", "sum", "avg", "min", "max")
#: Refresh strategies of ``REFRESH VIEW ... USING``.
REFRESH_STRATEGIES = ("auto", "full", "baseline")

#: Where parts of a view definition were written: (part, line, column), e.g. ("on", 1, 60).
Locations = tuple[tuple[str, int, int], ...]


def _locations() -> Locations:
    return field(default=(), compare=False, repr=False)


class ShapeExpr:
    """Base of the similarity shapes (``L1(1)``, ``BOX(-2:0, -1:1)``, ``PRODUCT(...)``, ...).

    Shapes are kept symbolic: the executor builds the offsets once the number of dimensions is known
    (a ball takes whatever its place leaves over). ``function`` is the name used in statements.
    """

    __slots__ = ()
    function: ClassVar[str]

    def fixed_ndim(self) -> int | None:
        """The number of dimensions the shape has by itself (None: it takes the array's)."""
        return None


@dataclass(frozen=True)
class BallShape(ShapeExpr):
    """``L1(radius)`` or ``LINF(radius)``: the offsets within ``radius`` in that norm, over the
    dimensions its place leaves, or over ``ndim`` dimensions when given (``L1(1, 3)``)."""

    norm: str
    radius: int
    ndim: int | None = None

    NORMS: ClassVar[tuple[str, ...]] = ("L1", "LINF")

    def __post_init__(self) -> None:
        if not isinstance(self.norm, str) or self.norm.upper() not in self.NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; use {' or '.join(self.NORMS)}")
        _set(self, "norm", self.norm.upper())
        if isinstance(self.radius, bool) or not isinstance(self.radius, int) or self.radius < 0:
            raise ValueError(f"{self.norm}: the radius must be an integer >= 0, got {self.radius!r}")
        if self.ndim is not None and (
            isinstance(self.ndim, bool) or not isinstance(self.ndim, int) or self.ndim < 1
        ):
            raise ValueError(f"{self.norm}: the dimension count must be an integer >= 1, got {self.ndim!r}")

    @property
    def function(self) -> str:  # type: ignore[override]
        return self.norm

    def fixed_ndim(self) -> int | None:
        return self.ndim


@dataclass(frozen=True)
class BoxShape(ShapeExpr):
    """``BOX(low_1:high_1, ...)``: every offset with ``low_k <= o_k <= high_k``."""

    function: ClassVar[str] = "BOX"
    ranges: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        ranges = tuple((low, high) for low, high in self.ranges)
        if not ranges:
            raise ValueError("BOX needs a low:high range per dimension")
        for low, high in ranges:
            _integers((low, high), "BOX ranges")
            if low > high:
                raise ValueError(f"BOX range {low}:{high} is empty (low > high)")
        _set(self, "ranges", ranges)

    def fixed_ndim(self) -> int | None:
        return len(self.ranges)


def _shapes(parts: object, what: str, fewest: int) -> tuple[ShapeExpr, ...]:
    shapes = tuple(parts)
    if len(shapes) < fewest:
        raise ValueError(f"{what} needs at least {fewest} shapes")
    for part in shapes:
        if not isinstance(part, ShapeExpr):
            raise ValueError(f"{what}: not a shape: {part!r}")
    return shapes


@dataclass(frozen=True)
class ProductShape(ShapeExpr):
    """``PRODUCT(s_1, s_2, ...)``: the shapes over consecutive dimensions, every combination of offsets."""

    function: ClassVar[str] = "PRODUCT"
    parts: tuple[ShapeExpr, ...]

    def __post_init__(self) -> None:
        _set(self, "parts", _shapes(self.parts, "PRODUCT", 2))
        if sum(p.fixed_ndim() is None for p in self.parts) > 1:
            raise ValueError(
                "PRODUCT: at most one part may take its dimensions from the array (L1, LINF); "
                "give the others with BOX"
            )

    def fixed_ndim(self) -> int | None:
        sizes = [p.fixed_ndim() for p in self.parts]
        return None if None in sizes else sum(sizes)


@dataclass(frozen=True)
class SetShape(ShapeExpr):
    """``UNION(s_1, s_2, ...)``, ``INTERSECTION(s_1, s_2, ...)`` or ``DIFFERENCE(s_1, s_2)``."""

    operation: str
    parts: tuple[ShapeExpr, ...]

    OPERATIONS: ClassVar[tuple[str, ...]] = ("UNION", "INTERSECTION", "DIFFERENCE")

    def __post_init__(self) -> None:
        if not isinstance(self.operation, str) or self.operation.upper() not in self.OPERATIONS:
            raise ValueError(f"unknown shape operation {self.operation!r}; use {', '.join(self.OPERATIONS)}")
        _set(self, "operation", self.operation.upper())
        _set(self, "parts", _shapes(self.parts, self.operation, 2))
        if self.operation == "DIFFERENCE" and len(self.parts) != 2:
            raise ValueError("DIFFERENCE takes exactly two shapes")
        sizes = {p.fixed_ndim() for p in self.parts} - {None}
        if len(sizes) > 1:
            raise ValueError(
                f"{self.operation}: the shapes have different numbers of dimensions {sorted(sizes)}"
            )

    @property
    def function(self) -> str:  # type: ignore[override]
        return self.operation

    def fixed_ndim(self) -> int | None:
        sizes = {p.fixed_ndim() for p in self.parts} - {None}
        return sizes.pop() if sizes else None


@dataclass(frozen=True)
class AxisEquation:
    """``right.target = floor(left.source * multiplier / divisor) + offset`` (one equality of ON)."""

    target: str
    source: str
    multiplier: int = 1
    divisor: int = 1
    offset: int = 0

    def __post_init__(self) -> None:
        _identifier(self.target, "dimension")
        _identifier(self.source, "dimension")
        _integers((self.multiplier, self.divisor, self.offset), "mapping factors")
        if self.multiplier == 0:
            raise ValueError(f"mapping of {self.target}: the multiplier must not be 0")
        if self.divisor < 1:
            raise ValueError(f"mapping of {self.target}: the divisor must be at least 1, got {self.divisor}")

    @property
    def is_plain(self) -> bool:
        """True for a plain equality ``right.target = left.source``."""
        return (self.multiplier, self.divisor, self.offset) == (1, 1, 0)


@dataclass(frozen=True)
class ViewAggregateItem:
    """One output of a similarity view: ``function(alias.attribute)`` or ``count(*)``, named ``name``.

    ``table`` is the FROM alias naming the side (None for ``count(*)``); ``name`` defaults to SciDB's
    ``<attribute>_<function>`` (``count`` for ``count(*)``).
    """

    function: str
    table: str | None = None
    attribute: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        function = str(self.function).lower()
        function = {"mean": "avg"}.get(function, function)
        if function not in VIEW_FUNCTIONS:
            raise ValueError(
                f"unknown view aggregate {self.function!r}; views support {', '.join(VIEW_FUNCTIONS)}"
            )
        _set(self, "function", function)
        if (self.table is None) != (self.attribute is None):
            raise ValueError("a view aggregate names an attribute with its alias (a.v), or is count(*)")
        if self.attribute is None and function != "count":
            raise ValueError(f"{function}(*) is not an aggregate; name an attribute, e.g. {function}(a.v)")
        if self.attribute is not None:
            _identifier(self.table, "alias")
            _identifier(self.attribute, "attribute")
        if self.name is None:
            _set(self, "name", self.default_name)
        _identifier(self.name, "output attribute")

    @property
    def default_name(self) -> str:
        return "count" if self.attribute is None else f"{self.attribute}_{self.function}"


class ViewQuery:
    """Base of the SELECT forms that define a view."""

    __slots__ = ()


@dataclass(frozen=True)
class WindowSelect(ViewQuery):
    """``SELECT * FROM window(A, before_1, after_1, ..., aggregates...)``: a window view over an array."""

    window: Window

    def __post_init__(self) -> None:
        if not isinstance(self.window, Window) or not isinstance(self.window.source, ArrayName):
            raise ValueError("a window view selects * FROM window(array, extents..., aggregates...)")

    @property
    def base(self) -> str:
        return self.window.source.name


@dataclass(frozen=True)
class SimilaritySelect(ViewQuery):
    """``SELECT aggregates FROM left a SIMILARITY JOIN right b [ON equations] WITH SHAPE s GROUP BY a.dims``.

    The first FROM array is the left side (the view has its cells), the second the right side (whose
    cells around each left cell's image are aggregated). ``mapping`` None means no ON clause (the
    identity). ``group_by`` holds the left alias's dimension names. ``locations`` records where the
    parts were written, so that the executor can point at them (not part of equality).
    """

    aggregates: tuple[ViewAggregateItem, ...]
    left: str
    right: str
    shape: ShapeExpr
    group_by: tuple[str, ...]
    mapping: tuple[AxisEquation, ...] | None = None
    left_alias: str | None = None
    right_alias: str | None = None
    locations: Locations = _locations()

    def __post_init__(self) -> None:
        _identifier(self.left, "array")
        _identifier(self.right, "array")
        _set(self, "left_alias", _identifier(self.left_alias or self.left, "alias"))
        _set(self, "right_alias", _identifier(self.right_alias or self.right, "alias"))
        if self.left_alias == self.right_alias:
            raise ValueError(
                f"both sides of the similarity join are called {self.left_alias}: give them different aliases"
            )
        items = tuple(self.aggregates)
        if not items or not all(isinstance(a, ViewAggregateItem) for a in items):
            raise ValueError("a similarity view needs at least one aggregate, e.g. count(*)")
        names = [a.name for a in items]
        for item in items:
            if item.table is not None and item.table not in (self.left_alias, self.right_alias):
                raise ValueError(
                    f"unknown alias {item.table!r}; FROM names {self.left_alias} (left) and {self.right_alias} (right)"
                )
            if names.count(item.name) > 1:
                raise ValueError(f"view output {item.name!r} is named twice; rename one with AS")
        _set(self, "aggregates", items)
        if not isinstance(self.shape, ShapeExpr):
            raise ValueError(f"not a shape: {self.shape!r}")
        _set(self, "group_by", _identifiers(self.group_by, "dimension"))
        if self.mapping is not None:
            equations = tuple(self.mapping)
            if not equations or not all(isinstance(e, AxisEquation) for e in equations):
                raise ValueError("ON needs at least one equality right.dim = left.dim")
            targets = [e.target for e in equations]
            for target in targets:
                if targets.count(target) > 1:
                    raise ValueError(f"ON maps dimension {target} of {self.right_alias} twice")
            _set(self, "mapping", equations)
        _set(self, "locations", tuple(self.locations))

    def side(self, alias: str) -> str:
        """``left`` or ``right``: which side an alias names."""
        return "left" if alias == self.left_alias else "right"

    def location(self, part: str) -> tuple[int, int] | None:
        """(line, column) where ``part`` was written, when known."""
        for name, line, column in self.locations:
            if name == part:
                return line, column
        return None


@dataclass(frozen=True)
class CreateView(Statement):
    """``CREATE ARRAY VIEW name [WITH CHUNKS (n, ...)] AS SELECT ...``: a materialized view."""

    name: str
    query: ViewQuery
    chunks: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        if not isinstance(self.query, ViewQuery):
            raise ValueError(f"CREATE ARRAY VIEW needs a view query, got {self.query!r}")
        if self.chunks is not None:
            _set(self, "chunks", _integers(self.chunks, "chunk lengths"))
            if not self.chunks or any(n < 1 for n in self.chunks):
                raise ValueError(f"chunk lengths must be positive integers, got {self.chunks}")


@dataclass(frozen=True)
class DropView(Statement):
    """``DROP VIEW name``."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "view")


@dataclass(frozen=True)
class ShowStatus(Statement):
    """``SHOW STATUS OF name``: per base array, the version the view reflects and the current one."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "view")


@dataclass(frozen=True)
class RefreshView(Statement):
    """``REFRESH VIEW name [USING AUTO | FULL | BASELINE] [ON base, ...]`` (strategy None: the
    API's default, auto; bases None: every base array of the view)."""

    name: str
    strategy: str | None = None
    bases: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        if self.bases is not None:
            _set(self, "bases", _identifiers(self.bases, "base array"))
        if self.strategy is not None:
            if str(self.strategy).lower() not in REFRESH_STRATEGIES:
                raise ValueError(
                    f"unknown refresh strategy {self.strategy!r}; use {' or '.join(REFRESH_STRATEGIES)}"
                )
            _set(self, "strategy", self.strategy.lower())


@dataclass(frozen=True)
class AlterViewRefreshLimit(Statement):
    """``ALTER VIEW V SET REFRESH LIMIT n SECONDS`` (``NONE``: seconds None): the refresh-time
    limit an array view is kept within (``View.set_refresh_limit``)."""

    name: str
    seconds: float | None

    def __post_init__(self) -> None:
        _identifier(self.name, "view")
        if self.seconds is not None:
            if (
                isinstance(self.seconds, bool)
                or not isinstance(self.seconds, int | float)
                or not self.seconds > 0
            ):
                raise ValueError("ALTER VIEW ... SET REFRESH LIMIT needs a number of seconds above 0")
            _set(self, "seconds", float(self.seconds))


@dataclass(frozen=True)
class SimilarityQuery(Statement):
    """A similarity aggregate as a query: ``SELECT aggregates FROM A a SIMILARITY JOIN B b ... WITH
    SHAPE s GROUP BY a.dims [USING VIEW V | USING BASE ARRAYS]`` (``through`` None: a view when the
    cost model predicts it cheaper; ``"none"``: the base arrays; else that view)."""

    query: SimilaritySelect
    through: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.query, SimilaritySelect):
            raise ValueError("a similarity query holds a SimilaritySelect")
        if self.through is not None and self.through != "none":
            _set(self, "through", _identifier(self.through, "view"))


@dataclass(frozen=True)
class VerifyView(Statement):
    """``VERIFY VIEW name``: recompute from scratch and compare (True when they agree)."""

    name: str

    def __post_init__(self) -> None:
        _identifier(self.name, "view")


@dataclass(frozen=True)
class Maintain(Statement):
    """``MAINTAIN [ALL]``: one maintenance pass (``db.maintain(refresh_all)``): stream views brought
    up to date, an ONLINE decision for each array view with a refresh limit and, with ``ALL``, every
    other array view with pending batches refreshed."""

    refresh_all: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.refresh_all, bool):
            raise ValueError(f"MAINTAIN: refresh_all must be True or False, got {self.refresh_all!r}")


__all__ = [
    "REFRESH_STRATEGIES",
    "VIEW_FUNCTIONS",
    "AxisEquation",
    "BallShape",
    "BoxShape",
    "CreateView",
    "DropView",
    "Locations",
    "Maintain",
    "ProductShape",
    "RefreshView",
    "AlterViewRefreshLimit",
    "SetShape",
    "ShapeExpr",
    "ShowStatus",
    "SimilarityQuery",
    "SimilaritySelect",
    "VerifyView",
    "ViewAggregateItem",
    "ViewQuery",
    "WindowSelect",
]
