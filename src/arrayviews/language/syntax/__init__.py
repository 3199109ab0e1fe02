"""The syntax tree of the statement language: one small frozen dataclass per statement and operator,
for every relation kind (base statements, arrays, array views, streams, stream views and uncertain
arrays).

Nodes compare equal when structurally equal (``parse(to_text(s)) == s``). Cell expressions are the
model's :class:`~arrayviews.model.expressions.Expr` nodes, aggregate calls its
:class:`~arrayviews.model.aggregate_calls.AggregateCall`, array schemas its
:class:`~arrayviews.model.schema.ArraySchema` and ViewDF definitions its
:class:`~arrayviews.model.viewdf.ViewDFDefinition`, so the executor hands them on unchanged.
"""

from arrayviews.language.syntax.arrays import *  # noqa: F403
from arrayviews.language.syntax.arrays import __all__ as _arrays
from arrayviews.language.syntax.base import *  # noqa: F403
from arrayviews.language.syntax.base import __all__ as _base
from arrayviews.language.syntax.streams import *  # noqa: F403
from arrayviews.language.syntax.streams import __all__ as _streams
from arrayviews.language.syntax.uncertain import *  # noqa: F403
from arrayviews.language.syntax.uncertain import __all__ as _uncertain
from arrayviews.language.syntax.views import *  # noqa: F403
from arrayviews.language.syntax.views import __all__ as _views

__all__ = [*_base, *_arrays, *_views, *_streams, *_uncertain]
