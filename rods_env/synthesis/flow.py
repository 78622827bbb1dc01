"""The data-flow graph of a domain's tools: which outputs feed which arguments.

Derived from two sources, nothing written by hand:

- the **typed signatures** of the tools (:meth:`rods_env.tools.Toolkit.specs`): each
  tool's parameters with their JSON types, whether it writes, what it returns;
- the **executed outputs** of the domain's seed tasks (their gold replays): which argument
  takes the keys of which table (an *entity* argument: ``order_id`` takes keys of
  ``orders``), which output paths list keys of which table (``get_user_details`` lists
  ``orders[]``), and which output value actually fed which argument in a gold run.

An edge ``source.path -> target.argument`` says that the agent can find a value for the
target's argument in the source's output at that path: either it was seen to happen in a
gold run (``observed`` counts how often), or both ends hold keys of the same table (typed;
``observed`` 0). Synthesis reads the graph to lengthen dependency chains (*deepen*: a value
the customer states is instead found by following an edge, see
:mod:`rods_env.synthesis.compose`), and ``rods synth --graph`` prints it, so a domain's
author sees what expansion can use.
"""

from __future__ import annotations

import inspect
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from threading import Lock
from typing import Any

from rods_env.domain import Domain
from rods_env.gold import GOLD_CACHE
from rods_env.task import Task

_FIELD = re.compile(r"^[a-z_][a-z_]*$")


@dataclass(frozen=True)
class Parameter:
    """One argument of a tool.

    Attributes:
        name: The argument's name.
        type: Its JSON type in the tool's schema (``"string"``, ``"array"``, ...).
        entity: The table whose keys it takes, seen in executed gold calls (None when its
            values are not keys: an amount, a reason, an email).
    """

    name: str
    type: str
    entity: str | None = None


@dataclass(frozen=True)
class ToolNode:
    """One tool of the graph.

    Attributes:
        name: The tool's name.
        writes: Whether it changes the database.
        parameters: Its arguments, in schema order.
        returns: Its return annotation, as written in its signature.
        produces: Output path to the table whose keys are found there (``""``: the whole
            output is one key, as a look-up by email returns a user id).
    """

    name: str
    writes: bool
    parameters: tuple[Parameter, ...]
    returns: str
    produces: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FlowEdge:
    """Values at ``source``'s output ``path`` can fill ``target``'s ``argument``.

    Attributes:
        source: The producing tool.
        path: Where in its output (``"orders[]"``, ``""`` for the whole output).
        target: The consuming tool.
        argument: The argument filled.
        entity: The table both ends hold keys of (None for an observed flow of a value
            that is not a key: an amount, a flight number found by a search).
        observed: How many times this flow happened in the seeds' gold runs.
    """

    source: str
    path: str
    target: str
    argument: str
    entity: str | None
    observed: int


