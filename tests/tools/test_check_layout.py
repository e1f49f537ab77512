"""tools/check_layout.py, make lint's check of the package's shape, catches what it promises: an import cycle
(one hidden in a function too, not one under TYPE_CHECKING but inside the runtime layer), a module over 600
lines, a class over 300."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def check_layout(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("check_layout", ROOT / "tools" / "check_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    package = tmp_path / "hetero_cli"
    (package / "layer").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layer" / "__init__.py").write_text("")
    monkeypatch.setattr(module, "PACKAGE", package)
    return module, package


def test_the_package_as_it_is_passes():
    spec = importlib.util.spec_from_file_location("check_layout_real", ROOT / "tools" / "check_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 0


def test_a_cycle_hidden_in_a_function_is_found(check_layout, capsys):
    module, package = check_layout
    (package / "layer" / "a.py").write_text("from . import b\n")
    (package / "layer" / "b.py").write_text("def f():\n    from .a import x\n")
    assert module.main() == 1
    assert "import cycle: hetero_cli.layer.a <-> hetero_cli.layer.b" in capsys.readouterr().out


def test_an_import_for_type_checking_only_makes_no_cycle(check_layout, capsys):
    module, package = check_layout
    (package / "layer" / "a.py").write_text("from . import b\n")
    (package / "layer" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
    )
    assert module.main() == 0, capsys.readouterr().out


def test_in_the_runtime_an_import_for_type_checking_only_is_a_cycle_too(check_layout, capsys):
    """The runtime layer's modules may not lean on each other even for types: its compile side, compiled
    value and request side stay apart (issue 44)."""
    module, package = check_layout
    (package / "runtime").mkdir()
    (package / "runtime" / "__init__.py").write_text("")
    (package / "runtime" / "a.py").write_text("from . import b\n")
    (package / "runtime" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n"
    )
    assert module.main() == 1
    assert "import cycle: hetero_cli.runtime.a <-> hetero_cli.runtime.b" in capsys.readouterr().out


def test_oversized_modules_and_classes_are_named(check_layout, capsys):
    module, package = check_layout
    body = "\n".join(f"    x{i} = {i}" for i in range(301))
    (package / "layer" / "big.py").write_text(f"class Big:\n{body}\n" + "y = 1\n" * 300)
    assert module.main() == 1
    out = capsys.readouterr().out
    assert "hetero_cli/layer/big.py: 602 lines (at most 600)" in out
    assert "hetero_cli/layer/big.py:1: class Big has 302 lines (at most 300)" in out
