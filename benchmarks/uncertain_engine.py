"""Uncertain operators (paper 001) on both engines: the expected-aggregate regrid and the structure
join, in-process vs Spark through the execution interface vs the previous Spark code path (its
partial sums grouped with Spark SQL ``F.sum``; its join deduplicated with ``groupBy``/``first``),
all in the same run; and the executor cost model's predicted seconds against measured ones for
regrid, aggregate and structure join on both engines at two sizes, with default and calibrated terms,
next to what the previous model (per copy and per pair only: no aggregate, contribution or join-plan
terms) predicts for the same work; and the in-process join's two plans against its cost-based choice.
Run: ``python -m benchmarks.run uncertain_engine [--quick]``."""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pyarrow as pa

from benchmarks.common import RESULTS, bar_plot, timed, write_results

SCHEMA = "{name}<flux:gaussian, mag:float32>[x=0:119:20; y=0:79:20]"


def _tuples(rng, n: int) -> dict:
    sigmas = rng.lognormal(np.log(0.3), 0.6, (n, 2))
    return {
        "x": rng.uniform(0, 120, n),
        "y": rng.uniform(0, 80, n),
        "x_sigma": sigmas[:, 0],
        "y_sigma": sigmas[:, 1],
        "flux": rng.normal(20, 3, n),
        "flux_sigma": rng.uniform(0, 1, n),
        "mag": rng.normal(18, 1, n).astype(np.float32),
    }


def _old_regrid(aggregate) -> pa.Table:
    """The previous Spark path: float64 partial sums per task (np.bincount), added by Spark SQL."""
    from pyspark.sql import functions as F

    from arrayviews.execution import jobs
    from arrayviews.kernels.block_probabilities import block_contributions
    from arrayviews.operators.uncertain_aggregate import expected_values
    from arrayviews.operators.uncertain_subarray import dimension_groups, position_arrays
    from arrayviews.storage import layout
    from arrayviews.storage import uncertain_layout as ul

    def partial_sums(fragments, schema, storage, blocks, kept, calls, threshold, out):
        roles = np.asarray(fragments.column(layout.max_column(ul.ROLE)))
        fragments = fragments.filter(pa.array(roles <= ul.ROLE_HOME))
        if fragments.num_rows == 0:
            return None
        rows = ul.decode_rows(fragments, storage)
        rows = rows.take(np.flatnonzero(rows.columns[ul.ROLE] == ul.ROLE_HOME))
        means, sigmas, corrs = position_arrays(rows, schema)
        singles, pairs = dimension_groups(schema)
        lows = np.array([d.low for d in schema.dimensions], np.float64)
        highs = np.array([d.high + 1 for d in schema.dimensions], np.float64)
        owner, index, weight = block_contributions(
            means, sigmas, corrs, singles, pairs, lows, highs, blocks, threshold
        )
        keys = index[:, kept]
        unique, group = np.unique(keys, axis=0, return_inverse=True)
        group = group.reshape(-1)
        columns = {out.field(p).name: unique[:, p] + schema.dimensions[k].low for p, k in enumerate(kept)}
        for call in calls:
            c = (
                weight
                if call.attribute is None
                else weight * expected_values(rows, schema, call.attribute)[owner]
            )
            columns[call.output_name] = np.bincount(group, weights=c, minlength=len(unique))
        return pa.table({f.name: pa.array(columns[f.name], f.type) for f in out}, schema=out)

    table, version = aggregate.array.table, aggregate.array.version
    outputs = [c.output_name for c in aggregate.calls]
    out = pa.schema(
        [pa.field(n, pa.int64()) for n in aggregate.names] + [pa.field(o, pa.float64()) for o in outputs]
    )
    spark = aggregate.array._db.spark
    frame = jobs.read_files(spark, table.files(version), layout.fragment_schema(table.storage))
    task = functools.partial(
        partial_sums, schema=table.schema, storage=table.storage, blocks=aggregate.blocks,
        kept=aggregate.kept, calls=aggregate.calls, threshold=aggregate.threshold, out=out,
    )  # fmt: skip
    partials = jobs.map_batches(frame, task, out)
    summed = partials.groupBy(*aggregate.names).agg(*[F.sum(o).alias(o) for o in outputs])
    return jobs.collect(summed, out).sort_by([(n, "ascending") for n in aggregate.names])


