"""The distributed maintenance planner of paper 000 (arrayviews.views.maintenance_plan, sections
4.1-4.5) against references written here: a cost evaluator from the definition (Eq. (1), first line),
brute force over every join and view placement of tiny instances, and the paper's worked examples
(section 4.1's baseline example, Appendix B.1 / Figure 7, B.2 / Table 2, B.3 / Figure 8)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ValidationError
from arrayviews.views.maintenance_plan import (
    COORDINATOR,
    REFINED,
    GreedyOptions,
    JoinPlanState,
    MergePlanState,
    PlanInputs,
    assemble_plan,
    baseline_plan,
    decay_weights,
    differential_plan,
    locations_after,
    plan_joins,
    reassign_array_chunks,
    reassign_plan,
    reassign_view_chunks,
)

X, Y, Z = 0, 1, 2

# --- the reference cost, from the definition -------------------------------------------------


@dataclass
class Reference:
    copies: set
    ntwk: list
    cpu: list
    coordinator: float
    objective: float


def reference_cost(
    case: dict, join_node: dict, view_node: dict | None = None, array_node: dict | None = None
):
    """Copies: each chunk of a pair not at home on its join node, each array chunk stored away from
    home; the home (maybe the coordinator) pays B * t_ntwk per copy; a join pays B_pq * t_cpu on its
    node; a triple whose join node is not its view's node sends B_pq * t_ntwk from the join node; the
    view's node pays B_pq * t_cpu for the merge (for the view chunks ``view_node`` places).
    Objective: max over workers of max(ntwk, cpu)."""
    n, home, size = case["n_nodes"], case["location"], case["size"]
    t_ntwk, t_cpu = case["t_ntwk"], case["t_cpu"]
    ntwk, cpu, coordinator = [0.0] * n, [0.0] * n, 0.0
    copies = {(c, j) for (p, q), j in join_node.items() for c in (p, q) if home[c] != j}
    copies |= {(a, j) for a, j in (array_node or {}).items() if home[a] != j}
    for chunk, _ in copies:
        if home[chunk] == COORDINATOR:
            coordinator += size[chunk] * t_ntwk
        else:
            ntwk[home[chunk]] += size[chunk] * t_ntwk
    for (p, q), j in join_node.items():
        cpu[j] += (size[p] + size[q]) * t_cpu
    if view_node is not None:
        for p, q, v in set(case["triples"]):
            if v not in view_node:
                continue
            joined, merged = join_node[(p, q)], view_node[v]
            if joined != merged:
                ntwk[joined] += (size[p] + size[q]) * t_ntwk
            cpu[merged] += (size[p] + size[q]) * t_cpu
    objective = max(max(a, b) for a, b in zip(ntwk, cpu, strict=True))
    return Reference(copies, ntwk, cpu, coordinator, objective)


def copies_of(plan) -> set:
    return {(chunk, node) for chunk, nodes in plan.replicas.items() for node in nodes}


def assert_matches_reference(case: dict, plan, with_views: bool = True) -> Reference:
    views = plan.view_node if with_views else None
    ref = reference_cost(case, plan.join_node, views, plan.array_node)
    assert copies_of(plan) == ref.copies
    assert plan.cost.ntwk.tolist() == pytest.approx(ref.ntwk)
    assert plan.cost.cpu.tolist() == pytest.approx(ref.cpu)
    assert plan.cost.coordinator_ntwk == pytest.approx(ref.coordinator)
    assert plan.cost.objective == pytest.approx(ref.objective)
    return ref


def inputs_of(case: dict) -> PlanInputs:
    return PlanInputs(**case)


# --- random tiny instances ---------------------------------------------------------------


@st.composite
def cases(draw, max_nodes: int = 4, max_arrays: int = 6, max_views: int = 3, max_triples: int = 8):
    """Array chunks A0.. (at a worker, or at the coordinator: deltas), view chunks V0.., integer
    sizes and costs (sums stay exact), triples over them."""
    n = draw(st.integers(1, max_nodes))
    arrays = [f"A{i}" for i in range(draw(st.integers(1, max_arrays)))]
    views = [f"V{i}" for i in range(draw(st.integers(1, max_views)))]
    location = {c: draw(st.integers(COORDINATOR, n - 1)) for c in arrays + views}
    size = {c: draw(st.integers(1, 9)) for c in arrays}
    triple = st.tuples(st.sampled_from(arrays), st.sampled_from(arrays), st.sampled_from(views))
    triples = draw(st.lists(triple, min_size=1, max_size=max_triples))
    return {
        "triples": triples,
        "n_nodes": n,
        "location": location,
        "size": size,
        "t_ntwk": draw(st.sampled_from([0, 1, 2, 4])),
        "t_cpu": draw(st.sampled_from([0, 1, 3])),
    }


FAST = settings(max_examples=60, deadline=None)


def held_at(inputs: PlanInputs, plan, chunk, node) -> bool:
    return inputs.location[chunk] == node or node in plan.replicas.get(chunk, set())


def all_plans(case: dict, seed: int):
    inputs = inputs_of(case)
    history = [case["triples"]]
    return {
        "baseline": baseline_plan(inputs),
        "differential": differential_plan(inputs, seed),
        "reassign": reassign_plan(history, [1.0], inputs, seed),
        "differential refined": differential_plan(inputs, seed, options=REFINED),
        "reassign refined": reassign_plan(history, [1.0], inputs, seed, options=REFINED),
    }


@FAST
@given(cases(), st.integers(0, 2**32 - 1))
def test_every_plan_costs_what_the_reference_says(case, seed):
    for plan in all_plans(case, seed).values():
        assert_matches_reference(case, plan)
    assert_matches_reference(case, plan_joins(inputs_of(case), seed), with_views=False)


@FAST
@given(cases(), st.integers(0, 2**32 - 1))
def test_plan_laws(case, seed):
    inputs = inputs_of(case)
    pairs = {(p, q) for p, q, _ in case["triples"]}
    views = {v for _, _, v in case["triples"]}
    plans = all_plans(case, seed)
    for name, plan in plans.items():
        assert set(plan.join_node) == pairs, name
        assert set(plan.view_node) == views, name
        workers = range(case["n_nodes"])
        assert all(node in workers for node in [*plan.join_node.values(), *plan.view_node.values()]), name
        assert all(node in workers for node in plan.array_node.values()), name
        for (p, q), node in plan.join_node.items():
            assert held_at(inputs, plan, p, node) and held_at(inputs, plan, q, node), name
    # Algorithm 3 keeps an existing chunk home or moves it onto a copy stage 1 made
    for options, name in ((GreedyOptions(), "reassign"), (REFINED, "reassign refined")):
        staged = plan_joins(inputs, seed, options)
        final = plans[name]
        for chunk, node in final.array_node.items():
            if case["location"][chunk] != COORDINATOR:
                assert held_at(inputs, staged, chunk, node)
        assert final.join_node == staged.join_node


@FAST
@given(cases(), st.integers(0, 2**32 - 1))
def test_same_seed_same_plan(case, seed):
    first, second = all_plans(case, seed), all_plans(case, seed)
    for name in first:
        assert first[name].join_node == second[name].join_node
        assert first[name].view_node == second[name].view_node
        assert first[name].array_node == second[name].array_node


@FAST
@given(cases(), st.integers(0, 2**32 - 1))
def test_running_states_track_the_reference_loads(case, seed):
    """JoinPlanState and MergePlanState keep their loads incrementally; after the last placement they
    equal the reference cost of the decisions they made."""
    inputs = inputs_of(case)
    stored = {v: node for v, node in case["location"].items() if v.startswith("V") and node != COORDINATOR}
    for options, views in ((GreedyOptions(), None), (REFINED, stored)):
        joins = JoinPlanState(inputs, options)
        for p, q in inputs.pairs:
            joins.place_best(p, q)
        ref = reference_cost(case, joins.join_node, views)
        assert joins.ntwk.tolist() == pytest.approx(ref.ntwk)
        assert joins.cpu.tolist() == pytest.approx(ref.cpu)
        assert joins.coordinator_ntwk == pytest.approx(ref.coordinator)
    merges = MergePlanState(inputs, joins.join_node, options=REFINED)
    for v in inputs.view_chunks:
        merges.place_best(v)
    ref = reference_cost(case, joins.join_node, merges.view_node)
    assert merges.ntwk.tolist() == pytest.approx(ref.ntwk)
    assert merges.cpu.tolist() == pytest.approx(ref.cpu)


# --- brute force -------------------------------------------------------------------------


def best_join_objective(case: dict) -> float:
    pairs = list(dict.fromkeys((p, q) for p, q, _ in case["triples"]))
    return min(
        reference_cost(case, dict(zip(pairs, nodes, strict=True))).objective
        for nodes in itertools.product(range(case["n_nodes"]), repeat=len(pairs))
    )


def best_view_objective(case: dict, join_node: dict) -> float:
    views = list(dict.fromkeys(v for _, _, v in case["triples"]))
    return min(
        reference_cost(case, join_node, dict(zip(views, nodes, strict=True))).objective
        for nodes in itertools.product(range(case["n_nodes"]), repeat=len(views))
    )


@settings(max_examples=40, deadline=None)
@given(cases(max_nodes=3, max_arrays=4, max_triples=6), st.integers(0, 2**32 - 1))
def test_algorithm_1_never_beats_brute_force(case, seed):
    plan = plan_joins(inputs_of(case), seed)
    assert plan.cost.objective >= best_join_objective(case) - 1e-9


@settings(max_examples=40, deadline=None)
@given(cases(max_nodes=3, max_triples=1), st.integers(0, 2**32 - 1))
def test_algorithm_1_is_optimal_for_one_pair(case, seed):
    plan = plan_joins(inputs_of(case), seed)
    assert plan.cost.objective == pytest.approx(best_join_objective(case))


@settings(max_examples=40, deadline=None)
@given(cases(max_nodes=4, max_triples=1))
def test_algorithm_1_with_merges_is_optimal_for_one_pair(case):
    """Priced with merges to the stored view chunks, one pair's best node is what brute force finds."""
    stored = {v: node for v, node in case["location"].items() if v.startswith("V") and node != COORDINATOR}
    plan = plan_joins(inputs_of(case), 0, GreedyOptions(with_merges=True))
    (pair,) = plan.join_node
    best = min(reference_cost(case, {pair: j}, stored).objective for j in range(case["n_nodes"]))
    assert reference_cost(case, plan.join_node, stored).objective == best


