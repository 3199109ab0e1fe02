"""The two engines of a database and the per-operation choice between them (``execution=`` of
``connect``: ``auto`` by cost, or ``spark`` / ``local`` always)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from arrayviews.execution.cost import MODES, Choice, CostModel, Estimate, choose, load_costs, save_costs
from arrayviews.execution.engine import Data, Engine
from arrayviews.execution.local_engine import LocalData, LocalEngine
from arrayviews.execution.spark_engine import SparkEngine
from arrayviews.model.errors import ValidationError


class Executors:
    """The Spark engine and the in-process engine of one database, and the cost model choosing."""

    def __init__(self, spark: SparkSession, scratch: str, warehouse: str, mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValidationError(f"execution must be one of {', '.join(MODES)}, got {mode!r}")
        self.spark = SparkEngine(spark, scratch)
        self.local = LocalEngine()
        self.mode = mode
        self.warehouse = warehouse
        self._costs: CostModel | None = None

    @property
    def costs(self) -> CostModel:
        if self._costs is None:
            self._costs = load_costs(self.warehouse)
        return self._costs

    def store_costs(self, model: CostModel) -> str:
        """Keep calibrated costs (in the warehouse) and use them from now on."""
        uri = save_costs(self.warehouse, model)
        self._costs = model
        return uri

    def engine(self, name: str) -> Engine:
        return self.local if name == "local" else self.spark

    def choose(self, estimate: Estimate, mode: str | None = None) -> tuple[Engine, Choice]:
        """The engine for an operation reading ``estimate``, and why."""
        choice = choose(self.costs, estimate, mode or self.mode)
        return self.engine(choice.executor), choice

    def owner(self, data: Data) -> Engine:
        """The engine a data set belongs to."""
        return self.local if isinstance(data, LocalData) else self.spark
