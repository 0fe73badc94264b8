"""The package's import graph, built statically from its source, keeps its shape.

Every ``import`` in ``trackerhealth/**/*.py`` is read with :mod:`ast` (relative imports resolved;
imports inside functions kept and marked *deferred*; ``if TYPE_CHECKING:`` blocks left out, since
they never run). The tests then fail on:

* a cycle between modules at import time (deferred imports run later, after both modules exist),
  and a package root that imports any of the package at import time (every module's parent runs
  first, so that would make every module depend on what the root imports);
* a forbidden arrow, at any level: the analysis core importing an integration, an adapter
  importing a writer (or the registry that builds writers), a writer reaching an adapter's
  private module or name;
* the scan loop or the scan command discovering interface members with ``getattr``;
* ``import trackerhealth.schema`` loading an adapter, writer or monitor module.

Hand-written rather than import-linter/grimp (not among the test dependencies): the graph is
small, and the rules read here as plain Python. Cycles are found with networkx.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

import trackerhealth

PACKAGE = Path(trackerhealth.__file__).resolve().parent
NAME = PACKAGE.name

CORE = ("schema", "roles", "stats", "engine", "scorecard", "diagnoses", "config", "explain", "config_facts")
# What the analysis core must never import, at any level.
NOT_FROM_CORE = ("trackerhealth.adapters", "trackerhealth.writers", "trackerhealth.cli", "trackerhealth.scan_cli",
                 "trackerhealth.report_cli", "trackerhealth.scan", "trackerhealth.trackers", "trackerhealth.monitor",
                 "trackerhealth.demo", "wandb", "wandb_workspaces", "mlflow", "plotly")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str  # a trackerhealth module, or the imported external module's dotted name
    names: tuple[str, ...]  # names taken from the target (from X import a, b); () for `import X`
    line: int
    deferred: bool  # inside a function: runs when called, not when the module is imported

    def __str__(self) -> str:
        what = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.source} -> {self.target}{what} [line {self.line}{', deferred' if self.deferred else ''}]"


def module_name(path: Path) -> str:
    parts = [NAME, *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {module_name(p) for p in SOURCES.values() if p.name == "__init__.py"}


def _internal(dotted: str) -> str:
    """The longest prefix of ``dotted`` that is a module of the package."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in SOURCES:
            return candidate
    return dotted


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str):
        self.module = module
        self.package = module if module in PACKAGES else module.rpartition(".")[0]
        self.depth = 0  # function nesting
        self.edges: list[Edge] = []

    def _function(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, target: str, names: tuple[str, ...], line: int) -> None:
        if target.split(".")[0] == NAME:
            target = _internal(target)
        self.edges.append(Edge(self.module, target, names, line, self.depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, (), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        if origin == "__future__":
            return
        for alias in node.names:
            submodule = f"{origin}.{alias.name}"
            if submodule in SOURCES:  # `from . import stats`: the submodule itself
                self._add(submodule, (), node.lineno)
            else:
                self._add(origin, (alias.name,), node.lineno)


def _edges() -> list[Edge]:
    edges: list[Edge] = []
    for module, path in SOURCES.items():
        visitor = _Imports(module)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        edges.extend(visitor.edges)
    return edges


EDGES = _edges()


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_sees_the_imports_it_should():
    # The parser itself: known arrows of each kind are found, resolved and marked as they are.
    by = {(e.source, e.target): e for e in EDGES}
    assert not by[("trackerhealth.engine", "trackerhealth.diagnoses")].deferred  # from . import diagnoses
    taken = {n for e in EDGES if (e.source, e.target) == ("trackerhealth.writers.mlflow_writer", "trackerhealth.adapters.base")
             for n in e.names}
    assert {"RunSkipped", "TrackerUnreachable"} <= taken, taken
    assert by[("trackerhealth.trackers", "trackerhealth.writers.mlflow_writer")].deferred
    assert not any(e.source == "trackerhealth" and e.target == "trackerhealth.monitor" for e in EDGES)  # TYPE_CHECKING
    assert len(SOURCES) > 80 and len(EDGES) > 300


def test_no_cycle_between_modules_at_import_time():
    graph = nx.DiGraph()
    for e in EDGES:
        if not e.deferred and e.target in SOURCES and e.target != e.source:
            graph.add_edge(e.source, e.target)
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_the_package_root_imports_nothing_of_the_package_at_import_time():
    # Every module's parent runs first: a root that imported the monitor (and with it the writers)
    # made `import trackerhealth.schema` load them, and every module depend on them (a cycle).
    eager = [str(e) for e in EDGES if e.source == NAME and not e.deferred and _under(e.target, NAME)]
    assert eager == []


@pytest.mark.parametrize("core", CORE)
def test_the_analysis_core_imports_no_integration(core):
    bad = [str(e) for e in EDGES if _under(e.source, f"{NAME}.{core}")
           and any(_under(e.target, banned) for banned in NOT_FROM_CORE)]
    assert bad == []


def test_adapters_never_import_writers_or_the_registry_that_builds_them():
    bad = [str(e) for e in EDGES if _under(e.source, f"{NAME}.adapters")
           and (_under(e.target, f"{NAME}.writers") or _under(e.target, f"{NAME}.trackers"))]
    assert bad == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_writers_use_no_private_name_of_an_adapter():
    bad = [str(e) for e in EDGES if _under(e.source, f"{NAME}.writers") and _under(e.target, f"{NAME}.adapters")
           and (any(_private(part) for part in e.target.split(".")) or any(_private(n) for n in e.names))]
    # ... nor reach one through an adapter object (adapter._retrying) or getattr(adapter, "_x").
    for module, path in SOURCES.items():
        if not _under(module, f"{NAME}.writers"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                    and "adapter" in node.value.id.lower():
                bad.append(f"{module}: {node.value.id}.{node.attr} [line {node.lineno}]")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str) and _private(node.args[1].value):
                bad.append(f"{module}: {node.func.id}(…, {node.args[1].value!r}) [line {node.lineno}]")
    assert bad == []


@pytest.mark.parametrize("module", ["trackerhealth.scan", "trackerhealth.scan_cli"])
def test_the_scan_loop_and_command_discover_no_member_with_getattr(module):
    tree = ast.parse(SOURCES[module].read_text(encoding="utf-8"))
    calls = [f"line {n.lineno}: {n.func.id}" for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")]
    assert calls == []


def _loaded_by(statement: str) -> set[str]:
    """The modules ``python -X importtime -c statement`` imported, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                          check=True, cwd=PACKAGE.parent)
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
            and "|" in line}


def test_importing_the_schema_loads_no_adapter_writer_or_monitor():
    loaded = _loaded_by("import trackerhealth.schema")
    assert "trackerhealth.schema" in loaded  # the measurement sees what it should
    ours = sorted(m for m in loaded if _under(m, NAME))
    assert ours == ["trackerhealth", "trackerhealth.schema"]
    assert not {m for m in loaded if m.split(".")[0] in ("wandb", "mlflow", "plotly")}


def test_importing_the_package_loads_none_of_it_and_every_public_name_still_resolves():
    assert sorted(m for m in _loaded_by("import trackerhealth") if _under(m, NAME)) == ["trackerhealth"]
    for name in trackerhealth.__all__:
        assert getattr(trackerhealth, name) is not None, name
    from trackerhealth import HealthMonitor, RunHistory, analyze  # noqa: F401 - the documented spelling
    assert {"HealthMonitor", "analyze", "RunHistory", "__version__"} <= set(dir(trackerhealth))
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        trackerhealth.nonsense  # noqa: B018