def test_cheapest_on_ties_avoids_needless_copies():
    """Node 2 already carries 10; a and b live on node 1. Joining on 0 or 1 both score 10 (the max
    stays node 2's): as printed the lowest node, 0, wins and both chunks are copied; the cheapest
    tie is node 1, where nothing moves. Algorithm 2 likewise: v's results are on node 1."""
    location = {"a": 1, "b": 1, "v": 0}
    inputs = PlanInputs([("a", "b", "v")], 3, location, {"a": 1, "b": 1})
    for options, expected in ((GreedyOptions(), 0), (GreedyOptions(cheapest_on_ties=True), 1)):
        state = JoinPlanState(inputs, options)
        state.cpu[:] = [0, 0, 10]
        assert state.candidate_objectives("a", "b").tolist() == [10, 10, 12]
        assert state.place_best("a", "b") == expected
        merges = MergePlanState(inputs, {("a", "b"): 1}, ntwk=[0, 0, 0], cpu=[0, 0, 10], options=options)
        assert merges.candidate_objectives("v").tolist() == [10, 10, 12]
        assert merges.place_best("v") == expected


@settings(max_examples=40, deadline=None)
@given(cases(max_nodes=3, max_views=3, max_triples=6), st.integers(0, 2**32 - 1))
def test_algorithm_2_never_beats_brute_force(case, seed):
    inputs = inputs_of(case)
    joins = plan_joins(inputs, seed)
    view_node = reassign_view_chunks(inputs, joins, seed)
    objective = reference_cost(case, joins.join_node, view_node).objective
    assert objective >= best_view_objective(case, joins.join_node) - 1e-9


