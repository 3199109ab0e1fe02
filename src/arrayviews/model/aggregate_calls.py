"""Aggregate calls such as ``avg(v)`` or ``count(*) as n``: parsing, output names, types and checks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.names import IDENTIFIER, name_problem
from arrayviews.model.text_lines import position
from arrayviews.model.types import computing_problem, normalize_type

#: Types that have an order but no arithmetic: count, min and max only.
ORDERED_ONLY: frozenset[str] = frozenset({"string"})
#: Canonical aggregate function names.
FUNCTIONS: tuple[str, ...] = ("count", "sum", "avg", "min", "max", "var", "stdev")
# SciDB spellings accepted in queries, mapped to the canonical names.
_FUNCTION_ALIASES = {"mean": "avg", "std": "stdev", "stddev": "stdev", "variance": "var"}
# Functions that treat their input as numbers; over bool only sum and avg are allowed (as 0/1).
_NUMERIC_ONLY = ("var", "stdev")
_INTEGER_TYPES = ("int32", "int64", "bool")

_NAME = IDENTIFIER
_WORD = re.compile(r"[^\W\d]\w*")
_QUOTED = re.compile(r"`([^`]*)`")
_SPACE = re.compile(r"\s*")


def canonical_function(name: str) -> str:
    """The canonical name of aggregate function ``name`` (case-insensitive, SciDB aliases allowed)."""
    key = name.strip().lower()
    key = _FUNCTION_ALIASES.get(key, key)
    if key not in FUNCTIONS:
        raise ValueError(f"unknown aggregate function {name!r}; supported: {', '.join(FUNCTIONS)}")
    return key


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate: ``function`` over ``attribute`` (None means ``count(*)``), optionally renamed.

    ``function`` is normalised to its canonical name. ``alias`` is the name given with ``as`` (or None);
    :attr:`output_name` is the name of the result attribute either way.
    """

    function: str
    attribute: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "function", canonical_function(self.function))
        if self.attribute is None and self.function != "count":
            raise ValueError(f"{self.function} needs an attribute; only count accepts *")

    @property
    def output_name(self) -> str:
        """The alias if one was given, else SciDB's default ``<attribute>_<function>`` (``count`` for *)."""
        if self.alias is not None:
            return self.alias
        if self.attribute is None:
            return "count"
        return f"{self.attribute}_{self.function}"

    def to_text(self) -> str:
        text = f"{self.function}({self.attribute or '*'})"
        return text if self.alias is None else f"{text} as {self.alias}"

    def __str__(self) -> str:
        return self.to_text()


