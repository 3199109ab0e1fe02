"""Pattern queries as finite state machines (paper 004, Algorithm 1), run nondeterministically.

A pattern ``[v1, ..., vn]`` gives states ``0..n``: 0 is the begin state, state k means "the last
row was bound to vk", n is the accepting state. A Kleene variable ``vk+`` gives state k a
self-edge. Edge predicates are conjunctions over the current row (``New.attr``) and the
auxiliary attributes of the previous row (``Prev.prev_attr``):

* a WHERE conjunct over one variable vp goes on the edge ``E[p-1][p]``, and also on the self-edge
  ``E[p][p]`` when vp is Kleene (every row bound to vp must satisfy it; Algorithm 1 puts it on the
  self-edge only, but then entering vp would be unconstrained; the paper's Figure 4 and its
  generated Helper view test it on both edges, as done here);
* a conjunct over two consecutive variables v(p-1), vp (``b.loss > a.loss``) goes on ``E[p-1][p]``
  only: it holds between the first row bound to vp and the row before it (the last row bound to
  v(p-1)), kept in the Helper as an auxiliary attribute. On a Kleene self-edge only the
  single-variable conjuncts of that variable apply. (A MATCH_RECOGNIZE ``DEFINE b AS b.loss >
  a.loss`` would test every row of ``b+``; keeping the paper's reading makes whether a partial match
  can go on depend on its state alone, so equal states merge and the state set stays a set.)

Semantics: SQL row pattern recognition (MATCH_RECOGNIZE, as Oracle and Flink define it) per group
over the group's rows in part order, ONE ROW PER MATCH and AFTER MATCH SKIP PAST LAST ROW, with
every ``+`` reluctant (``+?``) except a ``+`` on the last variable, which is greedy. The
translation, ``tests/pattern_reference.py`` (a regular-expression matcher and a brute-force one)
and docs/streams.md agree on it:

* per group the rows of consecutive parts form one sequence; a part without a row for the group
  ends every partial match (and a growing complete one): the next row starts afresh;
* the machine runs on the *set* of active states (every partial match at once, not just one):
  a row advances each active state along every edge it satisfies and may start a new match
  (``E[0][1]``); of several partial matches in one state only the one that began first is kept
  (they have the same future, and the one that began first is the one SQL reports);
* the first time the accepting state n is reached, the match that began first among those ending
  at that row is the match (for these patterns this is exactly the match MATCH_RECOGNIZE chooses:
  the leftmost start, and from it the reluctant quantifiers' shortest way to the end); every other
  partial match is dropped (skip past last row). If vn is Kleene the match then takes every
  following row its self-edge accepts (greedy), and the row after it may start a new match;
* ``count(*)`` and ``sum(x)`` cover the rows of the match so far; the view's part j holds each
  group whose match includes the row of part j as its last row so far (the running values of a
  growing match at each of its parts, its final values at its last part).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from arrayviews.streams.queries import PatternQuery, PatternVariable

#: The alias of the current tuple and of the group's previous Helper row in edge predicates.
NEW = "New"
PREVIOUS = "Prev"


@dataclass(frozen=True)
class Edge:
    """``E[source][target]``: the conjunction of ``predicates`` (true when there are none)."""

    source: int
    target: int
    predicates: tuple[exp.Expression, ...]

    def condition(self) -> exp.Expression:
        if not self.predicates:
            return exp.true()
        return exp.and_(*(predicate.copy() for predicate in self.predicates), copy=False)

    def text(self) -> str:
        return self.condition().sql(dialect="spark")


@dataclass(frozen=True)
class StateMachine:
    """``F = (S[], E[][])`` of a pattern query, with its auxiliary attributes.

    ``variables[k-1]`` is state k's variable; ``auxiliary`` maps each stream attribute whose value
    in the previous tuple a two-variable predicate reads to the Helper column that keeps it.
    ``attributes`` lists the stream attributes the edges read from the current tuple.
    """

    variables: tuple[PatternVariable, ...]
    edges: tuple[Edge, ...]
    auxiliary: tuple[tuple[str, str], ...]
    attributes: tuple[str, ...]

    @property
    def accepting(self) -> int:
        return len(self.variables)

    def states(self) -> range:
        return range(self.accepting + 1)

    def is_kleene(self, state: int) -> bool:
        return state > 0 and self.variables[state - 1].kleene

    def edge(self, source: int, target: int) -> Edge | None:
        for edge in self.edges:
            if (edge.source, edge.target) == (source, target):
                return edge
        return None

    def describe(self) -> str:
        """A readable listing: the states, every edge with its predicate, the auxiliary attributes
        and how the machine is run."""
        names = ["0 (begin)"]
        for k, variable in enumerate(self.variables, start=1):
            label = f"{k} {variable.name}{'+' if variable.kleene else ''}"
            names.append(label + (" (accepting)" if k == self.accepting else ""))
        lines = ["states: " + ", ".join(names)]
        lines += [f"E[{e.source}][{e.target}]: {e.text()}" for e in self.edges]
        if self.auxiliary:
            kept = ", ".join(
                f"{PREVIOUS}.{column} = {attribute} of the previous tuple"
                for attribute, column in self.auxiliary
            )
            lines.append(f"auxiliary: {kept}")
        else:
            lines.append("auxiliary: none")
        n = self.accepting
        run = (
            f"run: the set of active states per group; a match is the first to reach state {n} "
            "(of those, the one that began first), then AFTER MATCH SKIP PAST LAST ROW"
        )
        if self.is_kleene(n):
            run += f"; the match then stays in state {n} while E[{n}][{n}] holds (greedy)"
        lines.append(run)
        return "\n".join(lines)


def build_state_machine(
    query: PatternQuery, auxiliary_column: Callable[[str], str] | None = None
) -> StateMachine:
    """Algorithm 1: the state machine of ``query``. ``auxiliary_column(attribute)`` names the Helper
    column keeping the previous tuple's value of ``attribute`` (default ``prev_<attribute>``)."""
    name_of = auxiliary_column or (lambda attribute: f"prev_{attribute}")
    variables = query.variables
    index = {variable.name.lower(): k for k, variable in enumerate(variables, start=1)}
    forward: dict[int, list[exp.Expression]] = {k: [] for k in range(len(variables))}
    loops: dict[int, list[exp.Expression]] = {k: [] for k in index.values() if variables[k - 1].kleene}
    auxiliary: dict[str, str] = {}
    attributes: dict[str, None] = {}
    for conjunct in query.conjuncts:
        states = [index[name.lower()] for name in conjunct.variables]
        current = max(states)
        replacements: dict[str, tuple[str, Callable[[str], str]]] = {
            variables[current - 1].name.lower(): (NEW, lambda attribute: attribute)
        }
        if len(states) == 2:

            def keep(attribute: str) -> str:
                if attribute not in auxiliary:
                    auxiliary[attribute] = name_of(attribute)
                return auxiliary[attribute]

            replacements[variables[current - 2].name.lower()] = (PREVIOUS, keep)
        predicate = _requalify(conjunct.expression, replacements)
        for column in predicate.find_all(exp.Column):
            if column.table == NEW:
                attributes.setdefault(column.name)
        forward[current - 1].append(predicate)
        if len(states) == 1 and current in loops:
            loops[current].append(predicate)
    edges = []
    for source in range(len(variables)):
        if source in loops:
            edges.append(Edge(source, source, tuple(loops[source])))
        edges.append(Edge(source, source + 1, tuple(forward[source])))
    if len(variables) in loops:
        edges.append(Edge(len(variables), len(variables), tuple(loops[len(variables)])))
    for attribute in auxiliary:
        attributes.setdefault(attribute)
    return StateMachine(variables, tuple(edges), tuple(auxiliary.items()), tuple(attributes))


def _requalify(
    expression: exp.Expression, replacements: dict[str, tuple[str, Callable[[str], str]]]
) -> exp.Expression:
    """``expression`` with each ``v.attr`` replaced by ``Alias.column`` as ``replacements[v]`` says."""

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table and node.table.lower() in replacements:
            alias, column_of = replacements[node.table.lower()]
            quoted = bool(node.this.args.get("quoted"))
            return exp.Column(
                this=exp.to_identifier(column_of(node.name), quoted=quoted),
                table=exp.to_identifier(alias),
            )
        return node

    return expression.copy().transform(replace, copy=False)


__all__ = ["NEW", "PREVIOUS", "Edge", "StateMachine", "build_state_machine"]