@settings(max_examples=40, deadline=None)
@given(cases(max_nodes=3, max_views=1, max_triples=6), st.integers(0, 2**32 - 1))
def test_algorithm_2_is_optimal_for_one_view_chunk(case, seed):
    inputs = inputs_of(case)
    joins = plan_joins(inputs, seed)
    view_node = reassign_view_chunks(inputs, joins, seed)
    objective = reference_cost(case, joins.join_node, view_node).objective
    assert objective == pytest.approx(best_view_objective(case, joins.join_node))


# --- the paper's examples ----------------------------------------------------------------


def test_baseline_reproduces_the_example_of_section_4_1():
    """New chunks 7 and 8 go to X and Y, new view chunk 8 to Z; 7 joins 2 and 8 on Y and 4 on X; the
    merges send Y -> X (V2), X -> Y (V4) and Y -> Z (V8)."""
    location = {"A2": Y, "A4": X, "dA7": COORDINATOR, "dA8": COORDINATOR, "V2": X, "V4": Y, "V8": COORDINATOR}
    case = {
        "triples": [("dA7", "A2", "V2"), ("dA7", "A4", "V4"), ("dA7", "dA8", "V8")],
        "n_nodes": 3,
        "location": location,
        "size": {"A2": 1, "A4": 1, "dA7": 1, "dA8": 1},
        "t_ntwk": 4,
        "t_cpu": 1,
    }
    plan = baseline_plan(inputs_of(case), chunking={"dA7": X, "dA8": Y, "V8": Z})
    assert plan.join_node == {("dA7", "A2"): Y, ("dA7", "A4"): X, ("dA7", "dA8"): Y}
    assert plan.view_node == {"V2": X, "V4": Y, "V8": Z}
    assert plan.array_node == {"dA7": X, "A2": Y, "A4": X, "dA8": Y}
    # merge sends: Y twice (V2, V8), X once (V4), each B_pq * t_ntwk = 8; the deltas come from the
    # coordinator (dA7 to X and Y, dA8 to Y)
    assert plan.cost.ntwk.tolist() == [8, 16, 0]
    assert plan.cost.coordinator_ntwk == 3 * 4
    assert_matches_reference(case, plan)


