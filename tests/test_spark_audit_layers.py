"""spark_audit's layers (spark_audit/__init__.py): a module imports only from its own layer or the ones below,
and bridge imports spark_audit only in the `mqbridge audit` command. Read from the source with ast."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spark_audit"
# Bottom to top, as spark_audit/__init__.py lists them.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("options", "cds", "session", "frames", "fs", "table_files"),
    ("schema", "sources", "lines", "sidecars", "parquet_log", "ingest", "checked_read", "read_ahead",
     "carry",
     "increments"),
    ("rollup",),
    ("scope", "keys", "aggregates", "findings", "audit", "incremental"),
    ("charts", "report"),
    ("beside", "run", "__main__", "cds.__main__"),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imported(path: Path, package: str) -> set[str]:
    """The modules of package that the file imports (anywhere in it), named without the package prefix."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            if target == package or target.startswith(package + "."):
                names.add(target.removeprefix(package).removeprefix("."))
    return names


def layer_of(name: str) -> int | None:
    """The layer of a spark_audit module or of a name imported from one (spark_audit.cds.X is in cds)."""
    while name:
        for i, layer in enumerate(LAYERS):
            if name in layer:
                return i
        name = name.rpartition(".")[0]
    return None


def test_every_module_has_a_layer():
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert {m for m in modules if layer_of(m) is None} == set()
    assert modules == {m for layer in LAYERS for m in layer}


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if name == "__init__":
            continue
        own = layer_of(name)
        assert own is not None
        for target in imported(path, "spark_audit"):
            layer = layer_of(target)
            if layer is not None and layer > own:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_bridge_imports_spark_audit_only_in_the_audit_command():
    importers = {str(p.relative_to(ROOT)) for p in (ROOT / "bridge").rglob("*.py") if imported(p, "spark_audit")}
    assert importers <= {"bridge/cli/audit.py"}
