"""Planner of distributed array-view maintenance (paper 000, sections 4.1-4.5): plans and their cost.

The model: a batch of updates is a list of triples ``(p, q, v)``: base-array chunks ``p`` and ``q``
must be joined on some worker node and the result merged into view chunk ``v``. Workers are
``0..N-1``; chunks that are new in this batch (the deltas) sit at the :data:`COORDINATOR`, which may
send chunks but never joins nor merges. A plan says where each distinct pair is joined (z), which
chunks are copied to which nodes (x) and where every view and array chunk lives afterwards (y).
Its cost is the first line of Eq. (1): each node ``k`` accumulates network time ``ntwk[k]`` (the
bytes it sends times ``t_ntwk``) and computation ``cpu[k]`` (the bytes it joins or merges times
``t_cpu``); because a node overlaps the two, the plan takes ``max_k max(ntwk[k], cpu[k])``.

Choices where the paper leaves room (all checked against Appendix B):

* The maximum runs over the workers only, as ``max_k`` over ``k = 1..N`` in Algorithms 1 and 2 and
  the opt_now values of Figure 7 (maxima over servers X, Y, Z). What the coordinator sends is kept
  in :attr:`PlanCost.coordinator_ntwk` and reported, but no plan is ranked by it (every delta leaves
  it at least once, so counting it would put the same floor under every plan).
* A join at node ``j`` charges the home node of *each* of ``p`` and ``q`` that is not yet at ``j``
  (Algorithm 1's line 6 only names ``q``, but Figure 7 charges both: ΔA7 from X and A2 from Y when
  the join goes to Z). A chunk joined with itself is sent once; ``B_pq = B_p + B_q`` regardless.
* Moving a view chunk (Algorithm 2) or an array chunk onto a node that already holds a copy
  (Algorithm 3) costs nothing, as in the paper; a delta stored on a node without a copy is one more
  send by the coordinator.
* ``cpu_thr`` of Algorithm 3 (section 4.5) defaults to the average join cost per node over every
  batch of the window, unweighted, expressed in size units so that it can be compared with ``B_a``:
  ``sum over batches l, distinct pairs (p, q) of U_l of (B_p + B_q), divided by N``.

Algorithms 1 and 2 run as printed by default; :class:`GreedyOptions` offers two departures (merges
priced in stage 1, exact ties broken by the cheapest candidate) that the benchmark compares.
"""

from __future__ import annotations

import numbers
import zlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from arrayviews.model.errors import ValidationError

#: Location of the chunks that are new in this batch; it sends but never joins nor merges.
COORDINATOR = -1

Chunk = Hashable
Triple = tuple[Chunk, Chunk, Chunk]
Pair = tuple[Chunk, Chunk]
Chunking = Callable[[Chunk], int] | Mapping[Chunk, int]
Seed = int | np.random.Generator | None