def figure_7_inputs() -> PlanInputs:
    """Figure 1's chunks as Appendix B.1 places them (unit sizes, T_ntwk = 4, T_cpu = 1); its deltas
    sit with their base chunks (X holds ΔA4 and ΔA7, Y ΔA2, Z ΔA3), as the example's charges show."""
    location = {"A1": X, "A4": X, "A2": Y, "A5": Y, "A3": Z, "A6": Z}
    location |= {"dA4": X, "dA7": X, "dA2": Y, "dA3": Z, "V": X}
    triples = [("dA4", "A1", "V"), ("dA2", "A1", "V"), ("dA2", "dA3", "V"), ("dA7", "A2", "V")]
    return PlanInputs(triples, 3, location, dict.fromkeys(location, 1), t_ntwk=4, t_cpu=1)


def test_algorithm_1_reproduces_figure_7():
    inputs = figure_7_inputs()
    state = JoinPlanState(inputs)
    # the first three triples, in the example's order, land where the example has them
    assert [state.place_best(p, q) for p, q, _ in inputs.triples[:3]] == [X, X, Y]
    assert state.ntwk.tolist() == [0, 4, 4]
    assert state.cpu.tolist() == [4, 2, 0]
    assert state.replicas == {"dA2": {X}, "dA3": {Y}}
    # the 4th: opt_now 8 at X (A2 from Y), 4 at Y (ΔA7 from X), 8 at Z (both sent); Y wins
    assert state.candidate_objectives("dA7", "A2").tolist() == [8, 4, 8]
    assert state.place_best("dA7", "A2") == Y
    assert state.ntwk.tolist() == [4, 4, 4]
    assert state.cpu.tolist() == [4, 4, 0]


def test_algorithm_2_reproduces_table_2():
    """V1's results: J1 = ΔA1 ⋈ A1 and J2 = ΔA4 ⋈ A1 on X, J3 = ΔA2 ⋈ A1 on Y; the loads before are
    Table 2's (X 32/36, Y 36/30, Z 30/35). The table charges 4 per result sent and 2 per merge, i.e.
    B_pq * T_ntwk = 4 for unit chunks: T_ntwk = 2 here (B.1 used 4), T_cpu = 1."""
    location = {"A1": X, "dA1": X, "dA4": X, "dA2": Y, "V1": X}
    triples = [("dA1", "A1", "V1"), ("dA4", "A1", "V1"), ("dA2", "A1", "V1")]
    inputs = PlanInputs(triples, 3, location, dict.fromkeys(location, 1), t_ntwk=2, t_cpu=1)
    join_node = {("dA1", "A1"): X, ("dA4", "A1"): X, ("dA2", "A1"): Y}
    state = MergePlanState(inputs, join_node, ntwk=[32, 36, 30], cpu=[36, 30, 35])
    assert state.candidate_objectives("V1").tolist() == [42, 40, 41]
    assert state.place_best("V1") == Y
    assert state.ntwk.tolist() == [40, 36, 30]
    assert state.cpu.tolist() == [36, 36, 35]


