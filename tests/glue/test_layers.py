"""The glue's import layers, read from the source: each `ewbik_addon` subpackage imports only the
ones before it in `LAYERS` (docs/ARCHITECTURE.md's table), nothing but operators imports
`operators/`, operators import no other operator module, no glue module imports itself back
through others, and no folder grows past a dozen modules. Imports for type checking only
(`if TYPE_CHECKING:`) are left out: they do not run."""

import ast
import collections
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
LAYERS = ("com", "rigs", "limits", "bridge", "solve", "bake", "documents", "viewport", "ui")
MAX_MODULES_PER_FOLDER = 12


def _module_name(path):
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path):
    """Absolute names (from the repository root) of what `path` imports when it runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level or id(node) in type_only:
            continue
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            is_module = (REPO / submodule.replace(".", "/")).with_suffix(".py").exists()
            yield submodule if is_module else target


def _graph(folders):
    return {
        _module_name(path): set(_runtime_imports(path))
        for folder in folders
        for path in sorted((REPO / folder).rglob("*.py"))
    }


GRAPH = _graph(("ewbik_addon", "operators", "panels"))


def _layer(module):
    parts = module.split(".")
    return parts[1] if parts[0] == "ewbik_addon" and len(parts) > 2 else None


def _later_imports(module, graph):
    own = LAYERS.index(_layer(module))
    return {target for target in graph[module] if _layer(target) and LAYERS.index(_layer(target)) > own}


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _layer(m)))
def test_a_glue_module_imports_only_earlier_layers(module):
    later = _later_imports(module, GRAPH)
    assert not later, f"{module} imports {sorted(later)}, which come after {_layer(module)}"


def test_only_operators_import_operators_and_never_each_other():
    offenders = {
        module: sorted(t for t in targets if t.startswith("operators.") and t != module)
        for module, targets in GRAPH.items()
        if module != "operators"
    }
    assert not {module: targets for module, targets in offenders.items() if targets}


def test_the_glue_has_no_import_cycle():
    glue = {module: {t for t in targets if t in GRAPH and t != module} for module, targets in GRAPH.items()}
    done, active = set(), []

    def visit(module):
        assert module not in active, " -> ".join([*active[active.index(module) :], module])
        if module in done:
            return
        active.append(module)
        for target in sorted(glue[module]):
            if not target.endswith(module):  # a package's __init__ listing its own modules
                visit(target)
        active.pop()
        done.add(module)

    for module in sorted(glue):
        visit(module)


def test_every_layer_is_a_folder_of_at_most_a_dozen_modules():
    counts = collections.Counter(_layer(module) for module in GRAPH if _layer(module))
    assert set(counts) == set(LAYERS)
    assert max(counts.values()) <= MAX_MODULES_PER_FOLDER, counts


def test_the_layer_rule_sees_an_upward_import(tmp_path, monkeypatch):
    """The check itself: a `com` module importing from `solve` is caught."""
    module = tmp_path / "ewbik_addon" / "com" / "upward.py"
    module.parent.mkdir(parents=True)
    module.write_text("from ..solve.live import suspended\n", encoding="utf-8")
    (tmp_path / "ewbik_addon" / "solve").mkdir()
    (tmp_path / "ewbik_addon" / "solve" / "live.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert _later_imports("ewbik_addon.com.upward", _graph(("ewbik_addon",))) == {"ewbik_addon.solve.live"}