def _check_cost(name: str, value: float) -> float:
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
        raise ValidationError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PlanInputs:
    """One batch to plan: the triples ``U0``, the cluster (``n_nodes`` workers), where every chunk is
    (``location``: S, a worker or :data:`COORDINATOR`; view chunks too, new view chunks at the
    coordinator), chunk sizes (``size``: B, needed for array chunks) and the seconds per size unit
    of sending (``t_ntwk``) and of joining or merging (``t_cpu``). Triples are kept in order, without
    repeats; the mappings may hold many more chunks than the triples use."""

    triples: tuple[Triple, ...]
    n_nodes: int
    location: Mapping[Chunk, int]
    size: Mapping[Chunk, float]
    t_ntwk: float = 1.0
    t_cpu: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.n_nodes, numbers.Integral) or self.n_nodes < 1:
            raise ValidationError(f"the cluster needs at least one worker node, got n_nodes={self.n_nodes!r}")
        object.__setattr__(self, "n_nodes", int(self.n_nodes))
        object.__setattr__(self, "t_ntwk", _check_cost("t_ntwk", self.t_ntwk))
        object.__setattr__(self, "t_cpu", _check_cost("t_cpu", self.t_cpu))
        triples = tuple(dict.fromkeys(_as_triple(t) for t in self.triples))
        object.__setattr__(self, "triples", triples)
        for p, q, v in triples:
            for chunk in (p, q):
                self.size_of(chunk)
                self.home(chunk)
            self.home(v)

    def home(self, chunk: Chunk) -> int:
        """S of ``chunk``: a worker node or :data:`COORDINATOR`."""
        if chunk not in self.location:
            raise ValidationError(f"chunk {chunk!r} has no location")
        node = self.location[chunk]
        if not isinstance(node, numbers.Integral) or not (node == COORDINATOR or 0 <= node < self.n_nodes):
            raise ValidationError(
                f"chunk {chunk!r} is located at {node!r}, which is neither a worker 0..{self.n_nodes - 1} "
                "nor the coordinator"
            )
        return int(node)

    def size_of(self, chunk: Chunk) -> float:
        """B of ``chunk``."""
        if chunk not in self.size:
            raise ValidationError(f"chunk {chunk!r} has no size")
        value = self.size[chunk]
        if not isinstance(value, numbers.Real) or not np.isfinite(value) or value < 0:
            raise ValidationError(f"chunk {chunk!r} has size {value!r}; sizes are finite and >= 0")
        return float(value)

    def is_new(self, chunk: Chunk) -> bool:
        """A delta (array) or a new view chunk: it sits at the coordinator."""
        return self.home(chunk) == COORDINATOR

    @cached_property
    def pairs(self) -> tuple[Pair, ...]:
        """The distinct ``(p, q)`` of the triples, in order of first appearance."""
        return tuple(dict.fromkeys((p, q) for p, q, _ in self.triples))

    @cached_property
    def view_chunks(self) -> tuple[Chunk, ...]:
        return tuple(dict.fromkeys(v for _, _, v in self.triples))

    @cached_property
    def array_chunks(self) -> tuple[Chunk, ...]:
        return tuple(dict.fromkeys(c for p, q in self.pairs for c in (p, q)))

    def pair_size(self, pair: Pair) -> float:
        """B_pq = B_p + B_q."""
        return self.size_of(pair[0]) + self.size_of(pair[1])


def _as_triple(triple: object) -> Triple:
    if not isinstance(triple, tuple | list) or len(triple) != 3:
        raise ValidationError(f"an update triple is (p, q, v), got {triple!r}")
    return tuple(triple)


@dataclass(frozen=True)
class PlanCost:
    """Per-worker network and cpu seconds (Eq. (1), first line), the coordinator's sending time
    (reported, outside the objective) and the objective ``max_k max(ntwk[k], cpu[k])``."""

    ntwk: np.ndarray
    cpu: np.ndarray
    coordinator_ntwk: float
    objective: float


@dataclass(frozen=True)
class MaintenancePlan:
    """z as ``join_node[(p, q)]``; x as ``replicas[chunk]`` (the nodes a copy is sent to, home
    excluded); y as ``view_node[v]`` and ``array_node[a]`` (where chunks live after the batch; array
    chunks missing from ``array_node`` stay home). A stage-1 plan (:func:`plan_joins`) has no
    ``view_node`` yet and its cost counts no merges."""

    join_node: dict[Pair, int]
    replicas: dict[Chunk, set[int]]
    view_node: dict[Chunk, int]
    array_node: dict[Chunk, int]
    cost: PlanCost = field(repr=False)


