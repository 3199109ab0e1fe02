"""The relations of the stream world (streams and ViewDF views) as the maintainer sees them: their
part tables, which parts exist, which are still held, and how views depend on each other."""

from __future__ import annotations

from dataclasses import dataclass

from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.storage import kinds
from arrayviews.storage.part_table import HELPER_PROPERTY

NAMESPACE = kinds.STREAMS_NAMESPACE
STREAM_KIND = kinds.STORED_STREAM
VIEW_KIND = kinds.STORED_STREAM_VIEW

# View state, kept in the properties of the snapshot each maintenance round commits.
FIRST = "viewdf.first"
NEXT = "viewdf.next"
RETAINED = "viewdf.retained"
SEEN = "viewdf.seen."

# View settings, kept in table properties.
DEFINITION = "arrayviews.definition"
BACKFILL = "arrayviews.viewdf.backfill"
HELPER = HELPER_PROPERTY
LATENESS = "arrayviews.viewdf.lateness-parts"
#: Set (to the error) while a view's maintenance has failed; the view is skipped until retried.
FAILED = "arrayviews.viewdf.failed"
#: A sliding-window view's plan and why (JSON; streams/windows.py, streams/plan_settling.py).
WINDOW_PLAN = "arrayviews.viewdf.window-plan"
DEFAULT_LATENESS_PARTS = 10
#: How many parts past the stream's newest part a batch may reach unless the append allows the gap
#: (about a week of one-minute parts; maintenance builds every part in between, empty ones too, and
#: building 10,000 empty parts takes about a minute on two cores).
DEFAULT_MAX_GAP_PARTS = 10_000
#: The table property holding a stream's own limit (read without the part table's prefix).
MAX_GAP_PROPERTY = "max-gap-parts"


@dataclass(frozen=True)
class ViewState:
    """Where a view stands: parts ``first`` .. ``next - 1`` are built, parts below ``retained`` were
    dropped by retention, and ``seen[R]`` is the version of source R the built parts reflect."""

    first: int
    next: int
    retained: int
    seen: dict[str, int]

    def properties(self) -> dict[str, str]:
        values = {FIRST: str(self.first), NEXT: str(self.next), RETAINED: str(self.retained)}
        values.update({SEEN + name: str(version) for name, version in self.seen.items()})
        return values

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> ViewState | None:
        def value(key: str) -> str | None:
            return properties.get(key, properties.get("arrayviews." + key))

        if value(FIRST) is None:
            return None
        seen = {}
        for key, text in properties.items():
            bare = key.removeprefix("arrayviews.")
            if bare.startswith(SEEN):
                seen[bare[len(SEEN) :]] = int(text)
        return cls(int(value(FIRST)), int(value(NEXT)), int(value(RETAINED)), seen)


@dataclass(frozen=True)
class Relation:
    """One stream or view at the start of a maintenance step: ``oldest``/``newest`` bound the parts
    that exist (None when there are none yet); parts below ``retained`` are no longer held."""

    name: str
    kind: str
    partition_length: int
    version: int
    oldest: int | None
    newest: int | None
    retained: int | None


def topological_order(definitions: dict[str, ViewDFDefinition]) -> list[str]:
    """View names ordered so that every view comes after the views it reads."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ValueError(f"views {name} depend on each other in a cycle")
        state[name] = 1
        for source in sorted(definitions[name].sources()):
            if source in definitions:
                visit(source)
        state[name] = 2
        order.append(name)

    for name in sorted(definitions):
        visit(name)
    return order


def consumers_of(name: str, definitions: dict[str, ViewDFDefinition]) -> list[ViewDFDefinition]:
    """The views that read ``name``."""
    return [d for d in definitions.values() if name in d.sources()]