@dataclass(frozen=True)
class FlowGraph:
    """The data-flow graph of one domain's tools (see the module docstring).

    Attributes:
        domain: The domain's name.
        tools: Tool name to node, in the toolkit's order.
        edges: Every edge, observed ones first.
        tasks: How many gold runs the graph was derived from.
    """

    domain: str
    tools: Mapping[str, ToolNode]
    edges: tuple[FlowEdge, ...]
    tasks: int

    def entity(self, tool: str, argument: str) -> str | None:
        """The table whose keys ``tool``'s ``argument`` takes, or None."""
        node = self.tools.get(tool)
        if node is None:
            return None
        return next((p.entity for p in node.parameters if p.name == argument), None)

    def producers(self, tool: str, argument: str) -> list[FlowEdge]:
        """The edges into ``tool``'s ``argument``."""
        return [e for e in self.edges if e.target == tool and e.argument == argument]

    def depth(self) -> int:
        """Calls on the longest chain of distinct tools along the edges (the deepest
        dependency a task of this domain can have without repeating a tool)."""
        succ: dict[str, set[str]] = defaultdict(set)
        for e in self.edges:
            if e.source != e.target:
                succ[e.source].add(e.target)

        def longest(tool: str, on_path: frozenset[str]) -> int:
            best = 1
            for nxt in succ.get(tool, ()):
                if nxt not in on_path:
                    best = max(best, 1 + longest(nxt, on_path | {nxt}))
            return best

        return max((longest(t, frozenset({t})) for t in self.tools), default=0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (``rods synth --graph --json``)."""
        return {
            "domain": self.domain,
            "tasks": self.tasks,
            "depth": self.depth(),
            "tools": {
                name: {
                    "writes": node.writes,
                    "returns": node.returns,
                    "parameters": {
                        p.name: {"type": p.type, "entity": p.entity} for p in node.parameters
                    },
                    "produces": dict(node.produces),
                }
                for name, node in self.tools.items()
            },
            "edges": [
                {
                    "source": e.source,
                    "path": e.path,
                    "target": e.target,
                    "argument": e.argument,
                    "entity": e.entity,
                    "observed": e.observed,
                }
                for e in self.edges
            ],
        }

    def format(self) -> str:
        """The graph as text: each tool with its entity arguments, then the edges."""
        lines = [
            f"data-flow graph of {self.domain}: {len(self.tools)} tools, {len(self.edges)} "
            f"edges, longest chain {self.depth()} calls (from {self.tasks} gold runs)"
        ]
        for node in self.tools.values():
            args = ", ".join(
                f"{p.name}: {p.entity}" if p.entity else p.name for p in node.parameters
            )
            mark = "write" if node.writes else "read"
            lines.append(f"  {node.name}({args}) [{mark}] -> {node.returns}")
        lines.append("edges (source.path -> target.argument  [entity, times observed]):")
        for e in self.edges:
            where = f"{e.source}.{e.path}" if e.path else e.source
            lines.append(
                f"  {where} -> {e.target}.{e.argument}  [{e.entity or 'value'}, {e.observed}]"
            )
        return "\n".join(lines)


def output_paths(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, scalar)`` pairs of a JSON value. List items add ``[]``; object keys that
    are data rather than field names (ids and dates used as keys, product names: anything
    but a lower-case snake_case word) are written ``*``, so records of one kind share
    their paths."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            part = str(key) if _FIELD.match(str(key)) else "*"
            yield from output_paths(item, f"{path}.{part}" if path else part)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from output_paths(item, f"{path}[]")
    else:
        yield path, value


def _argument_leaves(arguments: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(argument name, scalar)`` pairs: nested values keep the top-level argument's name."""
    for name, value in arguments.items():
        for _path, leaf in output_paths(value):
            yield name, leaf


def _traceable(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return abs(value) >= 10
    return isinstance(value, str) and len(value) >= 3


def _table_of(tables: Mapping[str, Mapping[str, Any]], value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    for name, rows in tables.items():
        if value in rows:
            return name
    return None


def derive(domain: Domain, tasks: list[Task] | None = None) -> FlowGraph:
    """Derive the graph of ``domain`` from its tools and the gold runs of ``tasks``.

    Args:
        domain: The domain.
        tasks: Tasks whose gold runs show the flow (default: the domain's seed tasks).
    """
    tasks = domain.seed_tasks() if tasks is None else tasks
    specs = domain.toolkit.specs()
    takes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    lists: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    flows: Counter[tuple[str, str, str, str]] = Counter()
    for task in tasks:
        gold = GOLD_CACHE.get(domain, task)
        tables = domain.base(task.db_seed, task.db_size)
        produced: list[dict[Any, str]] = []  # per call: value -> first path holding it
        for call, out in zip(task.gold_calls, gold.call_outputs, strict=True):
            for name, leaf in _argument_leaves(call.arguments):
                table = _table_of(tables, leaf)
                if table is not None:
                    takes[(call.name, name)][table] += 1
                if not _traceable(leaf):
                    continue
                for i in range(len(produced) - 1, -1, -1):
                    path = produced[i].get(leaf)
                    if path is not None:
                        flows[(task.gold_calls[i].name, path, call.name, name)] += 1
                        break
            paths: dict[Any, str] = {}
            for path, leaf in output_paths(out):
                if _traceable(leaf) and not isinstance(leaf, float):
                    paths.setdefault(leaf, path)
                table = _table_of(tables, leaf)
                if table is not None:
                    lists[(call.name, path)][table] += 1
            produced.append(paths)
    nodes: dict[str, ToolNode] = {}
    for name, spec in specs.items():
        props = spec.schema["function"]["parameters"].get("properties", {})
        params = tuple(
            Parameter(
                arg,
                str(prop.get("type", "any")),
                takes[(name, arg)].most_common(1)[0][0] if takes.get((name, arg)) else None,
            )
            for arg, prop in props.items()
        )
        produces = {
            path: counts.most_common(1)[0][0]
            for (tool, path), counts in sorted(lists.items())
            if tool == name
        }
        returns = inspect.signature(spec.method).return_annotation
        nodes[name] = ToolNode(
            name,
            spec.writes,
            params,
            returns if isinstance(returns, str) else getattr(returns, "__name__", str(returns)),
            produces,
        )
    edges: dict[tuple[str, str, str, str], FlowEdge] = {}
    for (source, path, target, arg), n in flows.items():
        entity = nodes[source].produces.get(path)
        if entity != _entity(nodes[target], arg):
            entity = None
        edges[(source, path, target, arg)] = FlowEdge(source, path, target, arg, entity, n)
    # typed edges: a look-up that lists keys of a table feeds every argument taking them
    for consumer in nodes.values():
        for param in consumer.parameters:
            if param.entity is None:
                continue
            for producer in nodes.values():
                if producer.writes or producer.name == consumer.name:
                    continue
                for path, table in producer.produces.items():
                    key = (producer.name, path, consumer.name, param.name)
                    if table == param.entity and key not in edges:
                        edges[key] = FlowEdge(
                            producer.name, path, consumer.name, param.name, table, 0
                        )
    order = {name: i for i, name in enumerate(nodes)}
    ranked = sorted(
        edges.values(),
        key=lambda e: (-min(e.observed, 1), order[e.source], order[e.target], e.path, e.argument),
    )
    return FlowGraph(domain.name, nodes, tuple(ranked), len(tasks))


def _entity(node: ToolNode, argument: str) -> str | None:
    return next((p.entity for p in node.parameters if p.name == argument), None)


_GRAPHS: dict[str, FlowGraph] = {}
_LOCK = Lock()


def flow_graph(domain: Domain) -> FlowGraph:
    """The graph of ``domain`` from its seed tasks (derived once per process)."""
    graph = _GRAPHS.get(domain.name)
    if graph is None:
        with _LOCK:
            graph = _GRAPHS.get(domain.name)
            if graph is None:
                graph = _GRAPHS[domain.name] = derive(domain)
    return graph


def dumps(graph: FlowGraph) -> str:
    """The graph as indented JSON text."""
    return json.dumps(graph.to_dict(), indent=2)
