"""Asymmetric batch view maintenance plans (paper 003): model, checks, NAIVE, MAKELAZYPLAN, MAKELGMPLAN, A*, ADAPT, ONLINE."""

from __future__ import annotations

import heapq
import math
import numbers
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

#: f_i: the cost of processing k queued modifications of base table R_i in one batch.
CostFunction = Callable[[int], float]
#: One entry per base table: a state (delta table sizes), an arrival vector d_t or an action p_t.
Vector = tuple[int, ...]
#: Actions p_0, ..., p_T, one vector per time step.
Plan = tuple[Vector, ...]
Heuristic = Literal["rate", "paper", "zero"]


class MaintenanceProblem:
    """One planning instance (section 2 of the paper): n cost functions, arrivals d_0..d_T, limit C.

    ``costs[i]`` is f_i, assumed monotone and subadditive with f_i(0) = 0; ``arrivals[t][i]`` is how
    many modifications of R_i arrive at step t; ``limit`` is C, the largest refresh cost a post-action
    state may have. The view is refreshed at T = len(arrivals) - 1. f_i(0) = 0 and monotonicity over
    0..(all arrivals of R_i) are checked; the values on that range are cached, so each f_i should be
    a pure function. Subadditivity is assumed, not checked.
    """

    __slots__ = ("arrivals", "costs", "limit", "totals", "_values")

    def __init__(
        self, costs: Sequence[CostFunction], arrivals: Sequence[Sequence[int]], limit: float
    ) -> None:
        costs = tuple(costs)
        if not costs:
            raise ValueError("costs is empty: give one cost function per base table")
        for i, f in enumerate(costs):
            if not callable(f):
                raise ValueError(f"costs[{i}] = {f!r} is not callable")
        n = len(costs)
        rows = [tuple(row) for row in arrivals]
        if not rows:
            raise ValueError("arrivals is empty: give one vector per time step 0..T (at least d_0)")
        for t, row in enumerate(rows):
            if len(row) != n:
                raise ValueError(
                    f"arrivals[{t}] has {len(row)} entries, expected {n} (one per cost function)"
                )
            for i, k in enumerate(row):
                if isinstance(k, bool) or not isinstance(k, numbers.Integral):
                    raise ValueError(f"arrivals[{t}][{i}] = {k!r} is not an integer")
                if k < 0:
                    raise ValueError(f"arrivals[{t}][{i}] = {k} is negative")
        if isinstance(limit, bool) or not isinstance(limit, numbers.Real) or math.isnan(limit):
            raise ValueError(f"limit C = {limit!r} is not a number")
        if limit < 0:
            raise ValueError(f"limit C = {limit} is negative")
        self.costs: tuple[CostFunction, ...] = costs
        self.arrivals: tuple[Vector, ...] = tuple(tuple(int(k) for k in row) for row in rows)
        self.limit: float = limit
        self.totals: Vector = tuple(sum(row[i] for row in self.arrivals) for i in range(n))
        values = []
        for i, f in enumerate(costs):
            column = [f(0)]
            if column[0] != 0:
                raise ValueError(
                    f"costs[{i}](0) = {column[0]!r}; a cost function must give 0 for an empty batch"
                )
            for k in range(1, self.totals[i] + 1):
                column.append(f(k))
                if column[k] < column[k - 1]:
                    raise ValueError(
                        f"costs[{i}] is not monotone: f({k}) = {column[k]!r} < f({k - 1}) = {column[k - 1]!r}"
                    )
            values.append(column)
        self._values = values

    @property
    def n(self) -> int:
        """Number of base tables (delta tables)."""
        return len(self.costs)

    @property
    def horizon(self) -> int:
        """T, the refresh time."""
        return len(self.arrivals) - 1

    def table_cost(self, i: int, k: int) -> float:
        """f_i(k), from the cache when k is within the arrivals of R_i."""
        column = self._values[i]
        return column[k] if 0 <= k < len(column) else self.costs[i](k)

    def state_cost(self, state: Sequence[int]) -> float:
        """The paper's f(v) = sum_i f_i(v[i]): the cost of emptying every delta table of ``state``."""
        return sum(self.table_cost(i, k) for i, k in enumerate(state))

    def is_full(self, state: Sequence[int]) -> bool:
        """A state is full when refreshing from it would cost more than C."""
        return self.state_cost(state) > self.limit

    def __repr__(self) -> str:
        return f"MaintenanceProblem(n={self.n}, T={self.horizon}, C={self.limit!r}, totals={self.totals})"


