"""Floating-point grouping keys shown as Spark shows them in an in-process (DuckDB) query: Spark
normalizes each key before grouping, so ``-0.0`` and ``0.0`` are one group shown as ``0.0``; DuckDB
groups them together too but shows whichever zero it met first."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from sqlglot import exp

from arrayviews.execution.decimal_guard import annotated

_FLOATS = {exp.DataType.Type.FLOAT: "FLOAT", exp.DataType.Type.DOUBLE: "DOUBLE"}


class KeysUntyped(Exception):
    """A query groups by a key that may be a float whose type sqlglot cannot find."""


def _reads_floats(schemas: Mapping[str, pa.Schema]) -> bool:
    return any(pa.types.is_floating(f.type) for schema in schemas.values() for f in schema)


def normalize_float_keys(tree: exp.Expression, schemas: Mapping[str, pa.Schema]) -> exp.Expression:
    """``tree`` (a Spark query over inputs of ``schemas``) with each FLOAT or DOUBLE grouping column
    read as ``key + 0`` (``-0.0 + 0.0`` is ``0.0``) wherever the SELECT list shows it outside an
    aggregate. Raises KeysUntyped when a grouping key's type is not known, or a float key is no
    plain column (the caller lets Spark run the query). A query without GROUP BY or without float
    inputs is returned unchanged."""
    grouped = [s for s in tree.find_all(exp.Select) if s.args.get("group") is not None]
    if not grouped or not _reads_floats(schemas):
        return tree
    typed = annotated(tree, schemas)
    typed_grouped = [] if typed is None else [s for s in typed.find_all(exp.Select) if s.args.get("group")]
    if len(typed_grouped) != len(grouped):
        raise KeysUntyped("sqlglot could not type the grouping keys")
    for select, twin in zip(grouped, typed_grouped, strict=True):
        keys, typed_keys = select.args["group"].expressions, twin.args["group"].expressions
        if len(keys) != len(typed_keys):
            raise KeysUntyped("sqlglot could not type the grouping keys")
        for key, typed_key in zip(keys, typed_keys, strict=True):
            kind = typed_key.type.this if typed_key.type is not None else exp.DataType.Type.UNKNOWN
            if kind == exp.DataType.Type.UNKNOWN:
                raise KeysUntyped(f"the type of the grouping key {key.sql('spark')[:80]} is not known")
            if kind not in _FLOATS:
                continue
            if not isinstance(key, exp.Column):
                raise KeysUntyped(f"a floating-point grouping key that is no column: {key.sql('spark')[:80]}")
            _normalize_shown(select, key, _FLOATS[kind])
    return tree


def _normalize_shown(select: exp.Select, key: exp.Column, kind: str) -> None:
    def same(node: exp.Expression) -> bool:
        return (
            isinstance(node, exp.Column)
            and node.name.lower() == key.name.lower()
            and (not key.table or not node.table or node.table.lower() == key.table.lower())
        )

    def normalized(node: exp.Expression) -> exp.Expression:
        return exp.Paren(this=exp.Add(this=node.copy(), expression=exp.cast(exp.Literal.number(0), kind)))

    for item in list(select.expressions):
        if same(item):  # a bare key keeps its name
            item.replace(exp.alias_(normalized(item), item.name, quoted=True))
            continue
        for node in list(item.walk()):
            if same(node) and node.find_ancestor(exp.AggFunc) is None:
                node.replace(normalized(node))


__all__ = ["KeysUntyped", "normalize_float_keys"]
