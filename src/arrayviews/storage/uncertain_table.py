"""An uncertain array's Iceberg table: its schema and layout properties, versions, files and commits.

A thin layer over :class:`ArrayTable` (the same table kind, commit path and version numbering as
arrays): the uncertain schema and the creation layout live in the table properties, the layout of
every version in its snapshot summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.model.copy_layout import StorageLayout
from arrayviews.model.uncertain import UncertainSchema
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.storage.files import delete_files
from arrayviews.storage.versioned import KIND_PROPERTY
from arrayviews.storage.warehouse import Warehouse

WORKLOAD_PROPERTY = "arrayviews.uncertain-workload"


def layout_properties(layout_: StorageLayout, copies_total: int) -> dict[str, str]:
    """Snapshot summary entries (without the ``arrayviews.`` prefix) recording a version's layout."""
    return {
        ul.SCHEME_KEY: layout_.scheme,
        ul.STEPS_KEY: "auto" if layout_.steps is None else ",".join(str(s) for s in layout_.steps),
        ul.SIGMAS_KEY: repr(float(layout_.sigmas)),
        ul.COPIES_KEY: str(int(copies_total)),
    }


def layout_from_properties(properties: dict[str, str]) -> StorageLayout:
    steps_text = properties[ul.STEPS_KEY]
    steps = None if steps_text == "auto" else tuple(int(s) for s in steps_text.split(",") if s != "")
    return StorageLayout(properties[ul.SCHEME_KEY], steps, float(properties[ul.SIGMAS_KEY]))


@dataclass(frozen=True)
class Workload:
    """What the cost model optimizes for: common query sizes (cells per dimension), the threshold."""

    queries: tuple[tuple[float, ...], ...]
    threshold: float = 0.9

    def to_json(self) -> str:
        return json.dumps({"queries": [list(q) for q in self.queries], "threshold": self.threshold})

    @classmethod
    def from_json(cls, text: str) -> Workload:
        data = json.loads(text)
        return cls(tuple(tuple(float(x) for x in q) for q in data["queries"]), float(data["threshold"]))


class UncertainTable:
    """One uncertain array's table (any version) with what is needed to plan reads and commit."""

    def __init__(self, array: ArrayTable) -> None:
        self.array = array
        properties = array.properties
        self.schema = UncertainSchema.from_json(properties[ul.SCHEMA_PROPERTY])
        self.storage = array.schema
        self._created_layout = layout_from_properties(json.loads(properties[ul.LAYOUT_PROPERTY]))
        workload = properties.get(WORKLOAD_PROPERTY)
        self.workload = Workload.from_json(workload) if workload else None
        self._datasets: dict[int, object] = {}

    @classmethod
    def create(
        cls,
        warehouse: Warehouse,
        schema: UncertainSchema,
        layout_: StorageLayout,
        workload: Workload | None,
    ) -> UncertainTable:
        properties = {
            ul.SCHEMA_PROPERTY: schema.to_json(),
            ul.LAYOUT_PROPERTY: json.dumps(layout_properties(layout_, 0)),
        }
        if workload is not None:
            properties[WORKLOAD_PROPERTY] = workload.to_json()
        return cls(warehouse.create(ul.storage_schema(schema), kind=ul.KIND, properties=properties))

    @staticmethod
    def is_uncertain(array: ArrayTable) -> bool:
        return array.properties.get(KIND_PROPERTY) == ul.KIND

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def label(self) -> str:
        return f"uncertain array {self.name}"

    def refresh(self) -> UncertainTable:
        self.array.refresh()
        return self

    def current_version(self) -> int:
        return self.array.current_version()

    def layout_at(self, version: int) -> StorageLayout:
        """The storage layout of ``version`` (version 0: the layout the array was created with)."""
        if version == 0:
            return self._created_layout
        self.array.snapshot_of(version)  # raises NotFoundError for unknown versions
        for info in self.array.versions():
            if info.version == version:
                return layout_from_properties(info.properties)
        raise AssertionError("unreachable")

    def tuples_at(self, version: int) -> int:
        for info in self.array.versions():
            if info.version == version:
                return info.cells_total
        return 0

    def copies_at(self, version: int) -> int:
        for info in self.array.versions():
            if info.version == version:
                return int(info.properties.get(ul.COPIES_KEY, 0))
        return 0

    # -- reading --------------------------------------------------------------------------------
    def files(self, version: int, chunk_ranges=None) -> list[str]:
        return [f.file_path for f in self.array.data_files(version, chunk_ranges)]

    def dataset(self, version: int):
        """The fragment files of ``version`` with their row-group statistics, kept for later reads (a
        version's files never change)."""
        if version not in self._datasets:
            if len(self._datasets) > 8:
                self._datasets.clear()
            self._datasets[version] = ul.open_dataset(self.files(version), self.storage)
        return self._datasets[version]

    def read(
        self,
        version: int,
        columns: list[str] | None,
        chunk_ranges=None,
        chunk_filter=None,
        roles: str | None = None,
    ) -> pa.Table:
        """Fragment rows of ``version`` (see ``uncertain_layout.read_fragments``)."""
        return ul.read_fragments(
            self.dataset(version), self.storage, columns, chunk_ranges, chunk_filter, roles
        )

    def metadata(self, version: int) -> pa.Table:
        return self.array.read_metadata(version)

    def batches_at(self, version: int) -> int:
        """Tuple fragments per occupied chunk, on average (one per insert that touched the chunk)."""
        metadata = self.metadata(version)
        if metadata.num_rows == 0:
            return 1
        tuples = ul.home_fragments(metadata)
        if tuples.num_rows == 0:
            return 1
        chunks = np.stack([np.asarray(tuples.column(c)) for c in layout.chunk_columns(self.storage)], axis=1)
        distinct = len(np.unique(chunks, axis=0))
        return max(1, round(tuples.num_rows / distinct))

    # -- writing --------------------------------------------------------------------------------
    def stage(self, tables: list[pa.Table]) -> list[tuple[str, int]]:
        """Write fragment tables as new, uncommitted files; returns (uri, rows) pairs."""
        written = []
        try:
            for table in tables:
                if table.num_rows == 0:
                    continue
                uri = self.array.new_file_uri()
                ul.write_rows_file(table, uri)
                written.append((uri, table.num_rows))
        except BaseException:
            delete_files([w[0] for w in written])
            raise
        return written

    def commit(
        self,
        added: list[str],
        removed_versions_files: list | None,
        operation: str,
        tuples_added: int,
        tuples_removed: int,
        layout_: StorageLayout,
        copies_total: int,
        expected_version: int,
    ) -> int:
        """One snapshot adding ``added`` files (and removing the given DataFiles), recording the layout."""
        info = CommitInfo(
            operation,
            cells_added=tuples_added,
            cells_removed=tuples_removed,
            properties=layout_properties(layout_, copies_total),
        )
        return self.array.commit(added, removed_versions_files or [], info, expected_version)