def test_algorithm_3_reproduces_figure_8():
    """Scores (A2,V1) 8, (A1,V1) 6, (A1,V2) 4, (A2,V3) 4, (A3,V3) 2 from four batches of weight 2;
    views V2 on X, V1 on Y, V3 on Z with cpu_thr 4, 3, 1; copies A1: X,Z; A2: Y,Z; A3: Z,Y."""
    location = {"A1": X, "A2": Y, "A3": Z, "V1": X, "V2": X, "V3": Z}
    inputs = PlanInputs([("A1", "A2", "V1"), ("A3", "A3", "V3")], 3, location, {"A1": 1, "A2": 1, "A3": 1})
    plan = assemble_plan(inputs, {("A1", "A2"): Z, ("A3", "A3"): Y}, {"V1": Y, "V3": Z})
    assert plan.replicas == {"A1": {Z}, "A2": {Z}, "A3": {Y}}
    history = [
        [("A2", "A2", "V1"), ("A1", "A1", "V1"), ("A1", "A1", "V2"), ("A2", "A2", "V3"), ("A3", "A3", "V3")],
        [("A2", "A2", "V1"), ("A1", "A1", "V1"), ("A1", "A1", "V2"), ("A2", "A2", "V3")],
        [("A2", "A2", "V1"), ("A1", "A1", "V1")],
        [("A2", "A2", "V1")],
    ]
    moved = reassign_array_chunks(history, [2, 2, 2, 2], inputs, plan, cpu_threshold=[4, 3, 1])
    assert moved == {"A2": Y, "A1": X, "A3": Z}
    # with room on Z only, A2 falls to its next pair (A2, V3): Z, where it has a copy
    assert reassign_array_chunks(history, [2] * 4, inputs, plan, cpu_threshold=[0, 0, 3])["A2"] == Z


def test_default_cpu_threshold_is_the_average_join_input_per_node():
    """Two unit chunks at node 0 joined on node 1, where their view is: cpu_thr = B_pq / N = 1, so
    only the first of the tied pairs (by repr) follows the view; with room for both, both do."""
    location = {"a1": 0, "a2": 0, "v": 1}
    inputs = PlanInputs([("a1", "a2", "v")], 2, location, {"a1": 1, "a2": 1})
    plan = assemble_plan(inputs, {("a1", "a2"): 1}, {"v": 1})
    history = [inputs.triples]
    assert reassign_array_chunks(history, [1], inputs, plan) == {"a1": 1, "a2": 0}
    assert reassign_array_chunks(history, [1], inputs, plan, cpu_threshold=2) == {"a1": 1, "a2": 1}


def test_a_delta_without_room_goes_to_its_best_view():
    location = {"a": 0, "d": COORDINATOR, "v": 1, "w": 0}
    triples = [("d", "a", "v"), ("d", "d", "v"), ("a", "a", "w")]
    inputs = PlanInputs(triples, 2, location, {"a": 1, "d": 2})
    plan = assemble_plan(inputs, {("d", "a"): 0, ("d", "d"): 0, ("a", "a"): 0}, {"v": 1, "w": 0})
    moved = reassign_array_chunks([triples], [1], inputs, plan, cpu_threshold=0)
    assert moved == {"d": 1, "a": 0}
    final = assemble_plan(inputs, plan.join_node, plan.view_node, moved)
    assert final.replicas == {"d": {0, 1}}
    assert final.cost.coordinator_ntwk == 2 * 2


# --- skew: space-filling placement with the updates on one node ------------------------------


def test_differential_balances_what_the_baseline_piles_on_one_node():
    """A 4 x 4 grid placed row by row (row r on node r, view chunks with their array chunks); the
    batch updates row 0, each delta joining itself and the existing chunks of its 3 x 3 block. The
    baseline joins the 4 self pairs and 10 row-0 pairs on node 0 (14 x B_pq 2 = 28), the 10 row-1
    pairs on node 1 (20, sent back to node 0: ntwk 20) and merges all 24 results on node 0 (48): node
    0 carries 76 while nodes 2 and 3 idle. Algorithm 1 spreads the joins; the merges still pile on
    node 0 until Algorithm 2 moves view chunks too."""
    location = {("A", (r, c)): r for r in range(4) for c in range(4)}
    location |= {("V", (r, c)): r for r in range(4) for c in range(4)}
    location |= {("dA", (0, c)): COORDINATOR for c in range(4)}
    triples = []
    for c in range(4):
        delta, view = ("dA", (0, c)), ("V", (0, c))
        triples.append((delta, delta, view))
        for r2, c2 in itertools.product(range(2), range(c - 1, c + 2)):
            if 0 <= c2 < 4:
                triples.append((delta, ("A", (r2, c2)), view))
    inputs = PlanInputs(triples, 4, location, dict.fromkeys(location, 1), t_ntwk=1, t_cpu=1)
    row_block = {("dA", (0, c)): 0 for c in range(4)}
    baseline = baseline_plan(inputs, chunking=row_block)
    assert baseline.cost.cpu.tolist() == [76, 20, 0, 0]
    assert baseline.cost.ntwk.tolist() == [0, 20, 0, 0]
    differential = differential_plan(inputs, seed=7, chunking=row_block)
    reassign = reassign_plan([triples], [1], inputs, seed=7)
    assert reassign.cost.objective < differential.cost.objective < baseline.cost.objective


