"""Using hetero_cli without ONNX Runtime fails with one message that names the extras: at its first public
name (the package imports them lazily, so that the console scripts take Ctrl-C while it loads: entry.py)."""

from __future__ import annotations

import os
import subprocess
import textwrap

from support.helpers import PYTHON


def import_hetero_cli(tmp_path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [PYTHON, "-c", "import hetero_cli; hetero_cli.Core"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_names_the_extras(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hetero_cli.errors.NoOnnxRuntimeError: "), result.stderr  # an ImportError
    for extra in ("hetero-cli[openvino]", "hetero-cli[cpu]", "hetero-cli[gpu]"):
        assert extra in last, last
    # one message, on one line, raised once
    assert sum("hetero-cli[cpu]" in line for line in result.stderr.splitlines()) == 1


def test_fake_onnxruntime_package_raising_import_error(tmp_path):
    fake = tmp_path / "fake" / "onnxruntime"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("No module named onnxruntime (simulated)")\n')
    assert_names_the_extras(import_hetero_cli(tmp_path, str(tmp_path / "fake")))


def _blocking_site(tmp_path):
    """A folder whose sitecustomize makes onnxruntime unimportable, for PYTHONPATH."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys

            class _NoOnnxRuntime:
                def find_spec(self, name, path=None, target=None):
                    if name == "onnxruntime" or name.startswith("onnxruntime."):
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                    return None

            sys.meta_path.insert(0, _NoOnnxRuntime())
            """
        )
    )
    return site


def test_onnxruntime_blocked_by_sitecustomize(tmp_path):
    assert_names_the_extras(import_hetero_cli(tmp_path, str(_blocking_site(tmp_path))))


def test_a_console_script_without_onnxruntime_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = str(_blocking_site(tmp_path))
    code = "import hetero_cli.entry as entry; entry.hetero()"
    result = subprocess.run(
        [PYTHON, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("[ ERROR ] hetero-cli needs ONNX Runtime") and "hetero-cli[cpu]" in line


def test_import_works_normally(tmp_path):
    result = import_hetero_cli(tmp_path, "")
    assert result.returncode == 0, result.stderr


def test_property_modules_import(tmp_path):
    code = "import hetero_cli.device, hetero_cli.hint, hetero_cli.properties; print(hetero_cli.device.priorities)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [PYTHON, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "MULTI_DEVICE_PRIORITIES"