def assemble_plan(
    inputs: PlanInputs,
    join_node: Mapping[Pair, int],
    view_node: Mapping[Chunk, int] | None = None,
    array_node: Mapping[Chunk, int] | None = None,
) -> MaintenancePlan:
    """The plan these decisions make, with its replicas and its cost. Copies are what the joins need
    (each chunk of a pair not at home on its join node) plus each array chunk stored away from home;
    merges are charged when ``view_node`` is given (it must then place every view chunk)."""
    join_node = {pair: _worker(inputs, node, pair) for pair, node in join_node.items()}
    for pair in inputs.pairs:
        if pair not in join_node:
            raise ValidationError(f"pair {pair!r} has no join node")
    view_node = {v: _worker(inputs, node, v) for v, node in (view_node or {}).items()}
    if view_node:
        for v in inputs.view_chunks:
            if v not in view_node:
                raise ValidationError(f"view chunk {v!r} has no node")
    array_node = {a: _worker(inputs, node, a) for a, node in (array_node or {}).items()}
    n = inputs.n_nodes
    ntwk, cpu, coordinator = np.zeros(n), np.zeros(n), 0.0
    replicas: dict[Chunk, set[int]] = {}
    copies = [(c, node) for (p, q), node in join_node.items() for c in dict.fromkeys((p, q))]
    for chunk, node in [*copies, *array_node.items()]:
        home = inputs.home(chunk)
        if node == home or node in replicas.get(chunk, ()):
            continue
        replicas.setdefault(chunk, set()).add(node)
        seconds = inputs.size_of(chunk) * inputs.t_ntwk
        if home == COORDINATOR:
            coordinator += seconds
        else:
            ntwk[home] += seconds
    for pair, node in join_node.items():
        cpu[node] += inputs.pair_size(pair) * inputs.t_cpu
    if view_node:
        for p, q, v in inputs.triples:
            joined, merged = join_node[(p, q)], view_node[v]
            if joined != merged:
                ntwk[joined] += inputs.pair_size((p, q)) * inputs.t_ntwk
            cpu[merged] += inputs.pair_size((p, q)) * inputs.t_cpu
    objective = float(np.maximum(ntwk, cpu).max())
    cost = PlanCost(ntwk=ntwk, cpu=cpu, coordinator_ntwk=coordinator, objective=objective)
    return MaintenancePlan(join_node, replicas, view_node, array_node, cost)


def _worker(inputs: PlanInputs, node: object, what: object) -> int:
    if not isinstance(node, numbers.Integral) or not 0 <= node < inputs.n_nodes:
        raise ValidationError(
            f"{what!r} is placed on {node!r}, which is not a worker 0..{inputs.n_nodes - 1}"
        )
    return int(node)