class _Scanner:
    """A cursor over the call text that reads one token at a time and reports 1-based columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        self.pos = _SPACE.match(self.text, self.pos).end()

    def fail(self, message: str, expected: tuple[str, ...] = (), pos: int | None = None) -> ParseError:
        pos = self.pos if pos is None else pos
        line, column = position(self.text, pos)
        return ParseError(message, text=self.text, line=line, column=column, expected=expected)

    def name(self, what: str) -> tuple[str, int]:
        """A name: a word (read whole, letters of any script included, so that a message quotes
        all of it) or an identifier in backquotes, as Spark SQL writes names (``avg(`update`)``)."""
        self.skip_space()
        quoted = _QUOTED.match(self.text, self.pos)
        if quoted is not None and _NAME.fullmatch(quoted.group(1)):
            self.pos = quoted.end()
            return quoted.group(1), quoted.start()
        match = _WORD.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"expected {what}", (what,))
        self.pos = match.end()
        return match.group(), match.start()

    def punct(self, char: str) -> bool:
        self.skip_space()
        if self.text.startswith(char, self.pos):
            self.pos += 1
            return True
        return False

    def expect(self, char: str) -> None:
        if not self.punct(char):
            raise self.fail(f"expected {char!r}", (repr(char),))

    def at_end(self) -> bool:
        self.skip_space()
        return self.pos == len(self.text)


def parse_aggregate(text: str) -> AggregateCall:
    """Parse ``function(attribute)`` or ``count(*)``, optionally followed by ``as alias``.

    Function names are case-insensitive and may use SciDB aliases (``mean``, ``std``, ``stddev``,
    ``variance``). Raises ParseError with the column of the offending token.
    """
    scan = _Scanner(text)
    name, name_pos = scan.name("aggregate function")
    try:
        function = canonical_function(name)
    except ValueError:
        raise scan.fail(
            f"unknown aggregate function {name!r}", FUNCTIONS + tuple(_FUNCTION_ALIASES), name_pos
        ) from None
    scan.expect("(")
    scan.skip_space()
    star_pos = scan.pos
    attribute: str | None = None
    if scan.punct("*"):
        if function != "count":
            raise scan.fail(
                f"{function} needs an attribute; only count accepts *", ("attribute name",), star_pos
            )
    else:
        attribute, _ = scan.name("attribute name")
    scan.expect(")")
    alias: str | None = None
    if not scan.at_end():
        keyword, keyword_pos = scan.name("as")
        if keyword.lower() != "as" or text.startswith("`", keyword_pos):
            raise scan.fail(f"unexpected {keyword!r} after the call", ("as", "end of text"), keyword_pos)
        alias, alias_pos = scan.name("alias")
        problem = name_problem(alias)
        if problem is not None:
            raise scan.fail(f"invalid alias {alias!r}: {problem}", (), alias_pos)
        if not scan.at_end():
            raise scan.fail("unexpected text after the alias", ("end of text",))
    return AggregateCall(function, attribute, alias)


def output_type(call: AggregateCall, input_type: str | None) -> str:
    """The attribute type of ``call``'s result when its input attribute has type ``input_type``.

    count gives int64; sum gives int64 over int32/int64/bool and float64 over floats; avg, var and
    stdev give float64; min and max keep the input type.
    """
    if call.function == "count":
        return "int64"
    if input_type is None:
        raise ValueError(f"{call}: the input type is needed")
    kind = normalize_type(input_type)
    if kind in ORDERED_ONLY and call.function in ("min", "max"):
        return kind
    problem = computing_problem(kind, f"{call.function}({call.attribute})")
    if problem is not None:
        raise ValidationError(problem, column=call.attribute, value=kind)
    if call.function == "sum":
        return "int64" if kind in _INTEGER_TYPES else "float64"
    if call.function in ("min", "max"):
        return kind
    return "float64"


def output_nullable(call: AggregateCall, input_nullable: bool = False) -> bool:
    """True if ``call``'s result may be null in a group that exists.

    var and stdev are null where a group has fewer than two values. A group exists only if it has at
    least one cell, so the other functions are never null unless the input attribute is nullable: then
    sum, avg, min and max are null where every value of the group is null (count is 0 there).
    """
    if call.function in ("var", "stdev"):
        return True
    if call.function == "count":
        return False
    return input_nullable


def check_call(
    call: AggregateCall, attribute_types: Mapping[str, str], array: str | None = None, window: bool = False
) -> None:
    """Raise ValidationError if ``call`` cannot run over attributes with the given types.

    Unknown attributes are rejected (the message lists the available ones), and so are var and stdev
    over bool. sum and avg over bool are allowed and treat true as 1 and false as 0 (count of true
    values and fraction of true values); min and max over bool are logical and/or. Strings take
    count, min and max (by UTF-8 bytes, Spark's order), but no window (``window=True``) at all.
    A refusal names ``array`` (when given), the attribute and its type.
    """
    if call.attribute is None:
        return
    if call.attribute not in attribute_types:
        available = ", ".join(attribute_types) or "(none)"
        raise ValidationError(
            f"{call}: unknown attribute {call.attribute!r}; available: {available}", column=call.attribute
        )
    kind = normalize_type(attribute_types[call.attribute])
    where = f"array {array}, attribute {call.attribute} ({kind}): " if array else ""
    if window and kind in ORDERED_ONLY:
        raise ValidationError(
            f"{where}{call} in a window does not apply to {kind} values (windows compute over numbers; "
            "count, min and max of strings work in regrid and aggregate)",
            array=array,
            column=call.attribute,
            value=kind,
        )
    problem = None
    if call.function != "count" and not (kind in ORDERED_ONLY and call.function in ("min", "max")):
        problem = computing_problem(kind, str(call))
    if problem is not None:
        raise ValidationError(f"{where}{problem}", array=array, column=call.attribute, value=kind)
    if kind == "bool" and call.function in _NUMERIC_ONLY:
        raise ValidationError(
            f"{call}: {call.function} is not defined over bool attributes", column=call.attribute
        )


def check_calls(
    calls: Iterable[AggregateCall],
    attribute_types: Mapping[str, str],
    array: str | None = None,
    window: bool = False,
) -> None:
    """Check every call with :func:`check_call` and reject two calls with the same output name."""
    seen: set[str] = set()
    for call in calls:
        check_call(call, attribute_types, array, window)
        if call.output_name in seen:
            where = f"array {array}: " if array else ""  # before: the array was not named
            raise ValidationError(
                f"{where}two aggregates produce {call.output_name!r}; rename one with 'as'",
                array=array,
                column=call.output_name,
            )
        seen.add(call.output_name)
