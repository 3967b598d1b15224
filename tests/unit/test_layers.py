"""The layers hold (import-linter's contracts in .importlinter), no import cycle exists, and imports
of the project's own modules sit at the top of the file.

The cycle check reads every import, those inside functions included (they still tie modules
together) and those under `if TYPE_CHECKING:` too, so a new cycle is caught even where no contract
has an opinion. A type-only import never runs, but the importer's interface still depends on the
imported module: a lower module that names an upper one's types is not below it (so paths,
frameworks/environments and multimodal/combinations describe what they read as small Protocols), and
import-linter does not see such an import (.importlinter sets exclude_type_checking_imports).

An import inside a function is allowed only with its reason on the import's first line, as a comment
starting `# inside:` (an optional heavy framework, or a process that must not load MLflow or
Prefect); at most MAX_INSIDE_IMPORTS of them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tasks", "flows", "ops")
REASON = "# inside:"
MAX_INSIDE_IMPORTS = 30


@dataclass(frozen=True)
class ImportSite:
    importer: str
    imported: str
    line: int
    inside_function: bool
    reason: str | None


def _modules(root: Path = REPO_ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _project_module(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name lives in (`tasks.specs.load_suite` -> `tasks.specs`)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    # `from package import module` imports the module; `from module import name` the module
    return [f"{base}.{alias.name}" for alias in node.names]


def import_sites(modules: dict[str, Path] | None = None) -> list[ImportSite]:
    """Every import of a project module by a project module, those under TYPE_CHECKING included."""
    modules = _modules() if modules is None else modules
    sites: list[ImportSite] = []
    for importer, path in modules.items():
        source = path.read_text()
        lines = source.splitlines()
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]

        def visit(node: ast.AST, inside: bool, importer: str = importer, package: str = package,
                  lines: list[str] = lines) -> None:
            for child in ast.iter_child_nodes(node):
                child_inside = inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                if isinstance(child, ast.Import | ast.ImportFrom):
                    line = lines[child.lineno - 1]
                    reason = line.split(REASON, 1)[1].strip() if REASON in line else None
                    for name in _imported_names(child, package):
                        imported = _project_module(name, modules)
                        if imported and imported != importer:
                            sites.append(ImportSite(importer, imported, child.lineno, inside, reason))
                visit(child, child_inside)

        visit(ast.parse(source), False)
    return sites


def import_cycles(sites: list[ImportSite]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), largest first."""
    edges: dict[str, set[str]] = {}
    for site in sites:
        edges.setdefault(site.importer, set()).add(site.imported)
        edges.setdefault(site.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(edges[module]):
            if other not in index:
                connect(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(edges):
        if module not in index:
            connect(module)
    return sorted(components, key=len, reverse=True)


def test_the_cycle_finder_finds_a_cycle_and_names_its_modules():
    sites = [ImportSite("a", "b", 1, False, None), ImportSite("b", "c", 1, True, None),
             ImportSite("c", "a", 1, False, None), ImportSite("c", "d", 1, False, None)]
    assert import_cycles(sites) == [["a", "b", "c"]]
    assert import_cycles(sites[:2]) == []


def test_an_import_for_types_only_closes_a_cycle(tmp_path: Path):
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "upper.py").write_text("from layered import lower\n")
    (package / "lower.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                      "    from layered.upper import Thing\n")
    assert import_cycles(import_sites(_modules(tmp_path, ("layered",)))) == [["layered.lower",
                                                                             "layered.upper"]]


def test_no_import_cycles():
    cycles = import_cycles(import_sites())
    assert not cycles, "import cycles (the modules of each import each other, around): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_imports_inside_functions_say_why_and_are_few():
    inside = sorted({(s.importer, s.line, s.reason) for s in import_sites() if s.inside_function})
    unexplained = [f"{importer}:{line}" for importer, line, reason in inside if not reason]
    assert not unexplained, (
        f"{len(unexplained)} imports of project modules inside functions without a reason; move them to "
        f"the top of the file or write `{REASON} <why>` on the import's line: {', '.join(unexplained)}")
    assert len(inside) <= MAX_INSIDE_IMPORTS, (
        f"{len(inside)} imports of project modules inside functions (at most {MAX_INSIDE_IMPORTS}): "
        + ", ".join(f"{importer}:{line} ({reason})" for importer, line, reason in inside))


def test_import_linter_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _adapter_modules() -> set[str]:
    """The framework modules, found as the registry finds them: those that define ADAPTER."""
    found = set()
    for path in sorted((REPO_ROOT / "tasks" / "frameworks").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(target, ast.Name) and target.id == "ADAPTER" for target in targets):
                found.add(f"tasks.frameworks.{path.stem}")
    return found


def test_evaluations_tracking_and_reports_never_import_a_framework():
    # Capabilities, not names: they ask the fitted model or the registry. Generic over the folder, so a
    # new framework file is covered without listing it anywhere.
    adapters = _adapter_modules()
    assert {"tasks.frameworks.hgb", "tasks.frameworks.xgboost"} <= adapters
    askers = ("tasks.evaluations", "tasks.tracking", "tasks.report")
    offending = sorted({f"{site.importer}:{site.line} imports {site.imported}" for site in import_sites()
                        if site.importer.startswith(askers) and site.imported in adapters})
    assert not offending, "; ".join(offending)
