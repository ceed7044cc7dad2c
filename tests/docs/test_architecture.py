"""docs/architecture.md names only what exists: every module and folder it names is
under src/tally, and every `Class.method`, `module.function` and `path.attribute`
resolves (it once named `DerivedRuns._patch` long after that method was gone)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "tally"
DOC = ROOT / "docs" / "architecture.md"
NOT_CODE = {"pyproject.toml", "file.accepted", "scripts/check"}  # files and words, not modules


def named() -> list[str]:
    """What the page puts in backticks, one `{a,b}.py` expanded to its modules."""
    found = []
    for text in re.findall(r"`([^`\n]+)`", DOC.read_text()):
        braces = re.fullmatch(r"([\w/]*)\{([\w,]+)\}\.py", text)
        if braces:
            found += [f"{braces[1]}{name}.py" for name in braces[2].split(",")]
        else:
            found.append(text)
    return found


def tree() -> list[str]:
    return [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if "__pycache__" not in p.parts
    ]


def exists(path: str) -> bool:
    """A path as the page writes it, relative to the package or to a folder of it."""
    return any(p == path or p.endswith("/" + path) for p in tree())


@cache
def definitions(module: str) -> frozenset[str]:
    """The names a module defines at its top level and in its classes (`Class.name`)."""
    names: set[str] = set()
    for path in PACKAGE.rglob(module):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef):
                names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names |= {
                    f"{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                }
    return frozenset(names)


MODULES = sorted({n for n in named() if re.fullmatch(r"[\w/]+\.py", n)})
FOLDERS = sorted({n for n in named() if re.fullmatch(r"[\w/]+/", n)})
ATTRIBUTES = sorted(
    {n for n in named() if re.fullmatch(r"[\w/]*\w+\.\w+", n) and not n.endswith(".py")} - NOT_CODE
)


@pytest.mark.parametrize("path", MODULES)
def test_every_module_named_exists(path: str) -> None:
    assert exists(path), f"docs/architecture.md names {path}, which is not in src/tally"


@pytest.mark.parametrize("path", FOLDERS)
def test_every_folder_named_exists(path: str) -> None:
    assert exists(path.rstrip("/")), f"docs/architecture.md names {path}"


@pytest.mark.parametrize("name", ATTRIBUTES)
def test_every_class_method_and_function_named_exists(name: str) -> None:
    owner, attribute = name.rsplit(".", 1)
    if owner[0].isupper():  # Class.method: in whichever module defines the class
        modules = {p.name for p in PACKAGE.rglob("*.py") if f"class {owner}" in p.read_text()}
        assert any(name in definitions(m) for m in modules), f"{name} does not exist"
    elif owner == "tally":  # a package or module the contracts name
        assert exists(attribute) or exists(f"{attribute}.py"), f"{name} does not exist"
    else:  # module.function, or folder/module.function
        module = owner.rsplit("/", 1)[-1] + ".py"
        assert attribute in definitions(module), f"{name} does not exist"


def test_the_page_names_modules_folders_and_code() -> None:
    """The parametrised tests above see something: the page's names were found."""
    assert len(MODULES) > 15
    assert "worker/" in FOLDERS
    assert {"DerivedRuns.queue_changed_inputs", "matching.reconcile"} <= set(ATTRIBUTES)


PAGE_WORDS = 1100  # one printed page of prose and tables


def test_the_page_is_one_page() -> None:
    """A map, not a catalogue: each package's own docstring lists its modules."""
    words = len(DOC.read_text().split())
    assert words <= PAGE_WORDS, f"docs/architecture.md has {words} words"


PACKAGES = sorted(
    p.parent
    for p in PACKAGE.rglob("__init__.py")
    if "migrations" not in p.parts and "__pycache__" not in p.parts
)


def members(package: Path) -> list[str]:
    """A package's modules and subpackages, as its docstring names them."""
    found = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
    found += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()]
    return sorted(found)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_package_docstring_names_its_modules(package: Path) -> None:
    """Where the page stops, the packages go on: every module and subpackage is named,
    in backticks, in its package's docstring (its catalogue)."""
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    said = set(re.findall(r"`([^`\n]+)`", docstring))
    said |= {name.split(".")[0] for name in said}  # `runs.DerivedRuns` names `runs`
    missing = [m for m in members(package) if not ({m, f"{m}.py", m.rstrip("/")} & said)]
    assert not missing, f"{package.relative_to(ROOT)}/__init__.py does not name {missing}"
