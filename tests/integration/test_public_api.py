"""The public API documents itself: every public name of ``hetero_cli.__all__`` (and of the property-key
modules) has a docstring on each of its public callables and properties, and the usage example in
``hetero_cli``'s module docstring runs, on models/digits.onnx, so that it cannot rot."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys

import numpy as np
import pytest
from support.helpers import ROOT

import hetero_cli
from hetero_cli import device, hint, properties

DIGITS = ROOT / "models" / "digits.onnx"
KEY_MODULES = (properties, hint, device)
PUBLIC_CLASSES = [
    *(obj for obj in (getattr(hetero_cli, name) for name in hetero_cli.__all__) if inspect.isclass(obj)),
    properties.Property,
    hint.PerformanceMode,
]


def documented_members(cls: type) -> dict[str, object]:
    """``cls``'s public callables and properties that hetero_cli defines (inherited ones included), by
    name; what builtins and the standard library give it (Exception.args, Enum.name) is theirs."""
    found: dict[str, object] = {}
    for owner in reversed(cls.__mro__):
        if not owner.__module__.startswith("hetero_cli"):
            continue
        for name, raw in vars(owner).items():
            if name.startswith("_") and name != "__call__":
                continue
            if isinstance(raw, staticmethod | classmethod):
                raw = raw.__func__
            if isinstance(raw, property | functools.cached_property) or inspect.isfunction(raw):
                found[name] = raw
    return found


def test_the_classes_are_the_public_api():
    names = {cls.__name__ for cls in PUBLIC_CLASSES}
    for expected in ("Core", "Model", "CompiledModel", "InferRequest", "AsyncInferQueue", "Plan", "Type"):
        assert expected in names
    # InferRequest's asynchronous half (runtime/async_request.py) is part of its API
    asynchronous = {"start_async", "wait", "wait_for", "set_callback"}
    assert asynchronous <= set(documented_members(hetero_cli.InferRequest))


def test_every_public_callable_and_property_has_a_docstring():
    missing = [cls.__name__ for cls in PUBLIC_CLASSES if not (cls.__doc__ or "").strip()]
    missing += [m.__name__ for m in (hetero_cli, *KEY_MODULES) if not (m.__doc__ or "").strip()]
    for cls in PUBLIC_CLASSES:
        for name, member in documented_members(cls).items():
            if not (getattr(member, "__doc__", None) or "").strip():
                missing.append(f"{cls.__name__}.{name}")
    assert missing == [], f"public API without a docstring: {', '.join(missing)}"


def usage_example() -> str:
    """The code of hetero_cli's module docstring: everything after its title line."""
    doc = inspect.getdoc(hetero_cli)
    assert doc is not None
    _title, _, code = doc.partition("\n\n")
    assert "import hetero_cli as hc" in code, "the module docstring's usage example moved"
    return code


def test_the_module_docstring_example_runs(capsys):
    code = usage_example()
    # adapted to a real model: its path and its input's name; the rest runs as written
    for placeholder in ('"model.onnx"', '{"x": x}'):
        assert placeholder in code, f"the usage example no longer has {placeholder}: adapt this test"
    image = hetero_cli.Core().read_model(DIGITS).inputs[0]
    code = code.replace('"model.onnx"', repr(str(DIGITS))).replace('{"x": x}', "{input_name: x}")
    shape = tuple(d if isinstance(d, int) else 1 for d in image.shape)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    namespace = {"x": x, "input_name": image.name}

    exec(compile(code, "hetero_cli.__doc__", "exec"), namespace)

    outputs, queue = namespace["outputs"], namespace["queue"]
    assert isinstance(namespace["compiled"], hetero_cli.CompiledModel)
    assert isinstance(queue, hetero_cli.AsyncInferQueue)
    (name,) = namespace["model"].output_names
    assert outputs[name].shape[0] == 1
    # the queue's request ran the same model on the same input: the same answer
    ran = [request for request in queue if request.results]
    assert len(ran) == 1
    np.testing.assert_allclose(ran[0].results[name], outputs[name], rtol=1e-4, atol=1e-5)
    assert capsys.readouterr().out.startswith("0 "), "the callback printed its userdata first"


@pytest.mark.parametrize("module", KEY_MODULES, ids=lambda m: m.__name__)
def test_the_key_modules_examples_name_their_keys(module):
    """Each key a property-key module defines is named in its docstring (what it takes, who reads it)."""
    keys = [name for name, value in vars(module).items() if isinstance(value, properties.Property)]
    assert keys
    for name in keys:
        assert name in (module.__doc__ or ""), f"{module.__name__}.{name} is not described"


def test_all_is_what_the_package_answers_and_every_error_class_is_in_it():
    """``__all__`` names exactly what the package gives by attribute, every exception class a public
    function raises among them; internals are not in it."""
    import hetero_cli.errors as errors

    raised = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.HeteroError) and obj.__module__ == errors.__name__
    }
    assert raised <= set(hetero_cli.__all__), f"not exported: {sorted(raised - set(hetero_cli.__all__))}"
    for name in hetero_cli.__all__:
        assert getattr(hetero_cli, name) is not None
    for internal in ("Pipeline", "Link", "Subgraph", "CompiledSubgraph"):
        assert internal not in hetero_cli.__all__
    assert hetero_cli.hint is hint and hetero_cli.device is device and hetero_cli.properties is properties


def test_no_attribute_imports_a_module_that_is_not_public():
    """An attribute that is no public name is an AttributeError, never an import of a submodule by that
    name (in a fresh interpreter: this one has imported them all)."""
    code = (
        "import sys, hetero_cli\n"
        "for name in ('cli', 'runtime', 'quirks', 'nothing_here'):\n"
        "    try:\n"
        "        getattr(hetero_cli, name)\n"
        "    except AttributeError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit(f'hetero_cli.{name} answered')\n"
        "assert 'hetero_cli.runtime' not in sys.modules, 'an attribute imported the runtime'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
