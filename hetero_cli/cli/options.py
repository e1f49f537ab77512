"""The options classify, benchmark and query share, and the parsing of their values: --config and
-load_config's properties, --affinity and --affinity-file's node devices, file options given empty.

Bad values are usage errors (exit status 2), raised before anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from ..app import benchmark as bench
from ..app.paths import file_problem
from ..core import Core
from ..errors import AffinityError, BenchmarkError, ConfigError
from ..graph import Model
from ..placement import config as cfg
from ..placement import devices as registry
from ..placement.device_string import HETERO, is_hetero, is_hetero_name

#: What -load_config and --affinity-file take, in messages.
_CONFIG_FILE = 'a JSON object {device: {key: value}}, e.g. {"CPU": {"INFERENCE_NUM_THREADS": 2}}'
_AFFINITY_FILE = 'a JSON object {node name: device}, e.g. {"conv1": "CPU"}'

#: The keywords of the shared options that ``setup.prepare`` takes (the rest, --debug, the runner reads).
SHARED = ("config", "load_config", "affinity", "affinity_file", "dot_dir", "render")


def named(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """click callback of a file or folder option: the value as given; an empty string is a usage error,
    not "leave it out"."""
    if value is not None and not value.strip():
        raise click.BadParameter("the path is empty: give a file or folder name, or leave the option out")
    return value


def read_json(path: str, option: str, expected: str) -> Any:
    """The JSON document in the file ``path`` that ``option`` names, which should be ``expected`` (the
    words for a message: 'a JSON object {node name: device}'); click.BadParameter (a usage error) when it
    is missing, a folder, no regular file, unreadable, not UTF-8, not JSON or nested too deep to read."""
    problem = file_problem(path)
    if problem:
        raise click.BadParameter(f"{problem}: give a file holding {expected}", param_hint=option)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", param_hint=option) from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path} is not a UTF-8 text file of JSON", param_hint=option) from None
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", param_hint=option
        ) from None
    except (RecursionError, ValueError) as exc:  # nesting Python's parser cannot follow, a 5000-digit int
        why = "its JSON nests too deep to read" if isinstance(exc, RecursionError) else "a number too long"
        raise click.BadParameter(
            f"{path} is not valid for {option} ({why}): it should hold {expected}", param_hint=option
        ) from None


def parse_config_options(values: Iterable[str]) -> list[tuple[str | None, str, str]]:
    """``--config KEY=VALUE`` / ``DEVICE:KEY=VALUE`` as (device or None, key, value); click.BadParameter
    for a value of neither form."""
    out = []
    for text in values:
        left, sep, value = text.partition("=")
        device, colon, key = left.partition(":")
        if not colon:
            device, key = "", left
        if not sep or not key.strip() or (colon and not device.strip()):
            raise click.BadParameter(
                f"{text!r}: write KEY=VALUE for HETERO's own keys or DEVICE:KEY=VALUE for one device's, "
                f"e.g. --config CPU:INFERENCE_NUM_THREADS=2",
                param_hint="--config",
            )
        out.append((device.strip() or None, key.strip(), value.strip()))
    return out


def read_config_file(path: str) -> dict[str, Any]:
    """-load_config: JSON ``{device: {key: value}}`` (``HETERO`` for HETERO's own keys); ConfigError for
    JSON of another shape."""
    doc = read_json(path, "-load_config", _CONFIG_FILE)
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        raise ConfigError(f"-load_config {path}: expected {_CONFIG_FILE}")
    return doc


def apply_config(
    core: Core, device: str, loaded: Mapping[str, Any], options: Sequence[tuple[str | None, str, str]]
) -> None:
    """Set -load_config's then --config's properties on ``core`` (the command line wins); a key without a
    device goes to ``device`` unless it is one of HETERO's own. Raises ConfigError for a bad key or value."""
    plain_device = None if is_hetero(device) else device.strip()
    for name, values in loaded.items():
        if not isinstance(values, Mapping):
            _check_not_a_device(name, values)
        if isinstance(values, Mapping) and name.strip().upper() not in cfg.HETERO_KEYS:
            if is_hetero_name(name.strip()):
                core.set_property(HETERO, dict(values))
            else:
                core.set_property(name, {ep_spelling(name, k): v for k, v in values.items()})
        else:
            _set_one(core, plain_device, None, name, values)
    for dev, key, value in options:
        _set_one(core, plain_device, dev, key, value)


def _check_not_a_device(name: str, value: Any) -> None:
    """ConfigError where -load_config gives a device (HETERO or any known one) a value that is no object
    of key/values (``{"OPENVINO": null}``): a device's configuration is such an object."""
    if is_hetero_name(name.strip()):
        raise ConfigError(
            f'-load_config: "HETERO" takes an object of HETERO\'s own keys, such as '
            f'{{"HETERO": {{"PERF_COUNT": "YES"}}}}, not {json.dumps(value)[:40]}'
        )
    if registry.canonical_name(name) is not None:
        raise ConfigError(
            f'-load_config: "{name.strip()}" is a device, so its configuration must be an object of '
            f'key/values, such as {{"{name.strip()}": {{"KEY": "VALUE"}}}}, not {json.dumps(value)[:40]}'
        )


def ep_spelling(device: str, key: str) -> str:
    """``key`` for ``device`` in its EP's spelling where OpenVINO's differs only in case: OpenVINO's
    ``NUM_STREAMS`` (benchmark_app's -load_config files) is the OpenVINO EP's ``num_streams``. Other keys,
    and names of no known device, as given (the configuration reports those)."""
    name = registry.canonical_name(device)
    if name is None or key in cfg.NAMED_KEYS or key.upper() in cfg.NAMED_KEYS:
        return key
    options = registry.lookup(name).kind.provider_option_names
    if key in options:
        return key
    return next((o for o in options if o.lower() == key.lower()), key)


def _set_one(core: Core, plain_device: str | None, dev: str | None, key: str, value: Any) -> None:
    if dev is not None and not is_hetero_name(dev):
        core.set_property(dev, {ep_spelling(dev, key): value})
    elif dev is None and plain_device is not None and key.upper() not in cfg.HETERO_KEYS:
        core.set_property(plain_device, {ep_spelling(plain_device, key): value})
    else:
        core.set_property(HETERO, {key: value})


def read_affinities(values: Iterable[str], path: str | None) -> dict[str, str]:
    """``--affinity-file`` (JSON {node: device}) then ``--affinity NODE=DEVICE`` (later wins), unchecked
    against the model; AffinityError for a file of another shape, click.BadParameter for a bad option."""
    out: dict[str, str] = {}
    if path:
        doc = read_json(path, "--affinity-file", _AFFINITY_FILE)
        if not isinstance(doc, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
        ):
            raise AffinityError(
                f"--affinity-file {path}: expected {_AFFINITY_FILE} (hetero query --save writes a model with "
                "them instead)"
            )
        out.update(doc)
    for text in values:
        node, sep, dev = text.rpartition("=")
        if not sep or not node.strip() or not dev.strip():
            raise click.BadParameter(
                f"{text!r}: write NODE=DEVICE, e.g. --affinity conv1=CPU", param_hint="--affinity"
            )
        out[node.strip()] = dev.strip()
    return out


#: --int-range: every command that makes random inputs (benchmark, validate, tune) takes it
int_range_option = click.option(
    "--int-range",
    "int_range",
    multiple=True,
    metavar="NAME:LO,HI",
    help="Draw integer input NAME's random data from LO..HI (repeatable; default: within what the model "
    "indexes with it, masks all ones, else 0..9).",
)


def int_ranges(
    model: Model, values: Sequence[str], with_files: Iterable[str] = ()
) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """--int-range's values as {input: (low, high)}, and {input: the range its random integers are drawn
    from, in words} for each integer input that gets random data (not ``with_files``, the inputs given
    data). BenchmarkError (a usage error) for a bad value, or one naming an input given data."""
    given = bench.parse_int_ranges(values, model)
    files = set(with_files)
    for name in given:
        if name in files:
            raise BenchmarkError(
                f"--int-range {name}: -i gives the data of {name!r}; the range is for random data: leave one out"
            )
    types = {i.name: i.dtype for i in model.inputs}
    ranges = bench.integer_ranges(model, given)
    return given, {n: bench.range_text(types[n], r) for n, r in ranges.items() if n not in files}


def shared(values: Mapping[str, Any]) -> dict[str, Any]:
    """The shared options' values among a command's keyword arguments, as ``setup.prepare`` takes them."""
    return {k: values[k] for k in SHARED}


#: --debug, as every command and the ``hetero`` group take it
debug_option = click.option(
    "--debug", is_flag=True, help="Show Python tracebacks on errors, and debug lines."
)


def config_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with --config and -load_config: among the shared options, and tune's own."""
    func = click.option(
        "-load_config",
        "--load-config",
        "load_config",
        metavar="FILE",
        callback=named,
        help='JSON {"DEVICE": {"KEY": "VALUE"}} of configuration ("HETERO" for its own keys); options win.',
    )(func)
    return click.option(
        "--config",
        "config",
        multiple=True,
        metavar="[DEVICE:]KEY=VALUE",
        help="HETERO's own key (KEY=VALUE) or one device's (DEVICE:KEY=VALUE); repeatable.",
    )(func)


def shared_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with the options classify, benchmark and query have in common."""
    decorators = [
        click.option(
            "--affinity",
            "affinity",
            multiple=True,
            metavar="NODE=DEVICE",
            help="Pin a node to a device (repeatable); other nodes keep the model's or the automatic affinity.",
        ),
        click.option(
            "--affinity-file",
            metavar="FILE",
            callback=named,
            help='JSON {"node": "DEVICE"} of affinities (--affinity wins over it).',
        ),
        config_options,
        click.option(
            "--dot-dir",
            metavar="DIR",
            callback=named,
            help="Write hetero_affinity_<model>.dot and hetero_subgraphs_<model>.dot into DIR.",
        ),
        click.option(
            "--render",
            type=click.Choice(["svg", "png"]),
            help="Render the .dot files with Graphviz beside them (into --dot-dir, else here).",
        ),
        debug_option,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func
