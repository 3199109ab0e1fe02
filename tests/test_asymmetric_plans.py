"""The asymmetric maintenance planners (arrayviews.scheduling.asymmetric, paper 003: He, Xie, Yang, Yu,
"Asymmetric Batch Incremental View Maintenance") against brute force written here: every action
vector 0 <= p <= s of tiny instances is tried, giving OPT and, filtered by this file's own reading of
Definition 3, OPT^LGM. Checked: the A* search finds OPT^LGM, Theorems 1, 2 and 4, Lemmas 1 and 2,
the baselines' validity, the paper's tightness example, two hand-worked plans and input errors."""

from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.scheduling import (
    MaintenanceProblem,
    adapted_plan,
    batch_bounds,
    greedy_minimal_actions,
    is_lazy,
    is_lgm,
    is_valid,
    lgm_search,
    make_lazy_plan,
    make_lgm_plan,
    naive_plan,
    online_action,
    online_plan,
    optimal_lgm_plan,
    plan_cost,
    simulate,
    time_to_full,
)

# --- cost functions (monotone, subadditive, f(0) = 0) with readable reprs -----------------------


@dataclass(frozen=True)
class Cost:
    """f(k) for k > 0: linear a*k + b; step a*ceil(k/(b+1)) (scan of blocks); steplinear
    a*ceil(k/(b+1)) + k; sqrt a*sqrt(k) + b; capped min(a*k, a + b). Integer coefficients keep the
    sums exact except for sqrt (compared with a relative tolerance)."""

    kind: str
    a: int
    b: int

    def __call__(self, k: int) -> float:
        if k == 0:
            return 0
        if self.kind == "linear":
            return self.a * k + self.b
        if self.kind == "step":
            return self.a * -(-k // (self.b + 1))
        if self.kind == "steplinear":
            return self.a * -(-k // (self.b + 1)) + k
        if self.kind == "sqrt":
            return self.a * math.sqrt(k) + self.b
        return min(self.a * k, self.a + self.b)


ALL_KINDS = ("linear", "step", "steplinear", "sqrt", "capped")
CONCAVE_KINDS = ("linear", "sqrt", "capped")


def close(x: float, y: float) -> bool:
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)


@st.composite
def instances(draw, kinds=ALL_KINDS, max_tables=3):
    """(costs, arrivals, C): n = 1..3 tables, T <= 5 (T <= 3 for three tables), 0..2 arrivals."""
    n = draw(st.integers(1, max_tables))
    horizon = draw(st.integers(0, 5 if n < 3 else 3))
    costs = [
        Cost(draw(st.sampled_from(kinds)), draw(st.integers(1, 4)), draw(st.integers(0, 6))) for _ in range(n)
    ]
    row = st.tuples(*[st.integers(0, 2)] * n)
    arrivals = draw(st.lists(row, min_size=horizon + 1, max_size=horizon + 1))
    return costs, arrivals, draw(st.integers(0, 16))


# --- the reference: a simulator, Definitions 1-3 and exhaustive search, all written here ---------


def vector_cost(costs, vector) -> float:
    return sum(f(k) for f, k in zip(costs, vector, strict=True))


def ref_states(arrivals, plan):
    post, before = (0,) * len(arrivals[0]), []
    for d, p in zip(arrivals, plan, strict=True):
        pre = tuple(x + y for x, y in zip(post, d, strict=True))
        before.append(pre)
        post = tuple(x - y for x, y in zip(pre, p, strict=True))
    return before


def action_allowed(costs, limit, pre, p, last: bool, lgm: bool) -> bool:
    """Definition 1 for one action; with lgm, Definition 3 too (laziness, greediness, minimality)."""
    if any(x < 0 or x > s for x, s in zip(p, pre, strict=True)):
        return False
    rest = tuple(s - x for s, x in zip(pre, p, strict=True))
    if last:
        return not any(rest)
    if vector_cost(costs, rest) > limit:
        return False
    if not lgm:
        return True
    if any(p) and vector_cost(costs, pre) <= limit:
        return False  # not lazy
    if any(x not in (0, s) for x, s in zip(p, pre, strict=True)):
        return False  # not greedy
    for i, x in enumerate(p):  # not minimal: table i could have been left alone
        if x and vector_cost(costs, rest[:i] + (pre[i],) + rest[i + 1 :]) <= limit:
            return False
    return True


def ref_valid(costs, arrivals, limit, plan) -> bool:
    before = ref_states(arrivals, plan)
    last = len(arrivals) - 1
    return all(action_allowed(costs, limit, before[t], plan[t], t == last, False) for t in range(last + 1))


def ref_lgm(costs, arrivals, limit, plan) -> bool:
    """A valid plan satisfying Definition 3 (each action checked against its pre-action state)."""
    before = ref_states(arrivals, plan)
    last = len(arrivals) - 1
    return all(action_allowed(costs, limit, before[t], plan[t], t == last, True) for t in range(last + 1))


def ref_lazy(costs, arrivals, limit, plan) -> bool:
    before = ref_states(arrivals, plan)
    return all(not any(plan[t]) or vector_cost(costs, before[t]) > limit for t in range(len(arrivals) - 1))


def ref_cost(costs, plan) -> float:
    return sum(vector_cost(costs, p) for p in plan)


def brute_force(costs, arrivals, limit, lgm: bool = False) -> tuple[float, tuple]:
    """Minimum cost over every valid (with lgm: valid LGM) plan and one such plan. Every action
    vector 0 <= p <= s is tried at every step; the cost-to-go is memoized on (t, post-state)."""
    last = len(arrivals) - 1

    @functools.cache
    def best_from(t: int, post: tuple) -> tuple[float, tuple]:
        pre = tuple(x + y for x, y in zip(post, arrivals[t], strict=True))
        if t == last:
            return vector_cost(costs, pre), (pre,)
        best = (math.inf, ())
        for p in itertools.product(*(range(s + 1) for s in pre)):
            if action_allowed(costs, limit, pre, p, False, lgm):
                rest, tail = best_from(t + 1, tuple(s - x for s, x in zip(pre, p, strict=True)))
                if vector_cost(costs, p) + rest < best[0]:
                    best = (vector_cost(costs, p) + rest, (p, *tail))
        return best

    return best_from(0, (0,) * len(arrivals[0]))


def lgm_dynamic_program(costs, arrivals, limit) -> float:
    """OPT^LGM by memoized recursion over the LGM choices only (act only on full states, trying every
    set of tables to empty, kept when action_allowed accepts it): fast enough for T of a few dozen."""
    last, n = len(arrivals) - 1, len(arrivals[0])

    @functools.cache
    def best_from(t: int, post: tuple) -> float:
        pre = tuple(x + y for x, y in zip(post, arrivals[t], strict=True))
        if t == last:
            return vector_cost(costs, pre)
        if vector_cost(costs, pre) <= limit:
            return best_from(t + 1, pre)
        best = math.inf
        for chosen in itertools.product((False, True), repeat=n):
            p = tuple(s if c else 0 for s, c in zip(pre, chosen, strict=True))
            if action_allowed(costs, limit, pre, p, False, True):
                rest = best_from(t + 1, tuple(s - x for s, x in zip(pre, p, strict=True)))
                best = min(best, vector_cost(costs, p) + rest)
        return best

    return best_from(0, (0,) * n)


def every_plan(costs, arrivals, limit, lgm: bool = False):
    """Every valid (LGM) plan, without memoization: only for the tiniest instances."""
    last = len(arrivals) - 1

    def extend(t, post, prefix):
        pre = tuple(x + y for x, y in zip(post, arrivals[t], strict=True))
        for p in itertools.product(*(range(s + 1) for s in pre)):
            if action_allowed(costs, limit, pre, p, t == last, lgm):
                if t == last:
                    yield (*prefix, p)
                else:
                    yield from extend(t + 1, tuple(s - x for s, x in zip(pre, p, strict=True)), (*prefix, p))

    yield from extend(0, (0,) * len(arrivals[0]), ())


def draw_valid_plan(data, costs, arrivals, limit) -> tuple:
    """A random valid plan: at each step one of all valid actions, chosen by Hypothesis."""
    post, plan, last = (0,) * len(arrivals[0]), [], len(arrivals) - 1
    for t in range(last + 1):
        pre = tuple(x + y for x, y in zip(post, arrivals[t], strict=True))
        options = [
            p
            for p in itertools.product(*(range(s + 1) for s in pre))
            if action_allowed(costs, limit, pre, p, t == last, False)
        ]
        p = data.draw(st.sampled_from(options))
        plan.append(p)
        post = tuple(s - x for s, x in zip(pre, p, strict=True))
    return tuple(plan)


# --- the reference checks itself ------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(instances(max_tables=2).filter(lambda c: len(c[1]) <= 4))
def test_memoized_reference_equals_full_enumeration(case):
    """The memoized brute force gives the minimum over an explicit list of all (LGM) plans."""
    costs, arrivals, limit = case
    for lgm in (False, True):
        plans = list(every_plan(costs, arrivals, limit, lgm))
        assert plans, "emptying everything at every step is always valid"
        assert close(min(ref_cost(costs, p) for p in plans), brute_force(costs, arrivals, limit, lgm)[0])
    assert close(lgm_dynamic_program(costs, arrivals, limit), brute_force(costs, arrivals, limit, True)[0])


@settings(max_examples=60, deadline=None)
@given(instances(), st.data())
def test_plan_checks_agree_with_reference(case, data):
    """is_valid, is_lazy, is_lgm, plan_cost and simulate on arbitrary (often invalid) plans."""
    costs, arrivals, limit = case
    problem = MaintenanceProblem(costs, arrivals, limit)
    plan = tuple(
        tuple(data.draw(st.integers(-1, 4)) for _ in range(problem.n)) for _ in range(problem.horizon + 1)
    )
    assert is_valid(problem, plan) == ref_valid(costs, arrivals, limit, plan)
    if all(x >= 0 for p in plan for x in p):
        assert close(plan_cost(problem, plan), ref_cost(costs, plan))
    before, after = simulate(problem, plan)
    assert list(before) == ref_states(arrivals, plan)
    assert all(
        s - p == r
        for b, a, q in zip(before, after, plan, strict=True)
        for s, r, p in zip(b, a, q, strict=True)
    )
    if is_valid(problem, plan):
        assert is_lazy(problem, plan) == ref_lazy(costs, arrivals, limit, plan)
        assert is_lgm(problem, plan) == ref_lgm(costs, arrivals, limit, plan)


@settings(max_examples=60, deadline=None)
@given(instances(), st.data())
def test_greedy_minimal_actions_are_exactly_the_lgm_actions(case, data):
    """The A* out-edges at a full state: every action the reference accepts as valid and LGM."""
    costs, _, limit = case
    state = tuple(data.draw(st.integers(0, 6)) for _ in costs)
    expected = {
        p
        for p in itertools.product(*(range(s + 1) for s in state))
        if action_allowed(costs, limit, state, p, False, True)
    }
    if vector_cost(costs, state) <= limit:
        expected = {(0,) * len(costs)}
    assert set(greedy_minimal_actions(costs, limit, state)) == expected


# --- A* (section 4.1, Theorem 3) -------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(instances())
def test_astar_finds_the_best_lgm_plan(case):
    costs, arrivals, limit = case
    problem = MaintenanceProblem(costs, arrivals, limit)
    plan, cost = optimal_lgm_plan(problem)
    assert close(cost, brute_force(costs, arrivals, limit, lgm=True)[0])
    assert ref_valid(costs, arrivals, limit, plan)
    assert ref_lgm(costs, arrivals, limit, plan)
    assert close(ref_cost(costs, plan), cost)
    assert close(lgm_search(problem, "zero").cost, cost)  # Dijkstra over the same graph


@st.composite
def longer_instances(draw):
    """n = 1..3 tables, T = 5..30, 0..3 arrivals per step, C up to 24."""
    n = draw(st.integers(1, 3))
    costs = [
        Cost(draw(st.sampled_from(ALL_KINDS)), draw(st.integers(1, 4)), draw(st.integers(0, 6)))
        for _ in range(n)
    ]
    row = st.tuples(*[st.integers(0, 3)] * n)
    arrivals = draw(st.lists(row, min_size=6, max_size=31))
    return costs, arrivals, draw(st.integers(0, 24))


@settings(max_examples=60, deadline=None)
@given(longer_instances())
def test_astar_finds_the_best_lgm_plan_on_longer_instances(case):
    """Against the LGM dynamic program, where an inadmissible heuristic shows more often."""
    costs, arrivals, limit = case
    plan, cost = optimal_lgm_plan(MaintenanceProblem(costs, arrivals, limit))
    assert close(cost, lgm_dynamic_program(costs, arrivals, limit))
    assert ref_lgm(costs, arrivals, limit, plan) and close(ref_cost(costs, plan), cost)


@settings(max_examples=60, deadline=None)
@given(instances(kinds=CONCAVE_KINDS))
def test_printed_heuristic_finds_the_best_lgm_plan_for_concave_costs(case):
    """The section 4.1 heuristic is admissible for concave costs; re-expansion makes A* exact."""
    costs, arrivals, limit = case
    result = lgm_search(MaintenanceProblem(costs, arrivals, limit), "paper")
    assert close(result.cost, brute_force(costs, arrivals, limit, lgm=True)[0])
    assert ref_lgm(costs, arrivals, limit, result.plan)


def test_printed_heuristic_overestimates_for_a_step_cost():
    """floor((s + K) / b) * f(b) charges f(b) per b modifications, but with f(k) = 2 ceil(k/5) + k a
    greedy action may empty 5 for 7 < f(b) = 11 (b = 7): A* with it misses the best LGM plan. The
    default heuristic (rate per modification) does not."""
    costs = [Cost("steplinear", 2, 4), Cost("linear", 1, 3)]
    arrivals = [(1, 1), (3, 2), (2, 3), (3, 0), (3, 0)]
    problem = MaintenanceProblem(costs, arrivals, 5)
    best = brute_force(costs, arrivals, 5, lgm=True)[0]
    assert best == 30
    assert lgm_search(problem, "paper").cost == 32
    assert optimal_lgm_plan(problem)[1] == 30


# --- Theorems 1 and 2, the tightness example --------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(instances())
def test_theorem1_best_lgm_plan_within_twice_optimal(case):
    costs, arrivals, limit = case
    optimum = brute_force(costs, arrivals, limit)[0]
    best_lgm = brute_force(costs, arrivals, limit, lgm=True)[0]
    assert optimum <= best_lgm + 1e-9
    assert best_lgm <= 2 * optimum + 1e-9


@settings(max_examples=60, deadline=None)
@given(instances(kinds=("linear",)))
def test_theorem2_linear_costs_best_lgm_plan_is_optimal(case):
    costs, arrivals, limit = case
    assert (
        optimal_lgm_plan(MaintenanceProblem(costs, arrivals, limit))[1]
        == brute_force(costs, arrivals, limit)[0]
    )


def test_tightness_example_lgm_strictly_worse():
    """Section 3.2's example with eps = 1/2, C = 4: f(x) = x up to 4 modifications, then 5 (subadditive,
    not concave); 5 arrive per step over T = 3. LGM plans must empty all 5 at every step (20); the
    optimum keeps 4 back every other step."""
    cost = lambda k: k if k <= 4 else 5  # noqa: E731
    arrivals = [(5,)] * 4
    problem = MaintenanceProblem([cost], arrivals, 4)
    optimum, plan = brute_force([cost], arrivals, 4)
    best_lgm = brute_force([cost], arrivals, 4, lgm=True)[0]
    assert (optimum, best_lgm) == (12, 20)
    assert best_lgm > optimum and best_lgm >= (2 - 0.5) * optimum
    assert optimal_lgm_plan(problem)[1] == 20
    assert not ref_lgm([cost], arrivals, 4, plan)


# --- Lemmas 1 and 2 ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(instances(), st.data())
def test_lemma1_make_lazy_plan(case, data):
    costs, arrivals, limit = case
    plan = draw_valid_plan(data, costs, arrivals, limit)
    lazy = make_lazy_plan(MaintenanceProblem(costs, arrivals, limit), plan)
    assert ref_valid(costs, arrivals, limit, lazy)
    assert ref_lazy(costs, arrivals, limit, lazy)
    assert ref_cost(costs, lazy) <= ref_cost(costs, plan) + 1e-9


@settings(max_examples=60, deadline=None)
@given(instances(), st.data())
def test_lemma2_make_lgm_plan(case, data):
    costs, arrivals, limit = case
    plan = draw_valid_plan(data, costs, arrivals, limit)
    lgm = make_lgm_plan(MaintenanceProblem(costs, arrivals, limit), plan)
    assert ref_valid(costs, arrivals, limit, lgm)
    assert ref_lgm(costs, arrivals, limit, lgm)
    assert ref_cost(costs, lgm) <= 2 * ref_cost(costs, plan) + 1e-9  # the Theorem 1 construction


def test_transformations_reject_invalid_plans():
    problem = MaintenanceProblem([Cost("linear", 1, 0)], [(2,), (2,)], 1)
    for transform in (make_lazy_plan, make_lgm_plan):
        with pytest.raises(ValueError, match="Definition 1"):
            transform(problem, ((0,), (4,)))


# --- NAIVE, ONLINE, ADAPT ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(instances(), st.integers(0, 7), st.integers(1, 4))
def test_baselines_are_valid_and_no_cheaper_than_optimal(case, planned_horizon, window):
    costs, arrivals, limit = case
    problem = MaintenanceProblem(costs, arrivals, limit)
    optimum = brute_force(costs, arrivals, limit)[0]
    for plan in (naive_plan(problem), online_plan(problem, window), adapted_plan(problem, planned_horizon)):
        assert len(plan) == len(arrivals)
        assert ref_valid(costs, arrivals, limit, plan)
        assert ref_cost(costs, plan) >= optimum - 1e-9
    assert ref_lgm(costs, arrivals, limit, online_plan(problem, window))


@settings(max_examples=60, deadline=None)
@given(instances(kinds=("linear",)), st.integers(1, 4), st.data())
def test_theorem4_adapt_for_an_earlier_refresh(case, extra, data):
    """T < T0, linear costs a*k + b: ADAPT costs at most OPT_T + sum_i b_i."""
    costs, arrivals, limit = case
    arrivals = arrivals + data.draw(
        st.lists(st.tuples(*[st.integers(0, 2)] * len(costs)), min_size=extra, max_size=extra)
    )
    planned_horizon = len(arrivals) - 1
    horizon = data.draw(st.integers(0, planned_horizon - 1))
    real = MaintenanceProblem(costs, arrivals[: horizon + 1], limit)
    plan = adapted_plan(real, planned_horizon, forecast=arrivals)
    assert ref_valid(costs, arrivals[: horizon + 1], limit, plan)
    optimum = brute_force(costs, arrivals[: horizon + 1], limit)[0]
    assert ref_cost(costs, plan) <= optimum + sum(f.b for f in costs)


@settings(max_examples=40, deadline=None)
@given(instances(kinds=("linear",), max_tables=2), st.integers(1, 4), st.data())
def test_theorem4_adapt_for_a_later_refresh_with_periodic_arrivals(case, planned_horizon, data):
    """T > T0, arrivals repeating every T0 + 1 steps: ADAPT costs at most OPT_T + ceil(T/T0) sum_i b_i."""
    costs, arrivals, limit = case
    cycle = (arrivals * (planned_horizon + 1))[: planned_horizon + 1]
    horizon = data.draw(st.integers(planned_horizon + 1, 8))
    periodic = [cycle[t % (planned_horizon + 1)] for t in range(horizon + 1)]
    plan = adapted_plan(MaintenanceProblem(costs, periodic, limit), planned_horizon)
    assert ref_valid(costs, periodic, limit, plan)
    optimum = brute_force(costs, periodic, limit)[0]
    assert ref_cost(costs, plan) <= optimum + math.ceil(horizon / planned_horizon) * sum(f.b for f in costs)


def test_adapt_falls_back_when_arrivals_differ_from_the_forecast():
    """Planned for no arrivals at all, run where both tables fill: every action is a fallback."""
    costs = [Cost("linear", 1, 10), Cost("linear", 3, 0)]
    arrivals = [(1, 1)] * 10
    problem = MaintenanceProblem(costs, arrivals, 14)
    plan = adapted_plan(problem, 3, forecast=[(0, 0)] * 4)
    assert ref_valid(costs, arrivals, 14, plan)
    # the cheapest minimal action at (2, 2) empties the second table (6 against 12)
    assert plan[1] == (0, 2)


def test_online_action_step_by_step():
    """Two tables, f1 = k + 10, f2 = 3k, C = 14, state (2, 2) (cost 18): the two minimal actions
    empty table 2 (cost 6, leaves (2, 0)) or table 1 (cost 12, leaves (0, 2))."""
    costs, limit, state = [Cost("linear", 1, 10), Cost("linear", 3, 0)], 14, (2, 2)
    assert time_to_full(costs, limit, (0, 2), (0, 1)) == 3  # 6 + 3k > 14 first at k = 3
    assert time_to_full(costs, limit, (2, 0), (0, 1)) == 1
    assert time_to_full(costs, limit, (2, 0), (0, 0)) == math.inf
    # H = 6 / (0 + 1) = 6 against 12 / (0 + 3) = 4: empty the costlier table, it stays empty longer
    assert online_action(costs, limit, state, 0.0, 0, (0, 1)) == (2, 0)
    # both refill in one step: H = 6 / 2 against 12 / 2
    assert online_action(costs, limit, state, 0.0, 1, (1, 1)) == (0, 2)
    # no arrivals expected: the cheapest action
    assert online_action(costs, limit, state, 50.0, 7, (0, 0)) == (0, 2)
    assert online_action(costs, limit, (1, 1), 0.0, 0, (1, 1)) == (0, 0)  # not full: no action


# --- hand-worked plans ---------------------------------------------------------------------------------


def test_one_table_linear_cost_hand_plan():
    """f(k) = k + 2, C = 5 (at most 3 may wait), one arrival per step, T = 9: act when 4 have queued
    (t = 3, 7) and refresh the last 2 at T; cost 6 + 6 + 4 = 16 = 10 * 1 + 2 * ceil(10 / 4) actions."""
    costs = [Cost("linear", 1, 2)]
    arrivals = [(1,)] * 10
    problem = MaintenanceProblem(costs, arrivals, 5)
    expected = ((0,), (0,), (0,), (4,), (0,), (0,), (0,), (4,), (0,), (2,))
    plan, cost = optimal_lgm_plan(problem)
    assert (plan, cost) == (expected, 16)
    assert brute_force(costs, arrivals, 5)[0] == 16
    assert naive_plan(problem) == expected  # with one table NAIVE is the only LGM plan


def test_two_tables_asymmetric_plan_beats_naive_by_hand():
    """f1 = k + 10 (setup heavy), f2 = 3k (no batching gain), C = 14, one arrival each per step, T = 9.
    NAIVE empties both at (2, 2) on odd steps: 5 * (12 + 6) = 90. Emptying only table 2 when full
    lets table 1 grow to 5 before it must go (t = 4) and again at T: 10 * 3 + 2 * 15 = 60."""
    costs = [Cost("linear", 1, 10), Cost("linear", 3, 0)]
    arrivals = [(1, 1)] * 10
    problem = MaintenanceProblem(costs, arrivals, 14)
    plan, cost = optimal_lgm_plan(problem)
    assert plan_cost(problem, naive_plan(problem)) == 90
    assert cost == 60 == brute_force(costs, arrivals, 14)[0]
    assert [p[0] for p in plan] == [0, 0, 0, 0, 5, 0, 0, 0, 0, 5]
    assert ref_valid(costs, arrivals, 14, plan) and ref_lgm(costs, arrivals, 14, plan)


def test_batch_bounds_edge_cases():
    """b_i = m_i + max{b | f_i(b) <= C}: 0 when f_i(1) > C, capped at the arrivals when f_i is bounded,
    and 0 for a table that never receives anything (the heuristics must not divide by it)."""
    costs = [Cost("linear", 5, 0), Cost("capped", 1, 0), Cost("linear", 1, 0)]
    arrivals = [(2, 1, 0), (0, 3, 0), (1, 0, 0)]
    problem = MaintenanceProblem(costs, arrivals, 4)
    assert batch_bounds(problem) == (2 + 0, 3 + 4, 0)
    for heuristic in ("rate", "paper", "zero"):
        plan = lgm_search(problem, heuristic).plan
        assert ref_lgm(costs, arrivals, 4, plan)
    zero_limit = MaintenanceProblem(costs, arrivals, 0)
    plan, cost = optimal_lgm_plan(zero_limit)
    assert plan == naive_plan(zero_limit) and close(cost, brute_force(costs, arrivals, 0)[0])


def test_fig6_shaped_instance_is_fast():
    """n = 2, T = 200, one arrival per table per step, f1 = 0.02k + 1, f2 = 0.3k + 2, C = 12."""
    costs = [lambda k: 0.02 * k + 1.0 if k else 0.0, lambda k: 0.3 * k + 2.0 if k else 0.0]
    arrivals = [(1, 1)] * 201
    problem = MaintenanceProblem(costs, arrivals, 12)
    start = time.perf_counter()
    plan, cost = optimal_lgm_plan(problem)
    assert time.perf_counter() - start < 0.5
    assert ref_valid(costs, arrivals, 12, plan) and ref_lgm(costs, arrivals, 12, plan)
    assert close(ref_cost(costs, plan), cost)
    assert cost <= ref_cost(costs, naive_plan(problem)) + 1e-9
    assert close(cost, lgm_search(problem, "zero").cost)


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("costs", "arrivals", "limit", "message"),
    [
        ([Cost("linear", 1, 0)], [(1,), (-2,)], 3, r"arrivals\[1\]\[0\] = -2 is negative"),
        ([Cost("linear", 1, 0)] * 2, [(1, 1), (1,)], 3, r"arrivals\[1\] has 1 entries, expected 2"),
        ([Cost("linear", 1, 0)], [(1,)], -0.5, r"limit C = -0.5 is negative"),
        ([Cost("linear", 1, 0), lambda k: k + 1], [(1, 1)], 3, r"costs\[1\]\(0\) = 1"),
        ([Cost("linear", 1, 0)], [(1.5,)], 3, r"arrivals\[0\]\[0\] = 1.5 is not an integer"),
        ([Cost("linear", 1, 0)], [], 3, r"arrivals is empty"),
        ([], [()], 3, r"costs is empty"),
        ([Cost("linear", 1, 0)], [(1,)], float("nan"), r"limit C = nan is not a number"),
        (
            [lambda k: 0 if k == 0 else 5 - k],
            [(3,)],
            3,
            r"costs\[0\] is not monotone: f\(2\) = 3 < f\(1\) = 4",
        ),
    ],
)
def test_bad_input_is_named(costs, arrivals, limit, message):
    with pytest.raises(ValueError, match=message):
        MaintenanceProblem(costs, arrivals, limit)


def test_bad_arguments_to_the_planners():
    problem = MaintenanceProblem([Cost("linear", 1, 0)], [(1,), (1,)], 3)
    with pytest.raises(ValueError, match="plan has 1 actions, expected T \\+ 1 = 2"):
        is_valid(problem, ((1,),))
    with pytest.raises(ValueError, match="rate_window = 0"):
        online_plan(problem, 0)
    with pytest.raises(ValueError, match="planned_horizon = -1 is negative"):
        adapted_plan(problem, -1)
    with pytest.raises(ValueError, match="forecast has 1 vectors, expected planned_horizon \\+ 1 = 3"):
        adapted_plan(problem, 2, forecast=[(1,)])
    with pytest.raises(ValueError, match="heuristic = 'best'"):
        lgm_search(problem, "best")
