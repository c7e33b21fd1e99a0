# The installed package is whole: the hand-written stubs (cera/_cera.pyi) name every public name
# of the extension and every attribute of its classes (and nothing it lacks), py.typed is there,
# cera exports what __all__ says, and the test venv's build requirements are pyproject.toml's.
import ast
import re
from pathlib import Path

import cera
from cera import _cera
from conftest import REPO


def stub_tree():
    path = Path(_cera.__file__).with_name("_cera.pyi")
    assert path.is_file(), f"{path} is not installed"
    return ast.parse(path.read_text(encoding="utf-8"))


def test_py_typed_is_installed():
    assert Path(cera.__file__).with_name("py.typed").is_file()


def test_stubs_match_the_module():
    tree = stub_tree()
    stubbed = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign):
                    members.add(item.target.id)
            for base in node.bases:  # inherited members, as dir() lists them
                if isinstance(base, ast.Name) and stubbed.get(base.id):
                    members |= stubbed[base.id]
            stubbed[node.name] = members
        elif isinstance(node, ast.AnnAssign):
            stubbed[node.target.id] = None
    public = {n for n in dir(_cera) if not n.startswith("_")} | {"__version__"}
    assert public == set(stubbed), f"only in the module: {public - set(stubbed)}; only in the stub: {set(stubbed) - public}"
    for name, members in stubbed.items():
        obj = getattr(_cera, name)
        if members is None or issubclass(obj, BaseException):
            continue
        actual = {m for m in dir(obj) if not m.startswith("_") or m in ("__iter__", "__next__", "__enter__", "__exit__")}
        wanted = {m for m in members if not m.startswith("_") or m in ("__iter__", "__next__", "__enter__", "__exit__")}
        assert actual == wanted, f"{name}: only in the module {actual - wanted}, only in the stub {wanted - actual}"


def test_all_is_exported():
    for name in cera.__all__:
        assert hasattr(cera, name), name
    assert cera.Error.__module__ == "cera" and cera.Stream is _cera.Stream


def test_error_classes_follow_error_kinds():
    kinds = {
        cera.InvalidArgumentError: ("invalid argument", ValueError),
        cera.NotFoundError: ("not found", FileNotFoundError),
        cera.CorruptError: ("corrupt", ValueError),
        cera.IoError: ("I/O", OSError),
        cera.OutOfRangeError: ("out of range", ValueError),
        cera.InternalError: ("internal", RuntimeError),
    }
    for cls, (kind, builtin) in kinds.items():
        assert issubclass(cls, cera.Error) and issubclass(cls, builtin), cls
        assert kind.lower() in cls.kind.lower(), (cls, cls.kind)
    for cls in (cera.UnsupportedError, cera.CancelledError, cera.UnavailableError):
        assert issubclass(cls, cera.Error) and isinstance(cls.kind, str)


def test_build_requirements_match_pyproject():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    requires = re.search(r"^requires = \[(.*)\]$", pyproject, flags=re.M).group(1)
    pins = set(re.findall(r'"([^"]+)"', requires))
    lines = (REPO / "tests" / "python" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    venv = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert pins <= venv, f"pyproject.toml requires {pins - venv}, which tests/python/requirements.txt does not pin"