# --- simulation and inputs ---------------------------------------------------------------


def test_locations_after_makes_the_deltas_existing_chunks():
    inputs = figure_7_inputs()
    location = {**inputs.location, "dA9": COORDINATOR, "W": COORDINATOR}
    batch = [("dA9", "A1", "W"), ("dA9", "A2", "W")]
    inputs = PlanInputs(batch, 3, location, dict.fromkeys(location, 1), t_ntwk=4, t_cpu=1)
    plan = reassign_plan([batch], decay_weights(1, 0.5), inputs, seed=3)
    after = locations_after(inputs, plan)
    assert after["dA9"] == plan.array_node["dA9"] != COORDINATOR
    assert after["W"] == plan.view_node["W"]
    assert after["A5"] == Y
    following = PlanInputs([("dA4", "dA9", "V")], 3, after, dict.fromkeys(after, 1))
    assert not following.is_new("dA9")


def test_decay_weights_are_newest_first():
    weights = decay_weights(4, 0.5)
    assert weights[0] == 1.0
    assert np.all(np.diff(weights) < 0)
    assert weights[3] == pytest.approx(np.exp(-1.5))


@FAST
@given(cases(), st.data())
def test_a_chunk_without_size_or_location_is_named(case, data):
    p, q, v = data.draw(st.sampled_from(case["triples"]))
    chunk = data.draw(st.sampled_from([p, q]))
    del case["size"][chunk]
    with pytest.raises(ValidationError, match=repr(chunk)):
        inputs_of(case)
    case["size"][chunk] = 1
    missing = data.draw(st.sampled_from([p, q, v]))
    del case["location"][missing]
    with pytest.raises(ValidationError, match=f"{missing!r} has no location"):
        inputs_of(case)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_nodes": 0}, "at least one worker"),
        ({"t_ntwk": -1}, "t_ntwk"),
        ({"t_cpu": float("nan")}, "t_cpu"),
        ({"size": {"a": -2, "b": 1}}, "'a' has size -2"),
        ({"location": {"a": 5, "b": 0, "v": 0}}, "'a' is located at 5"),
        ({"triples": [("a", "b")]}, "triple is"),
    ],
)
def test_bad_inputs(change, message):
    case = {
        "triples": [("a", "b", "v")],
        "n_nodes": 2,
        "location": {"a": 0, "b": 1, "v": 0},
        "size": {"a": 1, "b": 1},
        "t_ntwk": 1,
        "t_cpu": 1,
    }
    with pytest.raises(ValidationError, match=message):
        PlanInputs(**(case | change))


def test_bad_plan_and_history_arguments():
    location = {"a": 0, "d": COORDINATOR, "v": 1}
    inputs = PlanInputs([("d", "a", "v")], 2, location, {"a": 1, "d": 1})
    with pytest.raises(ValidationError, match="'d'"):
        baseline_plan(inputs, chunking={})
    with pytest.raises(ValidationError, match="not a worker"):
        baseline_plan(inputs, chunking={"d": COORDINATOR})
    plan = plan_joins(inputs, 0)
    with pytest.raises(ValidationError, match="2 weights"):
        reassign_array_chunks([inputs.triples], [1, 0.5], inputs, plan)
    with pytest.raises(ValidationError, match="'d' is in no batch"):
        reassign_array_chunks([[("a", "a", "v")]], [1], inputs, plan)
    with pytest.raises(ValidationError, match="'ghost' has no size"):
        reassign_array_chunks([inputs.triples, [("ghost", "a", "v")]], [1, 0.5], inputs, plan)
    with pytest.raises(ValidationError, match="one per worker"):
        reassign_array_chunks([inputs.triples], [1], inputs, plan, cpu_threshold=[1, 2, 3])
    with pytest.raises(ValidationError, match="has no join node"):
        assemble_plan(inputs, {})