def _max_excluding(load: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Row ``i``: the largest ``load[k]`` over nodes ``k`` not in ``excluded[i]`` (-inf if none).
    Only the ``m + 1`` largest loads can be the answer for ``m`` exclusions, so this is O(N m)."""
    n, m = len(load), excluded.shape[1]
    keep = min(n, m + 1)
    top = np.argpartition(load, n - keep)[n - keep :]
    allowed = ~(top[None, :, None] == excluded[:, None, :]).any(axis=2)
    return np.where(allowed, load[top][None, :], -np.inf).max(axis=1)


@dataclass(frozen=True)
class GreedyOptions:
    """Departures from Algorithms 1 and 2 as printed; all off in :data:`PAPER`.

    ``with_merges``: Algorithm 1 also charges each candidate the merge term of Eq. (1)'s first line,
    every view chunk held where it is stored (section 4.2 fixes y = S for this stage; view chunks at
    the coordinator are left out): the join node sends B_pq T_ntwk per triple whose view chunk is
    elsewhere and the view chunk's node merges. As printed, merges wait for Algorithm 2.

    ``cheapest_on_ties``: among candidates of exactly equal opt_now, both stages take the one adding
    the fewest seconds in all (copies, coordinator's included, and merge sends), then the lowest
    node. Ties are common: a candidate that keeps every load under the current maximum scores that
    maximum, so as printed (lowest node first) each pair goes to node 0 until it reaches the max."""

    with_merges: bool = False
    cheapest_on_ties: bool = False


PAPER = GreedyOptions()
REFINED = GreedyOptions(with_merges=True, cheapest_on_ties=True)


class JoinPlanState:
    """The running state of Algorithm 1 (section 4.3): per-worker loads so far, the copies made
    (T of the algorithm, less the homes) and the join node of each pair placed."""

    def __init__(self, inputs: PlanInputs, options: GreedyOptions = PAPER) -> None:
        self.inputs = inputs
        self.options = options
        self.ntwk = np.zeros(inputs.n_nodes)
        self.cpu = np.zeros(inputs.n_nodes)
        self.coordinator_ntwk = 0.0
        self.replicas: dict[Chunk, set[int]] = {}
        self.join_node: dict[Pair, int] = {}
        #: per pair, how many of its triples merge on each worker (only with ``with_merges``)
        self.merges_at: dict[Pair, np.ndarray] = {}
        if options.with_merges:
            for p, q, v in inputs.triples:
                counts = self.merges_at.setdefault((p, q), np.zeros(inputs.n_nodes))
                if not inputs.is_new(v):
                    counts[inputs.home(v)] += 1

    def _merge_loads(self, pair: Pair) -> tuple[np.ndarray, np.ndarray]:
        """Merge cpu per worker (whatever the join node) and the merge sends if joined at each worker."""
        counts = self.merges_at.get(pair)
        if counts is None:
            return np.zeros(self.inputs.n_nodes), np.zeros(self.inputs.n_nodes)
        size = self.inputs.pair_size(pair)
        return counts * size * self.inputs.t_cpu, (counts.sum() - counts) * size * self.inputs.t_ntwk

    def holds(self, chunk: Chunk) -> np.ndarray:
        """Per worker: whether ``chunk`` is there (home or a copy made earlier)."""
        present = np.zeros(self.inputs.n_nodes, dtype=bool)
        home = self.inputs.home(chunk)
        if home != COORDINATOR:
            present[home] = True
        present[list(self.replicas.get(chunk, ()))] = True
        return present

    def _copy_sends(self, p: Chunk, q: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate ``j``: the seconds of sending p, and q, to ``j`` (0 where already there)."""
        inputs = self.inputs
        send_p = np.where(self.holds(p), 0.0, inputs.size_of(p) * inputs.t_ntwk)
        if q == p:
            return send_p, np.zeros(inputs.n_nodes)
        return send_p, np.where(self.holds(q), 0.0, inputs.size_of(q) * inputs.t_ntwk)

    def candidate_objectives(self, p: Chunk, q: Chunk) -> np.ndarray:
        """opt_now of Algorithm 1, lines 4-10, for every worker ``j``: the objective if (p, q) were
        joined at ``j``. Only ``j`` and the homes of p and q change, so this is O(N)."""
        inputs, n = self.inputs, self.inputs.n_nodes
        nodes = np.arange(n)
        home_p, home_q = inputs.home(p), inputs.home(q)
        send_p, send_q = self._copy_sends(p, q)
        merge_cpu, merge_send = self._merge_loads((p, q))
        cpu = self.cpu + merge_cpu
        touched = np.stack([nodes, np.full(n, home_p), np.full(n, home_q)], axis=1)
        valid = touched != COORDINATOR
        at = np.where(valid, touched, 0)
        is_j = touched == nodes[:, None]
        new_ntwk = (
            self.ntwk[at] + send_p[:, None] * (touched == home_p) + send_q[:, None] * (touched == home_q)
        )
        new_ntwk += merge_send[:, None] * is_j
        new_cpu = cpu[at] + inputs.pair_size((p, q)) * inputs.t_cpu * is_j
        touched_max = np.where(valid, np.maximum(new_ntwk, new_cpu), -np.inf).max(axis=1)
        rest = _max_excluding(np.maximum(self.ntwk, cpu), touched)
        return np.maximum(touched_max, rest)

    def place(self, p: Chunk, q: Chunk, node: int) -> None:
        """Join (p, q) at ``node``: copy what is missing there, charge its home, add the join cpu
        (lines 11-13)."""
        inputs = self.inputs
        for chunk in dict.fromkeys((p, q)):
            if self.holds(chunk)[node]:
                continue
            self.replicas.setdefault(chunk, set()).add(node)
            seconds = inputs.size_of(chunk) * inputs.t_ntwk
            home = inputs.home(chunk)
            if home == COORDINATOR:
                self.coordinator_ntwk += seconds
            else:
                self.ntwk[home] += seconds
        self.cpu[node] += inputs.pair_size((p, q)) * inputs.t_cpu
        merge_cpu, merge_send = self._merge_loads((p, q))
        self.cpu += merge_cpu
        self.ntwk[node] += merge_send[node]
        self.join_node[(p, q)] = node

    def place_best(self, p: Chunk, q: Chunk) -> int:
        """Place (p, q) on the worker of least opt_now, the lowest-numbered on ties (line 9)."""
        objectives = self.candidate_objectives(p, q)
        added = sum(self._copy_sends(p, q)) + self._merge_loads((p, q))[1]
        node = _least(objectives, added if self.options.cheapest_on_ties else None)
        self.place(p, q, node)
        return node


def _least(objectives: np.ndarray, added: np.ndarray | None) -> int:
    """The first candidate of least objective, or of least ``added`` among those tied exactly."""
    if added is None:
        return int(np.argmin(objectives))
    return int(np.argmin(np.where(objectives == objectives.min(), added, np.inf)))


def plan_joins(inputs: PlanInputs, seed: Seed = None, options: GreedyOptions = PAPER) -> MaintenancePlan:
    """Algorithm 1: visit the distinct pairs in a random order (numpy Generator from ``seed``) and
    join each where the objective grows least. A stage-1 plan: no view or array placement yet, no
    merges costed."""
    rng = np.random.default_rng(seed)
    state = JoinPlanState(inputs, options)
    for index in rng.permutation(len(inputs.pairs)):
        state.place_best(*inputs.pairs[index])
    return assemble_plan(inputs, state.join_node)


class MergePlanState:
    """The running state of Algorithm 2 (section 4.4): per-worker loads (by default those of the join
    plan, merges excluded) and, per view chunk, the result size each worker produces for it."""

    def __init__(
        self,
        inputs: PlanInputs,
        join_node: Mapping[Pair, int],
        ntwk: np.ndarray | None = None,
        cpu: np.ndarray | None = None,
        options: GreedyOptions = PAPER,
    ) -> None:
        self.inputs = inputs
        self.options = options
        if ntwk is None or cpu is None:
            joins = assemble_plan(inputs, join_node).cost
            ntwk, cpu = joins.ntwk, joins.cpu
        self.ntwk = np.array(ntwk, dtype=float)
        self.cpu = np.array(cpu, dtype=float)
        self.view_node: dict[Chunk, int] = {}
        self.result_size: dict[Chunk, np.ndarray] = {}
        for p, q, v in inputs.triples:
            sizes = self.result_size.setdefault(v, np.zeros(inputs.n_nodes))
            sizes[join_node[(p, q)]] += inputs.pair_size((p, q))

    def candidate_objectives(self, v: Chunk) -> np.ndarray:
        """opt_now of Algorithm 2, lines 4-13, for every worker ``j'``: each join node ``j != j'``
        sends its results for ``v`` (B_pq T_ntwk each) and ``j'`` merges them all (B_pq T_cpu)."""
        sizes = self.result_size[v]
        send = sizes * self.inputs.t_ntwk
        merge = sizes.sum() * self.inputs.t_cpu
        all_sending = np.maximum(self.ntwk + send, self.cpu)
        at_candidate = np.maximum(self.ntwk, self.cpu + merge)
        rest = _max_excluding(all_sending, np.arange(len(sizes))[:, None])
        return np.maximum(at_candidate, rest)

    def place(self, v: Chunk, node: int) -> None:
        """Merge every result for ``v`` at ``node`` (lines 14-15)."""
        send = self.result_size[v] * self.inputs.t_ntwk
        send[node] = 0.0
        self.ntwk += send
        self.cpu[node] += self.result_size[v].sum() * self.inputs.t_cpu
        self.view_node[v] = node

    def place_best(self, v: Chunk) -> int:
        """Place ``v`` on the worker of least opt_now, the lowest-numbered on ties (line 12)."""
        added = -self.result_size[v] if self.options.cheapest_on_ties else None
        node = _least(self.candidate_objectives(v), added)
        self.place(v, node)
        return node


def reassign_view_chunks(
    inputs: PlanInputs, plan: MaintenancePlan, seed: Seed = None, options: GreedyOptions = PAPER
) -> dict[Chunk, int]:
    """Algorithm 2: place each view chunk of the triples, in a random order, on the worker where
    merging its results raises the objective least, given ``plan``'s joins. Returns y for them."""
    rng = np.random.default_rng(seed)
    state = MergePlanState(inputs, plan.join_node, options=options)
    views = inputs.view_chunks
    for index in rng.permutation(len(views)):
        state.place_best(views[index])
    return state.view_node


def decay_weights(n: int, rate: float) -> np.ndarray:
    """W_l = exp(-rate * l) for l = 0..n-1, the current batch first (section 4.2)."""
    if n < 0:
        raise ValidationError(f"a window holds n >= 0 batches, got {n}")
    return np.exp(-_check_cost("decay rate", rate) * np.arange(n))


def _history(
    history: Sequence[Iterable[Triple]], weights: Sequence[float]
) -> list[tuple[list[Triple], float]]:
    batches = [list(dict.fromkeys(_as_triple(t) for t in batch)) for batch in history]
    weights = [float(w) for w in weights]
    if len(batches) != len(weights):
        raise ValidationError(f"{len(batches)} batches in the history but {len(weights)} weights")
    for weight in weights:
        _check_cost("a batch weight", weight)
    return list(zip(batches, weights, strict=True))


def reassign_array_chunks(
    history: Sequence[Iterable[Triple]],
    weights: Sequence[float],
    inputs: PlanInputs,
    plan: MaintenancePlan,
    cpu_threshold: float | Sequence[float] | None = None,
) -> dict[Chunk, int]:
    """Algorithm 3 (section 4.5): y for the array chunks.

    ``history`` is the window U_0 (normally ``inputs.triples``), U_1, ... newest first and
    ``weights`` their W_l. score[a, v] sums W_l * B_a over the triples of every U_l holding ``a``
    (as p, q or both) and merging into ``v``. In descending score (ties by the repr of (a, v)), ``a``
    goes to the node of ``v`` (``plan.view_node``, else its location) if ``plan`` put ``a`` there
    (home or copy) and that node's ``cpu_thr`` still covers B_a, which it then uses up. Other
    existing chunks stay home; other deltas go to the node of their highest-scored ``v``.
    ``cpu_threshold`` (one value or one per worker) overrides the default in the module docstring."""
    window = _history(history, weights)
    n = inputs.n_nodes
    if cpu_threshold is None:
        total = sum(
            inputs.pair_size(pair)
            for batch, _ in window
            for pair in dict.fromkeys((p, q) for p, q, _ in batch)
        )
        threshold = np.full(n, total / n)
    else:
        given = np.asarray(cpu_threshold, dtype=float)
        if given.ndim > 1 or (given.ndim == 1 and len(given) != n):
            raise ValidationError(
                f"cpu_threshold is one value or one per worker ({n}), got {cpu_threshold!r}"
            )
        threshold = np.broadcast_to(given, (n,)).copy()

    def node_of_view(v: Chunk) -> int:
        node = plan.view_node[v] if v in plan.view_node else inputs.home(v)
        if node == COORDINATOR:
            raise ValidationError(f"view chunk {v!r} of the history is at the coordinator and was not placed")
        return node

    score: dict[tuple[Chunk, Chunk], float] = {}
    for batch, weight in window:
        for p, q, v in batch:
            for a in dict.fromkeys((p, q)):
                score[(a, v)] = score.get((a, v), 0.0) + weight * inputs.size_of(a)
    ranked = sorted(score, key=lambda av: (-score[av], repr(av)))
    array_node: dict[Chunk, int] = {}
    best_view: dict[Chunk, Chunk] = {}
    for a, v in ranked:
        best_view.setdefault(a, v)
        if a in array_node:
            continue
        node = node_of_view(v)
        held = node == inputs.home(a) or node in plan.replicas.get(a, ())
        if held and threshold[node] >= inputs.size_of(a):
            threshold[node] -= inputs.size_of(a)
            array_node[a] = node
    for a in best_view:
        if a not in array_node:
            array_node[a] = node_of_view(best_view[a]) if inputs.is_new(a) else inputs.home(a)
    for a in inputs.array_chunks:
        if a not in array_node:
            if inputs.is_new(a):
                raise ValidationError(
                    f"delta chunk {a!r} is in no batch of the history; pass the current batch as U_0"
                )
            array_node[a] = inputs.home(a)
    return array_node


def hash_chunking(n_nodes: int) -> Callable[[Chunk], int]:
    """The default chunking strategy: crc32 of the chunk id's repr, modulo N (stable across runs)."""
    return lambda chunk: zlib.crc32(repr(chunk).encode()) % n_nodes


def _static_node(inputs: PlanInputs, chunking: Chunking | None) -> Callable[[Chunk], int]:
    """Where the fixed strategy keeps a chunk: home if it has one, else where ``chunking`` says."""
    place = hash_chunking(inputs.n_nodes) if chunking is None else chunking
    lookup = place.__getitem__ if isinstance(place, Mapping) else place

    def node(chunk: Chunk) -> int:
        if not inputs.is_new(chunk):
            return inputs.home(chunk)
        try:
            target = lookup(chunk)
        except KeyError:
            raise ValidationError(f"the chunking strategy has no node for chunk {chunk!r}") from None
        return _worker(inputs, target, chunk)

    return node


def baseline_plan(inputs: PlanInputs, chunking: Chunking | None = None) -> MaintenancePlan:
    """Section 4.1, the parallel relational approach: new chunks go where ``chunking`` says (default
    :func:`hash_chunking`); each pair is joined on the node holding its existing chunk (q's, else
    p's; for two deltas, q's chunking node); each view chunk merges where it is stored."""
    node = _static_node(inputs, chunking)
    join_node = {
        (p, q): node(p) if inputs.is_new(q) and not inputs.is_new(p) else node(q) for p, q in inputs.pairs
    }
    view_node = {v: node(v) for v in inputs.view_chunks}
    array_node = {a: node(a) for a in inputs.array_chunks}
    return assemble_plan(inputs, join_node, view_node, array_node)


def differential_plan(
    inputs: PlanInputs, seed: Seed = None, chunking: Chunking | None = None, options: GreedyOptions = PAPER
) -> MaintenancePlan:
    """Algorithm 1 for the joins; views and new chunks stay where the fixed strategy keeps them."""
    joins = plan_joins(inputs, seed, options)
    node = _static_node(inputs, chunking)
    view_node = {v: node(v) for v in inputs.view_chunks}
    array_node = {a: node(a) for a in inputs.array_chunks}
    return assemble_plan(inputs, joins.join_node, view_node, array_node)


def reassign_plan(
    history: Sequence[Iterable[Triple]],
    weights: Sequence[float],
    inputs: PlanInputs,
    seed: Seed = None,
    cpu_threshold: float | Sequence[float] | None = None,
    options: GreedyOptions = PAPER,
) -> MaintenancePlan:
    """The three-stage heuristic of section 4.2: Algorithm 1 (joins), then 2 (view chunks), then 3
    (array chunks over the ``history`` window, U_0 first, with ``weights``)."""
    rng = np.random.default_rng(seed)
    joins = plan_joins(inputs, rng, options)
    view_node = reassign_view_chunks(inputs, joins, rng, options)
    staged = assemble_plan(inputs, joins.join_node, view_node)
    array_node = reassign_array_chunks(history, weights, inputs, staged, cpu_threshold)
    return assemble_plan(inputs, joins.join_node, view_node, array_node)


def locations_after(inputs: PlanInputs, plan: MaintenancePlan) -> dict[Chunk, int]:
    """S for the next batch: every chunk where ``plan`` leaves it (deltas become existing chunks at
    their node, view chunks at y), the rest where they were."""
    location = dict(inputs.location)
    location.update(plan.array_node)
    location.update(plan.view_node)
    return location