def _old_join(join) -> pa.Table:
    """The previous Spark path of the SBJ: the routed plan deduplicated by groupBy + first."""
    from pyspark.sql import functions as F

    from arrayviews.execution import jobs
    from arrayviews.operators import uncertain_join as uj
    from arrayviews.operators import uncertain_join_routed as ur
    from arrayviews.storage import layout

    outer, inner, swapped = join._sides()
    structure = uj.pair_structure(outer.schema, inner.schema)
    walks = uj.inner_walks_from_metadata(inner)
    spark = join.left._db.spark
    routed = ur._routed_schema(outer.schema, inner.table.storage, len(structure[1]))
    frame = jobs.read_files(
        spark, outer.table.files(outer.version), layout.fragment_schema(outer.table.storage)
    )
    route = functools.partial(
        ur._route_outer, outer=outer.spec, inner=inner.spec, delta=join.delta, walks=walks, pairs=structure[1], routed=routed
    )  # fmt: skip
    outer_routed = jobs.map_batches(frame, route, routed)
    ranges = uj.inner_chunk_ranges(outer, inner, join.delta, walks)
    keys = layout.chunk_columns(inner.table.storage)
    inner_frame = jobs.read_files(
        spark, inner.table.files(inner.version, ranges), layout.fragment_schema(inner.table.storage)
    )
    condition = None
    for key, (first, last) in zip(keys, ranges, strict=True):
        term = F.col(key).between(first, last)
        condition = term if condition is None else condition & term
    task = functools.partial(
        ur._join_chunk, inner=inner.spec, delta=join.delta, threshold=join.threshold, structure=structure, ndim=outer.schema.ndim
    )  # fmt: skip
    joined = jobs.cogroup_tables(outer_routed, inner_frame.where(condition), keys, task, uj.RESULT_SCHEMA)
    distinct = joined.groupBy(uj.ID_LEFT, uj.ID_RIGHT).agg(F.first(uj.PROBABILITY).alias(uj.PROBABILITY))
    return uj._finish([jobs.collect(distinct, uj.RESULT_SCHEMA)], swapped, uj.JoinStatistics())


def _before_terms(costs, samples: dict | None = None) -> dict:
    """The previous model's uncertain terms (round 7: per copy and per pair only, no aggregate,
    contribution or join-plan terms): its defaults, or its fit (per copy and per pair by one
    non-negative least squares over the regrid and join samples) of this run's calibration samples."""
    from dataclasses import replace

    from scipy.optimize import nnls

    from arrayviews.execution.cost import EngineCost

    before = {}
    for engine in ("local", "spark"):
        terms = getattr(costs, engine)
        per_copy, per_pair = {"local": (4.0e-6, 1.5e-8), "spark": (2.0e-6, 7.5e-9)}[engine]
        if samples is not None:
            points = [p for p in samples[engine] if p["operation"] in ("regrid", "join", "join_block")]
            design = np.array([[p["copies"], p["pairs"]] for p in points])
            (per_copy, per_pair), _ = nnls(design, np.array([p["seconds"] for p in points]))
            per_copy, per_pair = max(per_copy, 1e-9), max(per_pair, 1e-11)
        kept = {f: getattr(terms, f) for f in ("fixed", "per_job", "per_cell")}
        before[engine] = replace(EngineCost(**kept), per_copy=per_copy, per_pair=per_pair, per_aggregate=0.0,
                                 per_contribution=0.0)  # fmt: skip
    return before


