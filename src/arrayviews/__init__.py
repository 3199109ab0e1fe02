"""arrayviews: materialized views over multi-dimensional arrays, kept fresh incrementally on Spark."""

from arrayviews.array import Array
from arrayviews.database import Database, connect
from arrayviews.model.errors import (
    AlreadyExistsError,
    ArrayViewsError,
    CommitConflictError,
    ConflictError,
    NotFoundError,
    ParseError,
    SchemaError,
    ValidationError,
)
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.operators.writes import WriteResult

__all__ = [
    "AlreadyExistsError",
    "Array",
    "ArraySchema",
    "ArrayViewsError",
    "Attribute",
    "CommitConflictError",
    "ConflictError",
    "Database",
    "Dimension",
    "NotFoundError",
    "ParseError",
    "SchemaError",
    "ValidationError",
    "WriteResult",
    "connect",
]