def _subtract(a: Sequence[int], b: Sequence[int]) -> Vector:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def _add(a: Sequence[int], b: Sequence[int]) -> Vector:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _emptying(state: Sequence[int], tables: Sequence[int] | set[int]) -> Vector:
    """The greedy action that empties exactly ``tables`` in ``state``."""
    return tuple(k if i in tables else 0 for i, k in enumerate(state))


# --- plans and their checks (Definitions 1-3) ---------------------------------------------------


def simulate(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> tuple[Plan, Plan]:
    """Pre-action states s_t and post-action states s_t+ = s_t - p_t of ``plan``, t = 0..T.

    No validity check: an action may remove more than is queued (then a state goes negative).
    """
    if len(plan) != problem.horizon + 1:
        raise ValueError(f"plan has {len(plan)} actions, expected T + 1 = {problem.horizon + 1}")
    before, after = [], []
    post = (0,) * problem.n
    for t, action in enumerate(plan):
        if len(action) != problem.n:
            raise ValueError(f"plan[{t}] has {len(action)} entries, expected {problem.n}")
        pre = _add(post, problem.arrivals[t])
        post = _subtract(pre, action)
        before.append(pre)
        after.append(post)
    return tuple(before), tuple(after)


def is_valid(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> bool:
    """Definition 1: 0 <= p_t <= s_t, f(s_t - p_t) <= C for t < T, and p_T = s_T."""
    before, after = simulate(problem, plan)
    horizon = problem.horizon
    for t, (pre, post) in enumerate(zip(before, after, strict=True)):
        if any(p < 0 or p > s for p, s in zip(plan[t], pre, strict=True)):
            return False
        if t < horizon and problem.is_full(post):
            return False
    return all(k == 0 for k in after[horizon])


def plan_cost(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> float:
    """f(P) = sum_t f(p_t)."""
    return sum(problem.state_cost(action) for action in plan)


def is_lazy(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> bool:
    """Definition 2: before T, the plan acts only when the pre-action state is full."""
    before, _ = simulate(problem, plan)
    return all(not any(plan[t]) or problem.is_full(before[t]) for t in range(problem.horizon))


def is_lgm(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> bool:
    """Definition 3: lazy, greedy (each action empties a delta table or leaves it alone) and minimal
    (before T, no emptied table could be left alone with the post-action state still not full).

    Only these three properties are checked; combine with :func:`is_valid` for validity.
    """
    if not is_lazy(problem, plan):
        return False
    before, _ = simulate(problem, plan)
    for t, (action, pre) in enumerate(zip(plan, before, strict=True)):
        if any(p not in (0, s) for p, s in zip(action, pre, strict=True)):
            return False
        if t < problem.horizon:
            for i, p in enumerate(action):  # minimal: leaving table i alone must break the limit
                if p and not problem.is_full(_subtract(pre, (*action[:i], 0, *action[i + 1 :]))):
                    return False
    return True


# --- greedy minimal actions (shared by the A* graph, ADAPT and ONLINE) -------------------------


def _minimal_table_sets(values: Sequence[float], limit: float) -> list[tuple[int, ...]]:
    """Sets of tables whose emptying leaves a refresh cost <= limit while no smaller set does.

    ``values[i]`` is f_i(s[i]). By monotonicity it is enough that leaving any single member alone
    breaks the limit (then so does leaving alone any larger part of the set). Sorted by size, then
    by table number. The residual is summed table by table, as :meth:`state_cost` does.
    """
    candidates = [i for i, v in enumerate(values) if v > 0]
    residual = []  # residual[mask]: refresh cost left after emptying the candidates in mask
    for mask in range(1 << len(candidates)):
        kept = list(values)
        for j, i in enumerate(candidates):
            if mask >> j & 1:
                kept[i] = 0
        residual.append(sum(kept))
    found = []
    for mask, cost in enumerate(residual):
        members = [j for j in range(len(candidates)) if mask >> j & 1]
        if cost <= limit and all(residual[mask ^ (1 << j)] > limit for j in members):
            found.append(tuple(candidates[j] for j in members))
    found.sort(key=lambda tables: (len(tables), tables))
    return found


def greedy_minimal_actions(costs: Sequence[CostFunction], limit: float, state: Sequence[int]) -> list[Vector]:
    """Every greedy, minimal, valid action for ``state`` (the out-edges of an A* node, section 4.1).

    For a state that is not full this is the single zero action.
    """
    values = [f(k) for f, k in zip(costs, state, strict=True)]
    return [_emptying(state, set(tables)) for tables in _minimal_table_sets(values, limit)]


def minimize_action(
    costs: Sequence[CostFunction], limit: float, action: Sequence[int], state: Sequence[int]
) -> Vector:
    """MINIMIZEACTION of section 3.2: a greedy minimal action emptying some of the tables ``action``
    touches, with the post-action state still not full.

    Each touched table is emptied; then tables are left alone one at a time, the one with the
    largest f_i(s[i]) first (ties: lower table number), whenever the limit still holds. One pass
    suffices: a table kept in the pass stays needed, since leaving more alone only adds cost.
    """
    values = [f(k) for f, k in zip(costs, state, strict=True)]
    emptied = {i for i, (p, s) in enumerate(zip(action, state, strict=True)) if p > 0 and s > 0}
    if sum(v for i, v in enumerate(values) if i not in emptied) > limit:
        raise ValueError(
            f"action {tuple(action)} leaves state {tuple(state)} full even when emptying its tables"
        )
    for i in sorted(emptied, key=lambda i: (-values[i], i)):
        if sum(v for j, v in enumerate(values) if j not in emptied or j == i) <= limit:
            emptied.discard(i)
    return _emptying(state, emptied)


def _require_valid(problem: MaintenanceProblem, plan: Sequence[Sequence[int]], name: str) -> None:
    if not is_valid(problem, plan):
        raise ValueError(f"{name} transforms valid plans only; this plan breaks Definition 1")


def make_lazy_plan(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> Plan:
    """MAKELAZYPLAN (proof of Lemma 1): a valid lazy plan no costlier than the valid ``plan``.

    Actions of ``plan`` are accumulated and applied together at the next time the new plan's own
    pre-action state is full (and at T).
    """
    _require_valid(problem, plan, "make_lazy_plan")
    zero = (0,) * problem.n
    pending, post, lazy = zero, zero, []
    for t, action in enumerate(plan):
        pending = _add(pending, action)
        pre = _add(post, problem.arrivals[t])
        if t == problem.horizon or problem.is_full(pre):
            lazy.append(pending)
            pending = zero
        else:
            lazy.append(zero)
        post = _subtract(pre, lazy[-1])
    return tuple(lazy)


def make_lgm_plan(problem: MaintenanceProblem, plan: Sequence[Sequence[int]]) -> Plan:
    """MAKELGMPLAN (section 3.2, Lemma 2): a valid LGM plan built from the valid ``plan``.

    When the new plan's pre-action state is full, it empties every table that holds more than
    ``plan`` leaves after its own action at that time, then MINIMIZEACTION trims that set.
    """
    _require_valid(problem, plan, "make_lgm_plan")
    _, reference_after = simulate(problem, plan)
    zero = (0,) * problem.n
    post, lgm = zero, []
    for t in range(problem.horizon + 1):
        pre = _add(post, problem.arrivals[t])
        if t == problem.horizon:
            action = pre
        elif problem.is_full(pre):
            wide = tuple(s if s > r else 0 for s, r in zip(pre, reference_after[t], strict=True))
            action = minimize_action(problem.costs, problem.limit, wide, pre)
        else:
            action = zero
        lgm.append(action)
        post = _subtract(pre, action)
    return tuple(lgm)


def naive_plan(problem: MaintenanceProblem) -> Plan:
    """NAIVE, the symmetric baseline: empty every delta table whenever the state is full, and at T."""
    post, plan = (0,) * problem.n, []
    for t in range(problem.horizon + 1):
        pre = _add(post, problem.arrivals[t])
        action = pre if t == problem.horizon or problem.is_full(pre) else (0,) * problem.n
        plan.append(action)
        post = _subtract(pre, action)
    return tuple(plan)


# --- A* over the graph of LGM plans (section 4.1) ----------------------------------------------


def batch_bounds(problem: MaintenanceProblem) -> Vector:
    """b_i = m_i + max{b | f_i(b) <= C} (section 4.1): no action of a valid plan processes more
    than b_i modifications of R_i. m_i is the largest single-step arrival of R_i.

    The max is searched up to the total arrivals of R_i only (no batch is ever larger; the A*
    heuristics do not change). If even f_i(1) > C the max is 0 and b_i = m_i. b_i = 0 only when R_i
    never receives a modification.
    """
    bounds = []
    for i in range(problem.n):
        largest = max(row[i] for row in problem.arrivals)
        low, high = 0, problem.totals[i]  # f_i(low) <= C holds; find the last such b by bisection
        while low < high:
            middle = (low + high + 1) // 2
            if problem.table_cost(i, middle) <= problem.limit:
                low = middle
            else:
                high = middle - 1
        bounds.append(largest + low)
    return tuple(bounds)


@dataclass(frozen=True)
class LgmSearchResult:
    """Outcome of :func:`lgm_search`: the best LGM plan, its cost, and how much of the graph was seen."""

    plan: Plan
    cost: float
    expanded: int
    generated: int


def _heuristic(problem: MaintenanceProblem, heuristic: Heuristic) -> Callable[[Sequence[int]], float]:
    """h as a function of r, where r[i] = s[i] + K_i modifications of R_i are still to process."""
    bounds = batch_bounds(problem)
    if heuristic == "zero":
        return lambda remaining: 0.0
    if heuristic == "paper":
        # The heuristic h(x) printed in section 4.1 (Lemma 7): floor((s[i] + K_i) / b_i) * f_i(b_i).
        full = [problem.table_cost(i, b) for i, b in enumerate(bounds)]
        return lambda remaining: sum(
            (r // b) * value if b else 0.0 for r, b, value in zip(remaining, bounds, full, strict=True)
        )
    if heuristic == "rate":
        # Every action processes at most b_i modifications of R_i (see batch_bounds), each costing
        # f_i(k) >= k * rho_i with rho_i = min over 1 <= k <= b_i of f_i(k) / k. So r * rho_i bounds
        # the remaining cost from below, and h(x) - h(x') = sum_i q[i] * rho_i <= f(q): consistent.
        # For concave f_i, rho_i = f_i(b_i) / b_i and this is at least the printed heuristic.
        rates = []
        for i, b in enumerate(bounds):
            top = min(b, problem.totals[i])
            rates.append(min((problem.table_cost(i, k) / k for k in range(1, top + 1)), default=0.0))
        return lambda remaining: sum(map(operator.mul, rates, remaining))
    raise ValueError(f"heuristic = {heuristic!r}; expected 'rate', 'paper' or 'zero'")


def lgm_search(problem: MaintenanceProblem, heuristic: Heuristic = "rate") -> LgmSearchResult:
    """A* SEARCH of section 4.1 for an optimal LGM plan (Theorem 3), with backward pointers.

    Nodes are (time, post-action state); the source is (-1, 0) and the destination (T, 0). From a
    node (t1, s), the next node is at the first t2 > t1 whose pre-action state is full, one edge per
    greedy minimal valid action there; if no state is full before T, a single edge goes to the
    destination and empties everything at T. Edge weight: f(action).

    ``heuristic``: "rate" (default) is sum_i (s[i] + K_i) * rho_i, consistent for any monotone
    costs; "paper" is the printed floor((s[i] + K_i) / b_i) * f_i(b_i), which can overestimate
    for non-concave costs and is not consistent even for linear ones (a small greedy action can
    drop the floor by one); "zero" makes it Dijkstra's algorithm. A node reached again more cheaply
    is queued again (re-expanded), so any admissible heuristic gives an optimal plan. Queue ties go
    to the later time, then the smaller state.
    """
    horizon, n, limit = problem.horizon, problem.n, problem.limit
    estimate_remaining = _heuristic(problem, heuristic)
    prefix = [(0,) * n]  # prefix[t + 1] = d_0 + ... + d_t
    for row in problem.arrivals:
        prefix.append(_add(prefix[-1], row))
    remaining = [_subtract(problem.totals, arrived) for arrived in prefix]  # K_i after t: remaining[t + 1]
    columns = problem._values  # every state met here is within the arrivals, so f_i(k) = columns[i][k]

    def cost_of(vector: Vector) -> float:
        return sum(map(list.__getitem__, columns, vector))  # table by table, like state_cost

    def estimate(t: int, state: Vector) -> float:
        return estimate_remaining(tuple(map(operator.add, state, remaining[t + 1])))

    zero = (0,) * n
    source, destination = (-1, zero), (horizon, zero)
    best = {source: 0.0}
    back: dict[tuple[int, Vector], tuple[tuple[int, Vector], Vector]] = {}
    queue = [(estimate(-1, zero), 1, zero, 0.0)]
    expanded = generated = 0
    while queue:
        _, negative_time, state, g = heapq.heappop(queue)
        node = (-negative_time, state)
        if g > best[node]:
            continue  # a cheaper path to this node was queued later
        if node == destination:  # Theorem 3: each edge on the path acts at its target node's time
            plan = [zero] * (horizon + 1)
            while node in back:
                parent, action = back[node]
                plan[node[0]] = action
                node = parent
            return LgmSearchResult(tuple(plan), g, expanded, generated)
        expanded += 1
        t1 = node[0]
        offset = _subtract(state, prefix[t1 + 1])  # the pre-action state at t is offset + prefix[t + 1]
        # First forced time in (t1, T): states only grow between actions and f is monotone, so bisect.
        low, high = t1 + 1, horizon
        while low < high:
            middle = (low + high) // 2
            if cost_of(tuple(map(operator.add, offset, prefix[middle + 1]))) > limit:
                high = middle
            else:
                low = middle + 1
        pre = tuple(map(operator.add, offset, prefix[low + 1]))
        if low == horizon:
            edges = [(destination, pre)]
        else:
            values = list(map(list.__getitem__, columns, pre))
            edges = []
            for tables in _minimal_table_sets(values, limit):
                action = _emptying(pre, set(tables))
                edges.append(((low, _subtract(pre, action)), action))
        for target, action in edges:
            generated += 1
            cost = g + cost_of(action)
            if cost < best.get(target, math.inf):
                best[target] = cost
                back[target] = (node, action)
                heapq.heappush(queue, (cost + estimate(*target), -target[0], target[1], cost))
    raise AssertionError("the destination is always reachable (emptying everything is always valid)")


def optimal_lgm_plan(problem: MaintenanceProblem, heuristic: Heuristic = "rate") -> tuple[Plan, float]:
    """OPT^LGM: an optimal LGM plan and its cost, found by :func:`lgm_search`."""
    result = lgm_search(problem, heuristic)
    return result.plan, result.cost


# --- ADAPT: an optimal LGM plan for a guessed refresh time (section 4.2) ------------------------


def _cheapest_minimal_action(problem: MaintenanceProblem, state: Vector) -> Vector:
    """The greedy minimal valid action of least cost (ties: fewer tables, then lower numbers)."""
    values = [problem.table_cost(i, k) for i, k in enumerate(state)]
    actions = [_emptying(state, set(tables)) for tables in _minimal_table_sets(values, problem.limit)]
    return min(actions, key=problem.state_cost)


def adapted_plan(
    problem: MaintenanceProblem,
    planned_horizon: int,
    forecast: Sequence[Sequence[int]] | None = None,
    heuristic: Heuristic = "rate",
) -> Plan:
    """ADAPT (section 4.2): run an optimal LGM plan made for refresh time T0 = ``planned_horizon``
    on ``problem``, whose real refresh time T may differ.

    The plan is computed from ``forecast`` (T0 + 1 arrival vectors), by default from the problem's
    own arrivals read cyclically: forecast[t] = d_(t mod (T + 1)), i.e. the first T0 + 1 vectors
    when T >= T0. Then, at real time t < T, the planned step is k = t mod (T0 + 1):

    - k = T0: empty every delta table (the planned refresh). So for T > T0 the plan is repeated
      with period T0 + 1 steps (the paper's "period T0" counts the steps 0..T0 as one cycle), which
      replays it exactly when the arrivals repeat with that period;
    - otherwise empty the tables the plan empties at k. If that would leave a full state (the
      arrivals differ from the forecast), or the plan takes no action at k but the state is full,
      take the cheapest greedy minimal valid action instead.

    At T every delta table is emptied (when T < T0 the plan is cut short there). The result is
    always valid for ``problem``; it need not be LGM.
    """
    if isinstance(planned_horizon, bool) or not isinstance(planned_horizon, numbers.Integral):
        raise ValueError(f"planned_horizon = {planned_horizon!r} is not an integer")
    if planned_horizon < 0:
        raise ValueError(f"planned_horizon = {planned_horizon} is negative")
    horizon = problem.horizon
    if forecast is None:
        forecast = [problem.arrivals[t % (horizon + 1)] for t in range(planned_horizon + 1)]
    elif len(forecast) != planned_horizon + 1:
        raise ValueError(
            f"forecast has {len(forecast)} vectors, expected planned_horizon + 1 = {planned_horizon + 1}"
        )
    planned, _ = optimal_lgm_plan(MaintenanceProblem(problem.costs, forecast, problem.limit), heuristic)
    emptied = [{i for i, p in enumerate(action) if p > 0} for action in planned]
    zero = (0,) * problem.n
    post, plan = zero, []
    for t in range(horizon + 1):
        pre = _add(post, problem.arrivals[t])
        step = t % (planned_horizon + 1)
        if t == horizon or step == planned_horizon:
            action = pre
        else:
            action = _emptying(pre, emptied[step])
            if problem.is_full(_subtract(pre, action)):
                action = _cheapest_minimal_action(problem, pre)
        plan.append(action)
        post = _subtract(pre, action)
    return tuple(plan)


# --- ONLINE: a greedy amortized-cost rule needing no forecast (section 4.3) ---------------------


def time_to_full(
    costs: Sequence[CostFunction],
    limit: float,
    state: Sequence[int],
    rates: Sequence[float],
    cap: int = 1 << 20,
) -> float:
    """TIMETOFULL of section 4.3: the fewest steps k >= 1 after which ``state`` plus k steps of
    arrivals at ``rates`` per step (floor of the expected count per table) is full.

    ``math.inf`` when every rate is zero, or when the state is still not full after ``cap`` steps.
    """
    if all(r <= 0 for r in rates):
        return math.inf

    def full(k: int) -> bool:
        predicted = [math.floor(s + k * r + 1e-9) for s, r in zip(state, rates, strict=True)]
        return sum(f(x) for f, x in zip(costs, predicted, strict=True)) > limit

    low, high = 0, 1  # not full after `low` steps (or low = 0); look for a full `high`
    while not full(high):
        if high >= cap:
            return math.inf
        low, high = high, min(2 * high, cap)
    while high - low > 1:
        middle = (low + high) // 2
        if full(middle):
            high = middle
        else:
            low = middle
    return float(high)


def online_action(
    costs: Sequence[CostFunction],
    limit: float,
    state: Sequence[int],
    spent: float,
    elapsed: int,
    rates: Sequence[float],
) -> Vector:
    """One ONLINE decision (section 4.3), usable by a live scheduler.

    ``state``: current delta table sizes (after this step's arrivals); ``spent``: F_t, maintenance
    cost paid since the last refresh; ``elapsed``: t, steps since the last refresh (time 0);
    ``rates``: recent arrivals per step and table. A state that is not full gets the zero action.
    Otherwise, among the greedy minimal valid actions q, the one minimizing the amortized cost
    H(q) = (F_t + f(q)) / (t + TIMETOFULL(s - q)); an infinite time to full counts as H = 0, so when
    no table receives arrivals the cheapest action wins. Ties: smaller f(q), then enumeration order
    (fewer tables, lower numbers).
    """
    if not len(costs) == len(state) == len(rates):
        raise ValueError(f"costs, state and rates differ in length: {len(costs)}, {len(state)}, {len(rates)}")
    if elapsed < 0:
        raise ValueError(f"elapsed = {elapsed} is negative")
    values = [f(k) for f, k in zip(costs, state, strict=True)]
    best_key, best = None, tuple(0 for _ in state)
    for order, tables in enumerate(_minimal_table_sets(values, limit)):
        action = _emptying(state, set(tables))
        if not any(action):
            return action  # the state is not full
        cost = sum(v for i, v in enumerate(values) if i in tables)
        steps = time_to_full(costs, limit, _subtract(state, action), rates)
        amortized = 0.0 if math.isinf(steps) else (spent + cost) / (elapsed + steps)
        key = (amortized, cost, order)
        if best_key is None or key < best_key:
            best_key, best = key, action
    return best


def online_plan(problem: MaintenanceProblem, rate_window: int = 10) -> Plan:
    """ONLINE (section 4.3) run over ``problem``: at each full state before T, :func:`online_action`
    with the mean arrivals of the last ``rate_window`` steps (this one included) as rates; at T
    every delta table is emptied. Time 0 is the last refresh, i.e. the problem's start.
    """
    if isinstance(rate_window, bool) or not isinstance(rate_window, numbers.Integral) or rate_window < 1:
        raise ValueError(f"rate_window = {rate_window!r} must be a positive integer")
    zero = (0,) * problem.n
    post, plan, spent = zero, [], 0.0
    for t in range(problem.horizon + 1):
        pre = _add(post, problem.arrivals[t])
        if t == problem.horizon:
            action = pre
        elif problem.is_full(pre):
            recent = problem.arrivals[max(0, t - rate_window + 1) : t + 1]
            rates = [sum(row[i] for row in recent) / len(recent) for i in range(problem.n)]
            action = online_action(problem.costs, problem.limit, pre, spent, t, rates)
        else:
            action = zero
        spent += problem.state_cost(action)
        plan.append(action)
        post = _subtract(pre, action)
    return tuple(plan)