def _predictions(db, rng, n: int, repeats: int, before: dict) -> list[dict]:
    """Predicted (cost model, metadata only) vs measured seconds of regrid, aggregate and the
    structure join on both engines over ``n`` outer and ``3 n`` inner tuples, with the load; and
    what the previous model (``before``: per-copy and per-pair terms only) predicted."""
    from dataclasses import replace

    outer = db.create_uncertain_array(SCHEMA.format(name=f"pred_ua_{n}"), scheme="store-multiple", step=1)
    outer.insert(_tuples(rng, n))
    inner = db.create_uncertain_array(SCHEMA.format(name=f"pred_ub_{n}"), scheme="store-mean")
    inner.insert(_tuples(rng, 3 * n))
    operations = {
        "regrid": lambda e: outer.regrid({"x": 10, "y": 10}, "count(*)", "sum(flux)", engine=e),
        "aggregate": lambda e: outer.aggregate("count(*)", "sum(flux)", by=["x"], engine=e),
        "structure_join": lambda e: outer.structure_join(inner, 1.0, 0.5, engine=e, outer="left"),
    }
    rows = []
    try:
        for name, make in operations.items():
            for engine in ("local", "spark"):
                operation = make(engine)
                choice = operation.choose()
                make(engine).to_arrow()  # warm-up
                measured, _ = timed(lambda: make(engine).to_arrow(), repeats)  # noqa: B023
                predicted = choice.predicted[engine]
                # the previous model: copies and pairs only (the join's block plan, no aggregate terms)
                work = replace(choice.estimate, aggregates=0, contributions=0.0)
                old = before[engine].seconds(work)
                plan = operation.plan.plan if name == "structure_join" and engine == "local" else None
                row = {
                    "operation": name,
                    "engine": engine,
                    "outer_tuples": n,
                    "copies": choice.estimate.copies,
                    "pairs": choice.estimate.pairs,
                    "contributions": choice.estimate.contributions,
                    "plan": plan,
                    "predicted_seconds": predicted,
                    "measured_seconds": measured,
                    "measured_over_predicted": measured / predicted,
                    "before_predicted_seconds": old,
                    "measured_over_before": measured / old,
                    "load": os.getloadavg()[0],
                }
                rows.append(row)
                print(
                    f"{name} {engine}{f' ({plan} plan)' if plan else ''} n={n}: measured {measured:.3f} s; "
                    f"predicted {predicted:.3f} s ({measured / predicted:.2f}x), before {old:.3f} s "
                    f"({measured / old:.2f}x); load {row['load']:.2f}"
                )
    finally:
        db.drop_uncertain_array(outer.name)
        db.drop_uncertain_array(inner.name)
    return rows


