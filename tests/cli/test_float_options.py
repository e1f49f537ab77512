"""Every option that takes a real number refuses nan and inf (issue 29, item 8): ``-max_irate nan`` was
accepted ("at most nan frames start per second"), as was tune's ``-t inf``. One line, exit 2, nothing
written."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli import cli
from hetero_cli.cli.floats import FiniteFloat

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"
IMAGE = Path(__file__).resolve().parents[2] / "samples" / "images" / "digit_3.png"
NOT_FINITE = ["nan", "NaN", "inf", "-inf", "1e400"]

# each command's options that take a real number, with arguments that would run it otherwise
FLOAT_OPTIONS = {
    ("benchmark", "-max_irate"): ["-m", DIGITS, "-d", "CPU", "-b", "1", "-niter", "1"],
    ("tune", "-t"): ["-m", DIGITS, "-d", "HETERO:CPU", "-shape", "[1,1,32,32]", "--save", "OUT"],
    ("serve", "--request-timeout"): ["-m", DIGITS, "-d", "CPU", "--port", "0"],
}

# options whose value is text holding numbers, parsed by the command: nan refused there too
NUMBERS_IN_TEXT = [
    ("classify", ["-m", DIGITS, "-i", IMAGE, "-d", "CPU", "--mean", "nan"], "finite"),
    ("classify", ["-m", DIGITS, "-i", IMAGE, "-d", "CPU", "--scale", "inf"], "finite"),
    ("benchmark", ["-m", DIGITS, "-d", "CPU", "-niter", "1", "-i", IMAGE, "--mean_values", "[nan]"], "finite"),
    ("benchmark", ["-m", DIGITS, "-d", "CPU", "-niter", "1", "-i", IMAGE, "--scale_values", "[inf]"], "finite"),
    ("validate", ["-m", DIGITS, "-d", "CPU", "-shape", "[1,1,32,32]", "--atol", "nan"], "NaN is no tolerance"),
    ("validate", ["-m", DIGITS, "-d", "CPU", "-shape", "[1,1,32,32]", "--rtol", "out:nan"], "NaN is no tolerance"),
    ("validate", ["-m", DIGITS, "-d", "CPU", "-shape", "[1,1,32,32]", "--error-quantile", "inf"], "outside [0, 1]"),
    ("tune", ["-m", DIGITS, "-d", "HETERO:CPU", "--save", "OUT", "--atol", "nan"], "NaN is no tolerance"),
]  # fmt: skip


def test_every_real_number_option_of_every_command_is_finite_float():
    """A new option taking a float must use the shared type, and the table above must name it."""
    found = set()
    for name, command in cli.hetero.commands.items():
        for param in command.params:
            if isinstance(param.type, click.types.FloatParamType | click.FloatRange):
                assert isinstance(param.type, FiniteFloat), (name, param.opts)
                found.add((name, param.opts[0]))
    assert found == set(FLOAT_OPTIONS)


@pytest.mark.parametrize("value", NOT_FINITE)
@pytest.mark.parametrize(("command", "option"), list(FLOAT_OPTIONS))
def test_float_options_refuse_numbers_that_are_not_finite(tmp_path, command, option, value):
    args = [str(tmp_path / "out.onnx") if a == "OUT" else a for a in FLOAT_OPTIONS[command, option]]
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, command, *args, option, value)
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert f"'{value}' is not a finite number" in line and option in line, line


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [("benchmark", "-max_irate", "-1"), ("tune", "-t", "0"), ("serve", "--request-timeout", "0")],
)
def test_float_options_keep_their_range(tmp_path, command, option, value):
    args = [str(tmp_path / "out.onnx") if a == "OUT" else a for a in FLOAT_OPTIONS[command, option]]
    result = invoke(cli.hetero, command, *args, option, value)
    assert result.exit_code == 2
    assert "is not in the range" in one_error_line(result)


def test_a_finite_max_irate_is_taken():
    result = invoke(cli.hetero, "benchmark", *FLOAT_OPTIONS["benchmark", "-max_irate"], "-max_irate", "2.5")
    assert result.exit_code == 0, result.output
    assert "at most 2.5 frames start per second" in result.output


@pytest.mark.parametrize(("command", "args", "words"), NUMBERS_IN_TEXT)
def test_numbers_inside_text_options_are_finite_too(tmp_path, command, args, words):
    args = [str(tmp_path / "out.onnx") if a == "OUT" else a for a in args]
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, command, *args)
    assert result.exit_code == 2, result.output
    assert words in one_error_line(result)
