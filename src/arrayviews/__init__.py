"""arrayviews: materialized views over multi-dimensional arrays, kept fresh incrementally on Spark.

The public API, in one import: ``connect`` and the handles it gives (``Database``, ``Array``,
``View``, ``UncertainArray``, ``Stream``, ``StreamView``), the shapes and view definitions they
take, the results they return and the errors they raise.
"""

# first, before anything loads pyarrow: Arrow's C++ pool is chosen then (execution/memory.py)
from arrayviews.execution.memory import prefer_jemalloc_before_arrow_loads

prefer_jemalloc_before_arrow_loads()

# isort: split
from arrayviews.array import Array
from arrayviews.database import Database, connect
from arrayviews.model.errors import (
    AlreadyExistsError,
    ArrayViewsError,
    CatalogBusyError,
    CommitConflictError,
    ConflictError,
    ExecutionError,
    NotFoundError,
    ParseError,
    RangeError,
    SchemaError,
    ValidationError,
)
from arrayviews.model.schema import ArraySchema, Attribute, CoordinateScale, Dimension
from arrayviews.model.shapes import L1, Linf, Shape, box, product, stencil
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.uncertain import UncertainSchema
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.operators.writes import WriteResult
from arrayviews.scheduling.maintenance_pass import MaintenancePass
from arrayviews.scheduling.refresh_limit import LimitDecision
from arrayviews.similarity_join import SimilarityJoin
from arrayviews.storage.check import CheckReport
from arrayviews.storage.expiry import ExpireResult
from arrayviews.storage.kinds import ARRAY, ARRAY_VIEW, STREAM, STREAM_VIEW, UNCERTAIN_ARRAY
from arrayviews.storage.uncertain_table import Workload
from arrayviews.stream import AppendResult, Stream
from arrayviews.stream_view import StreamView
from arrayviews.streams.maintainer import MaintenanceResult
from arrayviews.uncertain import UncertainArray
from arrayviews.view import RefreshResult, View
from arrayviews.views.answering import AnswerPlan
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewAggregate,
    WindowViewDefinition,
    similarity,
    window,
)

__all__ = [
    "ARRAY",
    "ARRAY_VIEW",
    "L1",
    "STREAM",
    "STREAM_VIEW",
    "UNCERTAIN_ARRAY",
    "AlreadyExistsError",
    "AnswerPlan",
    "AppendResult",
    "Array",
    "ArraySchema",
    "ArrayViewsError",
    "Attribute",
    "CatalogBusyError",
    "CheckReport",
    "CommitConflictError",
    "ConflictError",
    "CoordinateScale",
    "TimeScale",
    "Database",
    "Dimension",
    "ExecutionError",
    "ExpireResult",
    "LimitDecision",
    "Linf",
    "MaintenancePass",
    "MaintenanceResult",
    "NotFoundError",
    "ParseError",
    "RangeError",
    "RefreshResult",
    "SchemaError",
    "Shape",
    "SimilarityJoin",
    "SimilarityViewDefinition",
    "Stream",
    "StreamView",
    "UncertainArray",
    "UncertainSchema",
    "ValidationError",
    "View",
    "ViewAggregate",
    "ViewDFDefinition",
    "WindowViewDefinition",
    "Workload",
    "WriteResult",
    "box",
    "connect",
    "product",
    "similarity",
    "stencil",
    "window",
]