def run(db, quick: bool = False) -> dict:
    repeats = 3  # best of three: the machine is shared, single runs spike
    n = 2000 if quick else 4000
    rng = np.random.default_rng(7)
    outer_data, inner_data = _tuples(rng, n), _tuples(rng, 3 * n)
    outer = db.create_uncertain_array(SCHEMA.format(name="bench_ua"), scheme="store-multiple", step=1)
    outer.insert(outer_data)
    inner = db.create_uncertain_array(SCHEMA.format(name="bench_ub"), scheme="store-mean")
    inner.insert(inner_data)
    load = os.getloadavg()
    results: dict = {"outer_tuples": n, "inner_tuples": 3 * n, "load_before": load}

    def regrid(engine):
        return outer.regrid({"x": 10, "y": 10}, "count(*)", "sum(flux)", engine=engine)

    aggregate = {}
    answers = {}
    for label, run_ in [
        ("local", lambda: regrid("local").to_arrow()),
        ("spark", lambda: regrid("spark").to_arrow()),
        ("old_spark", lambda: _old_regrid(regrid("spark"))),
    ]:
        run_()  # warm-up
        aggregate[label], answers[label] = timed(run_, repeats)
    results["regrid"] = aggregate
    results["regrid_same_bits_local_spark"] = answers["local"].equals(answers["spark"])
    old, new = answers["old_spark"], answers["spark"]
    results["regrid_old_max_abs_difference"] = float(
        np.max(np.abs(np.asarray(old.column("flux_sum")) - np.asarray(new.column("flux_sum"))))
    )
    results["regrid_auto_choice"] = outer.regrid({"x": 10, "y": 10}, "count(*)").choose().as_dict()

    def joined(engine):
        return outer.structure_join(inner, 1.0, 0.5, engine=engine, outer="left")

    join = {}
    for label, run_ in [
        ("local", lambda: joined("local").to_arrow()),
        ("block_local", lambda: joined("local").force_plan("block").to_arrow()),
        ("spark", lambda: joined("spark").to_arrow()),
        ("old_spark", lambda: _old_join(joined("spark"))),
        ("routed_local", lambda: joined("local").force_plan("routed").to_arrow()),
    ]:
        run_()
        join[label], answers[label] = timed(run_, repeats)
    results["join"] = join
    results["join_same_pairs"] = answers["local"].equals(answers["spark"]) and answers["spark"].equals(
        answers["old_spark"]
    )
    results["join_routed_local_same_pairs"] = answers["routed_local"].equals(answers["block_local"])
    results["join_routed_local_over_block_local"] = join["routed_local"] / join["block_local"]
    chosen = joined("local")
    chosen.choose()
    results["join_local_plan"] = {"plan": chosen.plan.plan, "predicted": chosen.plan.predicted}
    print(
        f"join in-process: routed plan {join['routed_local']:.3f} s, block plan (Alg. 1) {join['block_local']:.3f} s "
        f"({join['routed_local'] / join['block_local']:.2f}x); cost-based choice {chosen.plan.plan} "
        f"(predicted {chosen.plan.predicted['routed']:.3f} s and {chosen.plan.predicted['block']:.3f} s), "
        f"{join['local']:.3f} s; load {os.getloadavg()[0]:.2f}"
    )
    results["join_auto_choice"] = outer.structure_join(inner, 1.0, 0.5).choose().as_dict()
    results["predictions"] = [
        row
        for size in ((1000, 4000) if quick else (2000, 8000))
        for row in _predictions(db, rng, size, repeats, _before_terms(db.executors.costs))
    ]
    _worst(results, "predictions", "default costs")
    # the per-copy and per-pair terms measured on this machine (at other sizes than the predictions)
    from arrayviews.operators.uncertain_calibration import calibrate_engines

    previous = db.executors.costs
    try:
        started = time.perf_counter()
        calibrated = calibrate_engines(
            db, (500, 1500, 4000) if quick else (1000, 3000, 8000), repeats=repeats
        )
        results["calibration_seconds"] = time.perf_counter() - started
        uncertain_terms = ("per_copy", "per_pair", "per_aggregate", "per_contribution", "per_block", "per_route",
                           "per_group", "per_routed_pair")  # fmt: skip
        results["calibrated_terms"] = {
            e: {t: getattr(getattr(calibrated, e), t) for t in uncertain_terms} for e in ("local", "spark")
        }
        before = _before_terms(calibrated, calibrated.notes["uncertain"])
        print(f"calibrated uncertain terms: {results['calibrated_terms']}; load {os.getloadavg()[0]:.2f}")
        results["predictions_calibrated"] = [
            row
            for size in ((1000, 4000) if quick else (2000, 8000))
            for row in _predictions(db, rng, size, repeats, before)
        ]
    finally:
        db.executors.store_costs(previous)
    _worst(results, "predictions_calibrated", "calibrated costs")
    results["load_after"] = os.getloadavg()
    for name in ("regrid", "join"):
        t = results[name]
        results[f"{name}_ratios"] = {
            "spark_over_local": t["spark"] / t["local"],
            "old_spark_over_spark": t["old_spark"] / t["spark"],
            "old_spark_over_local": t["old_spark"] / t["local"],
        }
        print(
            f"{name}: in-process {t['local']:.3f} s, Spark {t['spark']:.3f} s, old Spark path "
            f"{t['old_spark']:.3f} s (old/new Spark {t['old_spark'] / t['spark']:.2f}x, "
            f"Spark/in-process {t['spark'] / t['local']:.1f}x); load {load[0]:.2f}"
        )
    return results


def _worst(results: dict, key: str, label: str) -> None:
    """The worst factor off of the model and of the previous one, over all rows and per row kind."""
    for model, ratio in (("", "measured_over_predicted"), ("_before", "measured_over_before")):
        ratios = [r[ratio] for r in results[key]]
        results[f"{key}{model}_worst_ratio"] = max(max(ratios), 1 / min(ratios))
    print(
        f"predictions ({label}): worst factor off {results[f'{key}_worst_ratio']:.2f}x (goal 3x), "
        f"previous model {results[f'{key}_before_worst_ratio']:.2f}x"
    )


def report(results: dict, quick: bool) -> None:
    name = "uncertain-engine-quick" if quick else "uncertain-engine"
    write_results(name, {**results, "quick": quick})
    labels = ["regrid (count, sum)", "structure join"]
    series = {
        label: [results["regrid"][key], results["join"][key]]
        for label, key in (
            ("in-process", "local"),
            ("Spark (interface)", "spark"),
            ("old Spark path", "old_spark"),
        )
    }
    bar_plot(
        name,
        "Uncertain operators: in-process vs Spark vs the old Spark path (same run)",
        labels,
        series,
        "seconds",
    )
    print(f"results in {RESULTS / (name + '.json')}")
