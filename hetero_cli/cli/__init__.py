"""The command line, in OpenVINO's sample conventions, over hetero-cli's public API.

    hetero classify | benchmark | query | devices
    hello_classification MODEL IMAGE DEVICE        (= hetero classify)
    hello_query_device                             (= hetero devices)

Errors print one line on stderr, ``[ ERROR ] what is wrong: what would fix it``, and exit with 2 for usage
errors (bad option or file argument, malformed device string, unknown device, config key or affinity; a
model or image that cannot be read or used) or 1 for failures at run time (no listed device available here,
a subgraph that does not compile or run, a file that cannot be written). ``--debug`` adds the traceback.
Warnings from the library (logger "hetero_cli") print as ``[ WARNING ] ...`` on stderr, once each.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import logging
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..app import benchmark as bench
from ..app import image
from ..core import Core
from ..errors import (
    AffinityError,
    ConfigError,
    DeviceError,
    HeteroError,
    ModelError,
    UnsupportedNodesError,
)
from ..graph import Model, shape_text
from ..placement import config as cfg
from ..placement import device_string, visualize
from ..placement import devices as registry
from ..placement.query import untyped_note
from ..runtime import format_counters, set_log_level

log = logging.getLogger("hetero_cli")

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
REPO = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO / "models" / "digits.onnx"
BENCHMARK_HINT = (
    "This sample is an API example, for any performance measurements please use `hetero benchmark`"
)
PROFILED_RUNS = 10


# --- output --------------------------------------------------------------------------------------------


def info(message: str = "", *, err: bool = False) -> None:
    """One ``[ INFO ]`` line on stdout, as OpenVINO's Python samples print them (on stderr with ``err``,
    where stdout carries something else, such as query's --json)."""
    click.echo(f"[ INFO ] {message}".rstrip(), err=err)


def warn(message: str) -> None:
    """One ``[ WARNING ]`` line on stderr."""
    click.echo(f"[ WARNING ] {message}", err=True)


def step(number: int, text: str) -> None:
    """benchmark_app's step header."""
    click.echo(f"[Step {number}/11] {text}")


class _WarningLines(logging.Handler):
    """Library warnings as ``[ WARNING ] message`` on the current stderr, each distinct message once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = " ".join(record.getMessage().split())
        except Exception:  # a bad log call must not hide the real work
            return
        if message in self.seen:
            return
        self.seen.add(message)
        level = "ERROR" if record.levelno >= logging.ERROR else "WARNING"
        click.echo(f"[ {level} ] {message}", err=True)


# --- errors and exit codes -----------------------------------------------------------------------------


class _Phase:
    """Where a command is: reading what the user gave ("input") or running it ("run")."""

    current = "input"


def running() -> None:
    """Mark the start of the run-time part of a command: device or model errors after it exit with 1."""
    _Phase.current = "run"


class NotClassScoresError(ModelError):
    """The model's output is no class scores (strings, maps, empty): classify cannot use the model given, a
    usage error even when only the inference shows it."""


def _unknown_option(exc: click.UsageError, argv: Sequence[str]) -> str | None:
    """The message for an unknown single-dash option as typed (``-nireqq``), where click, reading it as a
    cluster of short options, names only its first letter (``-n``); None for any other usage error."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or len(exc.option_name) != 2:
        return None
    known = [o for p in exc.ctx.command.params for o in getattr(p, "opts", ()) if o.startswith("-")]
    typed = [
        name
        for name in (a.split("=", 1)[0] for a in argv)
        if name.startswith(exc.option_name)
        and len(name) > 2
        and not name.startswith("--")
        and name not in known
    ]
    if not typed:
        return None
    name = typed[0]
    close = difflib.get_close_matches(name, known, n=1)
    return f"No such option '{name}'" + (f" (did you mean {close[0]}?)" if close else "")


def exit_code(exc: BaseException) -> int:
    """2 for usage errors, 1 for failures at run time."""
    usage = ConfigError | AffinityError | image.ImageError | bench.BenchmarkError | NotClassScoresError
    if isinstance(exc, usage):
        return 2
    if isinstance(exc, DeviceError | ModelError):
        return 2 if _Phase.current == "input" else 1
    return 1


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _NeverRaised(Exception):
    pass


@dataclass
class _Written:
    """What the running command has written, and the folders it created for it: a command that fails
    removes them again, so that it leaves nothing behind (.dot files written before a later usage error).
    Files that were there before the command (``before_writing``) are never removed, even if overwritten."""

    files: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    existing: set[Path] = field(default_factory=set)

    def reset(self) -> None:
        """Forget everything: a new command starts."""
        self.files.clear()
        self.folders.clear()
        self.existing.clear()

    def before_writing(self, path: Path, *, folder: bool) -> None:
        """Before writing ``path`` (a file, or with ``folder`` a folder files go into): note what is
        already there, and the folders the writing is about to create."""
        path = Path(path).absolute()
        if path.is_dir():
            self.existing.update(p for p in path.iterdir() if not p.is_dir())
        elif path.exists():
            self.existing.add(path)
        parent = path if folder else path.parent
        while not parent.exists() and parent != parent.parent:
            self.folders.append(parent)
            parent = parent.parent

    def wrote(self, path: Path) -> None:
        """Note a file written (unless it was there before the command)."""
        path = Path(path).absolute()
        if path not in self.existing:
            self.files.append(path)

    def remove(self) -> None:
        """Remove what was noted (created folders only if empty), then forget it."""
        for path in self.files:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        for folder in sorted(set(self.folders), key=lambda f: len(f.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        self.reset()


written = _Written()


# click >= 8.2 raises this for a group called without a command (8.1 prints the help and exits 0 itself).
_NoArgsIsHelp: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", _NeverRaised)


class _Main:
    """click's main() with hetero-cli's error handling: one line on stderr, exit 2 or 1, tracebacks on --debug."""

    def _command_path(self, argv: Sequence[str], prog_name: str | None) -> str:
        """``hetero classify`` for a usage error click raised without a context (an option missing its
        value): the program, then the first argument that names one of this group's commands."""
        path = prog_name or Path(sys.argv[0]).name or "hetero"
        commands = getattr(self, "commands", {})
        name = next((a for a in argv if a in commands), None)
        return f"{path} {name}" if name else path

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv or bool(os.environ.get("HETERO_DEBUG"))
        _Phase.current = "input"
        # ORT's process-wide logger writes straight to stderr (the OpenVINO EP's "[W:onnxruntime:Default,
        # ...] The input 'x' is not used" lines): noise a user cannot act on; failures still come as
        # exceptions. --debug keeps its warnings.
        set_log_level(debug)
        handler = _WarningLines()
        log.addHandler(handler)
        written.reset()
        code = 1  # until the command returns: anything escaping below counts as a failure
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)  # type: ignore[misc]
            code = rv if isinstance(rv, int) else 0
        except _NoArgsIsHelp as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            code = 0
        except click.UsageError as exc:
            if debug:
                traceback.print_exc()
            path = exc.ctx.command_path if exc.ctx else self._command_path(argv, prog_name)
            message = _one_line(_unknown_option(exc, argv) or exc.format_message()).rstrip(".")
            click.echo(f"[ ERROR ] {message}. See '{path} --help'", err=True)
            code = 2
        except click.ClickException as exc:
            if debug:
                traceback.print_exc()
            click.echo(f"[ ERROR ] {_one_line(exc.format_message())}", err=True)
            code = exc.exit_code or 1
        except (click.Abort, KeyboardInterrupt):
            click.echo("[ ERROR ] interrupted", err=True)
            code = 130
        except HeteroError as exc:
            if debug:
                traceback.print_exc()
            click.echo(f"[ ERROR ] {_one_line(str(exc))}", err=True)
            code = exit_code(exc)
        except BrokenPipeError:
            code = 1
        except OSError as exc:
            if debug:
                traceback.print_exc()
            where = f" {exc.filename}" if exc.filename else ""
            click.echo(f"[ ERROR ] cannot access{where}: {exc.strerror or exc}", err=True)
            code = 1
        except Exception as exc:
            if debug:
                traceback.print_exc()
            click.echo(
                f"[ ERROR ] internal error: {type(exc).__name__}: {_one_line(str(exc))[:300]}. Run again with "
                f"--debug for the traceback, and report it",
                err=True,
            )
            code = 1
        finally:
            log.removeHandler(handler)
            if code != 0:
                written.remove()
        if standalone_mode:
            sys.exit(code)
        return code


class Command(_Main, click.Command):
    """A command with hetero-cli's error handling."""


class Group(_Main, click.Group):
    """A group with hetero-cli's error handling; commands listed in the order they were added."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


# --- parsing the shared options ------------------------------------------------------------------------


def _named(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A file or folder option given as an empty string is a usage error, not "leave it out"."""
    if value is not None and not value.strip():
        raise click.BadParameter("the path is empty: give a file or folder name, or leave the option out")
    return value


def _read_json(path: str, option: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise click.BadParameter(f"{path}: no such file", param_hint=option)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", param_hint=option) from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{path} is not a UTF-8 text file of JSON", param_hint=option) from None
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", param_hint=option
        ) from None


def parse_config_options(values: Iterable[str]) -> list[tuple[str | None, str, str]]:
    """``--config KEY=VALUE`` / ``DEVICE:KEY=VALUE`` as (device or None, key, value)."""
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
    """-load_config: JSON ``{device: {key: value}}`` (``HETERO`` for HETERO's own keys)."""
    doc = _read_json(path, "-load_config")
    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        raise ConfigError(
            f"-load_config {path}: expected a JSON object {{device: {{key: value}}}}, e.g. "
            f'{{"CPU": {{"INFERENCE_NUM_THREADS": 2}}}}'
        )
    return doc


def apply_config(
    core: Core, device: str, loaded: Mapping[str, Any], options: Sequence[tuple[str | None, str, str]]
) -> None:
    """Set -load_config's then --config's properties on ``core`` (the command line wins)."""
    head = device.strip().partition(":")[0].strip().upper()
    plain_device = None if head == "HETERO" else device.strip()
    for name, values in loaded.items():
        if name.strip().upper() == "HETERO" and not isinstance(values, Mapping):
            raise ConfigError(
                f'-load_config: "HETERO" takes an object of HETERO\'s own keys, such as '
                f'{{"HETERO": {{"PERF_COUNT": "YES"}}}}, not {values!r:.40}'
            )
        if isinstance(values, Mapping) and name.strip().upper() not in cfg.HETERO_KEYS:
            if name.strip().upper() == "HETERO":
                core.set_property("HETERO", dict(values))
            else:
                core.set_property(name, dict(values))
        else:
            _set_one(core, plain_device, None, name, values)
    for dev, key, value in options:
        _set_one(core, plain_device, dev, key, value)


def _set_one(core: Core, plain_device: str | None, dev: str | None, key: str, value: Any) -> None:
    if dev is not None and dev.upper() != "HETERO":
        core.set_property(dev, {key: value})
    elif dev is None and plain_device is not None and key.upper() not in cfg.HETERO_KEYS:
        core.set_property(plain_device, {key: value})
    else:
        core.set_property("HETERO", {key: value})


def parse_device(core: Core, device: str) -> device_string.DeviceRequest:
    """The device string, checked now (a usage error) rather than at compile time."""
    return device_string.parse(device, core.get_property("HETERO", cfg.PRIORITIES) or None)


def read_affinities(values: Iterable[str], path: str | None) -> dict[str, str]:
    """``--affinity-file`` (JSON {node: device}) then ``--affinity NODE=DEVICE`` (later wins)."""
    out: dict[str, str] = {}
    if path:
        doc = _read_json(path, "--affinity-file")
        if not isinstance(doc, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in doc.items()
        ):
            raise AffinityError(
                f"--affinity-file {path}: expected a JSON object {{node name: device}}, "
                f'e.g. {{"conv1": "CPU"}} (hetero query --save writes a model with them instead)'
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


def check_affinities(model: Model, affinities: Mapping[str, str]) -> dict[str, str]:
    """Affinities with canonical device names; AffinityError for an unknown node or device."""
    out = {}
    for node, dev in affinities.items():
        if not model.has_node(node):
            sample = ", ".join(n.get_friendly_name() for n in model.get_ops()[:4])
            raise AffinityError(
                f"affinity {node}={dev} names no node of {model.name}: node names are friendly names such as "
                f"{sample} (`hetero query -m MODEL -d DEVICE` lists them all)"
            )
        try:
            out[node] = registry.lookup(dev).name
        except DeviceError:
            raise AffinityError(
                f"affinity {node}={dev} names unknown device {dev!r}: known devices are "
                f"{registry.known_names_text()}"
            ) from None
    return out


def affinities_with_sources(
    core: Core, model: Model, device: str, overrides: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's device and where it came from ("model", "query" or "option"): the model's own
    affinities (manual mode) or the automatic query's, then ``overrides`` (--affinity) on top."""
    if model.affinities():
        base, origin = model.affinities(), "model"
    else:
        base, origin = core.query_model(model, device), "query"
    source = dict.fromkeys(base, origin)
    base.update(overrides)
    source.update(dict.fromkeys(overrides, "option"))
    return base, source


def set_affinities(core: Core, model: Model, device: str, overrides: Mapping[str, str]) -> dict[str, str]:
    """The doc's query-then-fix: start from the model's own affinities, or the automatic query, then override.

    Returns {node: where its affinity came from} ("model", "query" or "option").
    """
    from_model = bool(model.affinities())
    base, source = affinities_with_sources(core, model, device, overrides)
    missing = [n for n in model.get_ops() if n.get_friendly_name() not in base]
    if missing:
        names = ", ".join(f"{n.get_friendly_name()} ({n.get_type_name()})" for n in missing[:6])
        names += " ..." if len(missing) > 6 else ""
        if from_model:
            raise AffinityError(
                f"the model sets affinities for some nodes, so automatic mode is off and every node needs one: "
                f"{len(missing)} node(s) have none ({names}); give them with --affinity NODE=DEVICE, or clear "
                "the model's affinities to use automatic mode"
            )
        cpu_listed = any(d.is_cpu for d in parse_device(core, device).priorities)
        fix = (
            "pin them with --affinity NODE=DEVICE"
            if cpu_listed
            else "add CPU to the device list or pin them with --affinity NODE=CPU"
        )
        raise UnsupportedNodesError(
            f"no device of {device} supports {len(missing)} node(s): {names}; {fix}{untyped_note(model, missing)}"
        )
    model.set_affinities(base)
    return source


@dataclass
class Setup:
    """What the shared options give a command: a configured Core, the model, and the device string."""

    core: Core
    model: Model
    model_path: Path
    device: str
    request: device_string.DeviceRequest
    affinities: dict[str, str]
    dot_dir: Path | None
    render: str | None


def prepare(
    model_path: str | None,
    device: str,
    *,
    config: Sequence[str],
    load_config: str | None,
    affinity: Sequence[str],
    affinity_file: str | None,
    dot_dir: str | None,
    render: str | None,
    perf_count: bool = False,
    announce: bool = True,
) -> Setup:
    """Everything a command reads from the user, checked before anything runs (errors here exit with 2)."""
    options = parse_config_options(config)
    loaded = read_config_file(load_config) if load_config else {}
    affinities_given = read_affinities(affinity, affinity_file)
    if model_path is not None and not model_path.strip():
        raise click.UsageError(
            "the model path is empty: give an ONNX file, or leave MODEL (-m) out for models/digits.onnx"
        )
    path = Path(model_path) if model_path is not None else default_model()
    core = Core()
    apply_config(core, device, loaded, options)
    if perf_count:
        core.set_property("HETERO", {cfg.PERF_COUNT: "YES"})
    dots = dot_folder(core, dot_dir, render)
    request = parse_device(core, device)
    if announce:
        info(f"Reading the model: {path}")
    model = core.read_model(path)
    affinities = check_affinities(model, affinities_given)
    return Setup(core, model, path, device, request, affinities, dots, render)


def default_model() -> Path:
    """The embedded default model (models/digits.onnx in the source tree)."""
    if not DEFAULT_MODEL.is_file():
        raise click.UsageError(
            "no model given, and the default models/digits.onnx is not here: give -m MODEL"
        )
    return DEFAULT_MODEL


def _hetero_value(core: Core, key: str) -> Any:
    """HETERO's property ``key`` as --config or -load_config set it, or None."""
    return core.configured("HETERO", key)


def dot_folder(core: Core, dot_dir: str | None, render: str | None) -> Path | None:
    """Where this command writes .dot files (None: it writes none), checked writable now, before any work.

    compile_model's rule, which query follows too: HETERO_DUMP_GRAPH_DOT=YES (which --dot-dir and --render
    set) or OPENVINO_HETERO_VISUALIZE asks for them, into HETERO_DOT_DIR (--dot-dir sets it), else here.
    """
    if dot_dir:
        core.set_property("HETERO", {cfg.DUMP_GRAPH_DOT: "YES", cfg.DOT_DIR: dot_dir})
    elif render:
        core.set_property("HETERO", {cfg.DUMP_GRAPH_DOT: "YES"})
    if render and shutil.which("dot") is None:
        raise click.BadParameter(
            "Graphviz is not installed (no 'dot' on PATH): install it (e.g. apt-get install graphviz), or "
            "leave --render out",
            param_hint="--render",
        )
    asked = cfg.parse_bool(cfg.DUMP_GRAPH_DOT, _hetero_value(core, cfg.DUMP_GRAPH_DOT) or False)
    if not visualize.wanted(asked):
        return None
    folder = _hetero_value(core, cfg.DOT_DIR)
    if folder:
        option = "--dot-dir" if dot_dir else cfg.DOT_DIR
        _check_writable(str(folder), option, folder=True)
        return Path(folder)
    why = "--render" if render else (cfg.DUMP_GRAPH_DOT if asked else visualize.ENV)
    _check_current_directory(f".dot files ({why})", "--dot-dir")
    return Path.cwd()


def compile_setup(setup: Setup) -> Any:
    """Apply affinities and compile, printing each subgraph; run-time phase from here on."""
    running()
    if setup.affinities and not setup.request.hetero:
        warn(f"--affinity only applies to HETERO devices; {setup.request} runs every node")
    elif setup.affinities:
        set_affinities(setup.core, setup.model, setup.device, setup.affinities)
    if setup.dot_dir is not None:
        written.before_writing(setup.dot_dir, folder=True)
    compiled = setup.core.compile_model(setup.model, setup.device)
    for sub in compiled.subgraphs:
        info(f"  {sub.description}")
    if compiled.one_session:
        info(
            f"  the {len(compiled.subgraphs)} subgraphs run in one ONNX Runtime session: the query's, which "
            "placed every node as this plan does (PERFORMANCE_HINT=THROUGHPUT gives each its own)"
        )
    report_dots(compiled.dot_files, setup.render)
    return compiled


def report_dots(paths: Sequence[Path], render: str | None, *, err: bool = False) -> None:
    """Name the .dot files this command wrote, however they were asked for, rendering them if asked; a
    failure later in the command removes them again (``written``)."""
    for path in paths:
        written.wrote(path)
        info(f"Wrote {path}", err=err)
        if render:
            out = visualize.render(path, render)
            written.wrote(out)
            info(f"Rendered {out}", err=err)


def shared_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options classify, benchmark and query have in common."""
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
            callback=_named,
            help='JSON {"node": "DEVICE"} of affinities (--affinity wins over it).',
        ),
        click.option(
            "--config",
            "config",
            multiple=True,
            metavar="[DEVICE:]KEY=VALUE",
            help="HETERO's own key (KEY=VALUE) or one device's (DEVICE:KEY=VALUE); repeatable.",
        ),
        click.option(
            "-load_config",
            "--load-config",
            "load_config",
            metavar="FILE",
            callback=_named,
            help='JSON {"DEVICE": {"KEY": "VALUE"}} of configuration ("HETERO" for its own keys); options win.',
        ),
        click.option(
            "--dot-dir",
            metavar="DIR",
            callback=_named,
            help="Write hetero_affinity_<model>.dot and hetero_subgraphs_<model>.dot into DIR.",
        ),
        click.option(
            "--render",
            type=click.Choice(["svg", "png"]),
            help="Render the .dot files with Graphviz beside them (into --dot-dir, else here).",
        ),
        click.option("--debug", is_flag=True, help="Show Python tracebacks on errors."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


# --- hetero classify / hello_classification ------------------------------------------------------------


def _positional(
    positional: Sequence[str], model: str | None, image_path: str | None, device: str | None
) -> tuple[str | None, str, str]:
    fields = {"model": model, "image": image_path, "device": device}
    rest = list(positional)
    for name in fields:
        if fields[name] is None and rest:
            fields[name] = rest.pop(0)
    if rest:
        raise click.UsageError(
            f"unexpected extra argument(s) {' '.join(rest)!r}: give MODEL IMAGE DEVICE, or -m/-i/-d"
        )
    if not fields["image"]:
        raise click.UsageError("no image given: hello_classification MODEL IMAGE DEVICE, or -i IMAGE")
    return fields["model"], str(fields["image"]), "CPU" if fields["device"] is None else fields["device"]


def read_labels(path: str | None, model: Model, model_path: Path) -> list[str] | None:
    """--labels FILE, else <model stem>.labels beside the model, else the metadata's "labels", else none."""
    candidate = Path(path) if path else model_path.with_suffix(".labels")
    if path and not candidate.is_file():
        raise click.BadParameter(f"{path}: no such file", param_hint="--labels")
    if candidate.is_file():
        try:
            return [line.strip() for line in candidate.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {candidate}: {exc}", param_hint="--labels") from None
    meta = image.metadata(model).get("labels")
    return [s.strip() for s in meta.split(",")] if meta else None


def top_results(probs: np.ndarray, top: int, labels: Sequence[str] | None) -> list[str]:
    """hello_classification's table: header, dashes as long as the header, one row per class (7 decimals)."""
    order = np.argsort(-probs, kind="stable")[:top]
    header = "class_id probability" + (" label" if labels else "")
    lines = [header, "-" * len(header)]
    for class_id in order:
        row = f"{class_id:<8} {probs[class_id]:.7f}"
        if labels:
            label = labels[class_id] if class_id < len(labels) else ""
            row = f"{row:<20} {label}"
        lines.append(row.rstrip())
    return lines


def check_classifier(path: Path, model: Model) -> None:
    """A usage error, before anything runs, for a model whose outputs cannot be class scores as declared:
    several outputs, or one of strings (labels) or other non-numbers."""
    if len(model.outputs) != 1:
        raise NotClassScoresError(
            f"{path} has {len(model.outputs)} outputs: classification needs a model with one output of class "
            f"scores"
        )
    declared = model.outputs[0]
    if declared.dtype is not None and declared.dtype.kind not in "biuf":
        raise NotClassScoresError(_not_scores(path, declared.name, _kind_text(declared.dtype, None)))


def class_scores(path: Path, declared: Any, output: Any) -> np.ndarray:
    """The first image's class scores in the model's output, flattened to float64; a usage error when the
    output is no numbers (strings, maps) or is empty, which only the inference may show."""
    try:
        scores = np.asarray(output)
    except ValueError:  # ragged sequences
        raise NotClassScoresError(_not_scores(path, declared.name, "a ragged sequence")) from None
    if scores.dtype.kind not in "biuf":
        first = scores.flat[0] if scores.size else None
        raise NotClassScoresError(_not_scores(path, declared.name, _kind_text(scores.dtype, first)))
    scores = scores[0] if scores.ndim >= 2 and len(scores) else scores
    if scores.size == 0:
        raise NotClassScoresError(
            _not_scores(path, declared.name, f"no values (shape {shape_text(np.shape(output))})")
        )
    return scores.reshape(-1).astype(np.float64)


def _kind_text(dtype: np.dtype, first: Any) -> str:
    """What an output holds, for a message: strings, maps, or its numpy type."""
    if dtype.kind in "US" or (dtype.kind == "O" and (first is None or isinstance(first, str | bytes))):
        return "strings"
    if isinstance(first, Mapping):
        return "maps"
    return f"values of type {dtype}"


def _not_scores(path: Path, name: str, what: str) -> str:
    return (
        f"{path}'s output {name!r} holds {what}, not numeric class scores: classification needs a model whose one "
        f"output holds a score per class (hetero benchmark runs any model)"
    )


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Classify an image, like OpenVINO's hello_classification.",
)
@click.argument("positional", nargs=-1, metavar="[MODEL] [IMAGE] [DEVICE]")
@click.option("-m", "--model", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option("-i", "--image", "image_path", metavar="IMAGE", help="Image file: JPEG, PNG, BMP...")
@click.option(
    "-d", "--device", metavar="DEVICE", help="CPU, OPENVINO, GPU or HETERO:<dev>,<dev>,... (default CPU)."
)
@click.option(
    "--labels", metavar="FILE", help="Class names, one a line (default: <model>.labels beside the model)."
)
@click.option(
    "-nt", "--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many classes."
)
@click.option(
    "-pc", "--perf-counts", "perf_counts", is_flag=True, help="Print per-subgraph performance counters."
)
@click.option(
    "--mean", metavar="V[,V,V]", help="Subtract from pixel values 0..255 (overrides the model's metadata)."
)
@click.option("--scale", metavar="V[,V,V]", help="Then divide by this (overrides the model's metadata).")
@click.option("--layout", type=click.Choice(["NCHW", "NHWC"], case_sensitive=False), help="Input layout.")
@click.option(
    "--color", type=click.Choice(["GRAY", "RGB", "BGR"], case_sensitive=False), help="Channel order."
)
@click.option(
    "--invert/--no-invert", default=None, help="Invert the image (default: as the model's metadata wants)."
)
@shared_options
def classify(
    positional: tuple[str, ...],
    model: str | None,
    image_path: str | None,
    device: str | None,
    labels: str | None,
    top: int,
    perf_counts: bool,
    mean: str | None,
    scale: str | None,
    layout: str | None,
    color: str | None,
    invert: bool | None,
    **shared: Any,
) -> None:
    """Classify IMAGE with MODEL on DEVICE and print the top classes, like OpenVINO's hello_classification.

    \b
      hello_classification models/digits.onnx samples/images/digit_3.png HETERO:GPU,CPU
      hello_classification -m models/digits.onnx -i samples/images/digit_3.png -d HETERO:GPU,OPENVINO,CPU -pc
    """
    model_arg, image_arg, device_arg = _positional(positional, model, image_path, device)
    info("Creating hetero-cli Core")
    setup = prepare(model_arg, device_arg, perf_count=perf_counts, **_shared(shared))
    prep = image.preprocessing(setup.model, mean=mean, scale=scale, layout=layout, color=color, invert=invert)
    picture = image.read(image_arg)
    tensor = image.to_tensor(picture, prep)
    names = read_labels(labels, setup.model, setup.model_path)
    check_classifier(setup.model_path, setup.model)
    note = ", inverted" if image.inverted(picture, prep) else ""
    info(f"Preprocessing: {picture.width}x{picture.height} {picture.mode} -> {prep.describe()}{note}")
    info(f"Loading the model to {setup.device}")
    compiled = compile_setup(setup)
    info("Starting inference in synchronous mode")
    request = compiled.create_infer_request()
    if perf_counts:
        request.infer({prep.input.name: tensor})  # warm-up: the counters below are a second, warm run
    results = request.infer({prep.input.name: tensor})
    probs = class_scores(setup.model_path, setup.model.outputs[0], next(iter(results.values())))
    info(f"Image path: {image_arg}")
    info(f"Top {min(top, probs.size)} results:")
    for line in top_results(probs, top, names):
        info(line)
    info()
    if perf_counts:
        info("Performance counters (of a second inference; the first one warmed up):")
        click.echo(format_counters(request.get_profiling_info()))
        info()
    info(BENCHMARK_HINT)


def _shared(shared: Mapping[str, Any]) -> dict[str, Any]:
    return {k: shared[k] for k in ("config", "load_config", "affinity", "affinity_file", "dot_dir", "render")}


# --- hetero benchmark ----------------------------------------------------------------------------------


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Measure latency and throughput, like benchmark_app.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option(
    "-d",
    "device",
    default="CPU",
    show_default=True,
    metavar="DEVICE",
    help="CPU, OPENVINO, GPU or HETERO:...",
)
@click.option(
    "-i", "inputs", multiple=True, metavar="[NAME:]FILE",
    help="Input data: images, .npy or raw binary files, or folders of them (seeded random data otherwise).",
)  # fmt: skip
@click.option(
    "-shape", "shape", metavar="SHAPE", help="Fill dynamic dimensions: [1,1,32,32] or name[1,1,32,32],..."
)
@click.option(
    "-data_shape", "data_shape", metavar="SHAPE", help="Shape of the data for dynamic inputs (same syntax)."
)
@click.option("-niter", type=click.IntRange(min=1), help="Number of iterations.")
@click.option(
    "-t", "time_s", type=click.IntRange(min=1), help="Seconds to run (default 60 when -niter is not given)."
)
@click.option(
    "-nireq", type=click.IntRange(min=1), help="Number of infer requests (async: run concurrently)."
)
@click.option(
    "-api",
    type=click.Choice(["sync", "async"]),
    default="async",
    show_default=True,
    help="sync: one request.",
)
@click.option("-hint", type=click.Choice(["latency", "throughput", "none"]), help="Performance hint.")
@click.option("-pc", "perf_counts", is_flag=True, help="Print performance counters per infer request.")
@click.option(
    "-pcsort",
    type=click.Choice(["sort", "no_sort", "simple_sort"]),
    help="Print the counters as a table: sort (by real time), no_sort, simple_sort (only the executed).",
)
@click.option(
    "-report_type", type=click.Choice(list(bench.REPORT_TYPES)), help="Write benchmark_app's CSV reports."
)
@click.option(
    "-report_folder", metavar="DIR", callback=_named, help="Folder for the reports (default: here)."
)
@click.option("-json_stats", is_flag=True, help="Write the reports as JSON instead of CSV.")
@click.option(
    "-dump_config",
    metavar="FILE",
    callback=_named,
    help="Write the configuration used as JSON {device: {key: value}}.",
)
@click.option(
    "--layout", type=click.Choice(["NCHW", "NHWC"], case_sensitive=False), help="Layout of image inputs."
)
@shared_options
def benchmark(
    model: str | None,
    device: str,
    inputs: tuple[str, ...],
    shape: str | None,
    data_shape: str | None,
    niter: int | None,
    time_s: int | None,
    nireq: int | None,
    api: str,
    hint: str | None,
    perf_counts: bool,
    pcsort: str | None,
    report_type: str | None,
    report_folder: str | None,
    json_stats: bool,
    dump_config: str | None,
    layout: str | None,
    **shared: Any,
) -> None:
    """Measure MODEL on DEVICE the way OpenVINO's benchmark_app does.

    \b
      hetero benchmark -m models/digits.onnx -d HETERO:GPU,OPENVINO,CPU -niter 1000 -pc
    """
    given = _given_on_command_line(click.get_current_context())
    counters = perf_counts or bool(pcsort) or report_type in ("average_counters", "detailed_counters")
    counted_everywhere = counters  # asked on the command line: every device's subgraphs are counted
    if (json_stats or report_folder) and not report_type:
        report_type = "no_counters"
    step(1, "Parsing and validating input arguments")
    _check_report_folder(report_folder, report_type)
    _check_writable(dump_config, "-dump_config", folder=False)
    duration = time_s if time_s is not None else (None if niter else 60)
    if api == "sync" and nireq not in (None, 1):
        warn(f"-api sync uses one infer request; -nireq {nireq} ignored")
        nireq = 1
    step(2, "Loading hetero-cli")
    info(f"hetero-cli {_version()}; devices available here: {', '.join(registry.available_devices())}")
    step(3, "Setting device configuration")
    t0 = time.perf_counter()
    setup = prepare(model, device, announce=False, **_shared(shared))
    read_ms = (time.perf_counter() - t0) * 1000.0
    hint_given = hint is not None or _configured(setup.core, cfg.PERFORMANCE_HINT) is not None
    hint, nireq = _hint_and_requests(setup, hint, api, nireq)
    if not perf_counts and _profiling_configured(setup):
        perf_counts = counters = True  # PERF_COUNT=YES in a config prints the counters, as -pc does
    step(4, "Reading model files")
    info(f"Read model {setup.model_path} took {read_ms:.2f} ms")
    _print_io(setup.model)
    step(5, "Resizing model to match image sizes and given batch")
    files, shapes, batch = _input_data(setup.model, inputs, shape, data_shape, nireq, layout)
    step(7, "Loading the model to the device")
    t0 = time.perf_counter()
    compiled = compile_setup(setup)
    compile_ms = (time.perf_counter() - t0) * 1000.0
    info(f"Compile model took {compile_ms:.2f} ms")
    step(8, "Querying optimal runtime parameters")
    if not hint_given:
        warn(f"Performance hint was not explicitly specified in command line: it is set to {hint.upper()}")
    _print_runtime_parameters(compiled, nireq)
    step(9, "Creating infer requests and preparing input tensors")
    feeds = bench.input_sets(setup.model, shapes, files, nireq, layout=layout)
    if dump_config:
        _write_json(dump_config, bench.config_document(compiled))
        info(f"Configuration written to {dump_config}")
    planned = bench.planned_iterations(niter, nireq, api)
    if planned != niter:
        info(f"Number of iterations rounded up to {planned} for {nireq} infer requests")
    step(10, f"Measuring performance ({_measuring_text(api, nireq, planned, duration)})")
    if api == "async":
        info(
            f"{nireq} requests in flight on an AsyncInferQueue: each device runs its subgraphs on its own "
            "pipeline thread, so requests overlap across devices"
        )
    result = _measure(compiled, feeds, nireq, api, planned, duration, batch)
    info(f"First inference took {result.first_inference_ms:.2f} ms")
    per_request: list[list[Any]] = []
    history: list[list[Any]] = []
    if counters:
        per_request, history = _profile(setup, feeds, nireq, everywhere=counted_everywhere)
    step(11, "Dumping statistics report")
    if counters and (perf_counts or pcsort):
        for k, infos in enumerate(per_request):
            info(f"Performance counts{' sorted' if pcsort else ''} for {k}-th infer request")
            click.echo(bench.sorted_counters(infos, pcsort) if pcsort else format_counters(infos))
    _print_statistics(compiled, result)
    if report_type:
        _write_statistics(
            report_folder or ".",
            report_type,
            json_stats=json_stats,
            parameters=given,
            configuration=_configuration(compiled, nireq, api),
            results=[
                ("read model time (ms)", read_ms),
                ("compile model time (ms)", compile_ms),
                *_result_rows(result, nireq),
            ],
            per_request=per_request,
            average=bench.average_counters(history) if history else [],
        )


def _hint_and_requests(setup: Setup, hint: str | None, api: str, nireq: int | None) -> tuple[str, int]:
    """The hint (-hint, else a PERFORMANCE_HINT from --config or -load_config, else benchmark_app's default
    for -api) and the number of infer requests, applied to the setup's HETERO config."""
    hint = (
        hint
        or _configured(setup.core, cfg.PERFORMANCE_HINT)
        or ("throughput" if api == "async" else "latency")
    )
    if nireq is None:
        nireq = 1 if api == "sync" or hint == "latency" else max(2, min(4, os.cpu_count() or 1))
    _apply_hint(setup, hint, nireq)
    return hint, nireq


def _input_data(
    model: Model,
    inputs: Sequence[str],
    shape: str | None,
    data_shape: str | None,
    nireq: int,
    layout: str | None,
) -> tuple[dict[str, list[Path]], dict[str, tuple[int, ...]], int]:
    """Steps 5 and 6: the -i files per input, each input's data shape and the batch size, printed."""
    files = bench.parse_input_files(inputs, [i.name for i in model.inputs])
    sizes = bench.image_dims(model, files, layout)
    shapes, notes = bench.data_shapes(model, shape, data_shape, nireq, sizes)
    for note in notes:
        info(note)
    batch = bench.batch_size(shapes)
    info(f"Model batch size: {batch}")
    step(6, "Configuring input of the model")
    bench.check_random_data(model, files)  # before anything is compiled or written
    for name, dims in shapes.items():
        source = f"{len(files[name])} file(s)" if name in files else "seeded random values"
        info(f"    {name}: data {shape_text(dims)} from {source}")
    return files, shapes, batch


def _given_on_command_line(ctx: click.Context) -> list[tuple[str, Any]]:
    """(option, value) for each option given on the command line: the reports' command line parameters."""
    return [
        (p.opts[0], ctx.params[p.name])
        for p in ctx.command.params
        if p.name in ctx.params and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]


def _print_runtime_parameters(compiled: Any, nireq: int) -> None:
    info(f"  EXECUTION_DEVICES: {', '.join(compiled.get_property('EXECUTION_DEVICES'))}")
    info(f"  NUMBER_OF_SUBGRAPHS: {compiled.get_property('NUMBER_OF_SUBGRAPHS')}")
    info(f"  PERFORMANCE_HINT: {compiled.get_property('PERFORMANCE_HINT')}; infer requests: {nireq}")


def _measuring_text(api: str, nireq: int, planned: int | None, duration: int | None) -> str:
    limits = []
    if planned:
        limits.append(f"{planned} iterations")
    if duration:
        limits.append(f"{duration * 1000} ms duration")
    mode = "synchronously" if api == "sync" else "asynchronously"
    return f"Start inference {mode}, {nireq} inference requests, limits: {', '.join(limits)}"


def _print_statistics(compiled: Any, result: Any) -> None:
    info(f"Execution Devices:{compiled.execution_devices}")
    info(f"Count:            {result.count} iterations")
    info(f"Duration:         {result.duration_ms:.2f} ms")
    info("Latency:")
    info(f"   Median:        {result.latency_median_ms:.2f} ms")
    info(f"   Average:       {result.latency_average_ms:.2f} ms")
    info(f"   Min:           {result.latency_min_ms:.2f} ms")
    info(f"   Max:           {result.latency_max_ms:.2f} ms")
    info(f"Throughput:   {result.throughput_fps:.2f} FPS")


def _result_rows(result: Any, nireq: int) -> list[tuple[str, Any]]:
    """The measured loop's rows of benchmark_app's execution results report."""
    return [
        ("first inference time (ms)", result.first_inference_ms),
        ("total execution time (ms)", result.duration_ms),
        ("total number of iterations", result.count),
        ("number of parallel infer requests", nireq),
        ("latency (ms)", result.latency_median_ms),
        ("avg latency", result.latency_average_ms),
        ("min latency", result.latency_min_ms),
        ("max latency", result.latency_max_ms),
        ("throughput", result.throughput_fps),
    ]


def _write_statistics(folder: str, report_type: str, **report: Any) -> None:
    """benchmark_app's statistics reports in ``folder``; a later failure removes them (``written``)."""
    written.before_writing(Path(folder), folder=True)
    for path in bench.write_reports(folder, report_type, **report):
        written.wrote(path)
        info(f"Statistics report is stored to {path}")


def _version() -> str:
    from .. import __version__

    return __version__


def _configuration(compiled: Any, nireq: int, api: str) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("device", compiled.device_name),
        ("EXECUTION_DEVICES", ",".join(compiled.execution_devices)),
        ("NUMBER_OF_SUBGRAPHS", len(compiled.subgraphs)),
        ("PERFORMANCE_HINT", str(compiled.get_property("PERFORMANCE_HINT"))),
        ("api", api),
        ("nireq", nireq),
    ]
    for device, values in bench.config_document(compiled).items():
        for key, value in values.items():
            rows.append((f"{device}: {key}", value))
    return rows


def _profiling_configured(setup: Setup) -> bool:
    """Whether --config or -load_config set PERF_COUNT=YES for HETERO or for a device of the request."""
    devices = ["HETERO", *(dev.name for dev in setup.request.priorities)]
    return any(
        cfg.parse_bool(cfg.PERF_COUNT, _configured(setup.core, cfg.PERF_COUNT, d) or "NO") for d in devices
    )


def _configured(core: Core, key: str, device: str = "HETERO") -> str | None:
    """``device``'s property ``key`` as --config or -load_config set it (lower case), or None."""
    value = core.configured(device, key)
    return None if value is None else str(value).lower()


def _apply_hint(setup: Setup, hint: str, nireq: int) -> None:
    """-hint as HETERO's PERFORMANCE_HINT (none: the config's, else LATENCY); -hint throughput with several
    requests also shares the cores between them, unless threads were set."""
    if hint != "none":
        setup.core.set_property("HETERO", {cfg.PERFORMANCE_HINT: hint.upper()})
    if hint != "throughput" or nireq <= 1:
        return
    cores = os.cpu_count() or 1
    threads = max(1, cores // nireq)
    changed = []
    for dev in setup.request.priorities:
        if dev.kind.family not in ("CPU", "OPENVINO") or not registry.is_available(dev):
            continue
        if setup.core.get_property(dev.name, cfg.NUM_THREADS) in (None, 0, "0"):  # 0: not chosen
            setup.core.set_property(dev.name, {cfg.NUM_THREADS: threads})
            changed.append(dev.name)
    if changed:
        info(
            f"-hint throughput: {nireq} requests share {cores} cores, {cfg.NUM_THREADS}={threads} for {', '.join(changed)}"
        )


def _print_io(model: Model) -> None:
    info("Model inputs:")
    for t in model.inputs:
        info(f"    {t.name} : {t.dtype} / {shape_text(t.shape)}")
    info("Model outputs:")
    for t in model.outputs:
        info(f"    {t.name} : {t.dtype} / {shape_text(t.shape)}")


def _measure(
    compiled: Any, feeds: Any, nireq: int, api: str, niter: int | None, duration: int | None, batch: int
):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    total = float(niter) if niter else float(duration or 1)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("Progress", total=total)

        def update(done: int, elapsed: float) -> None:
            if niter and duration:
                fraction = min(done / niter, elapsed / duration)
            elif niter:
                fraction = done / niter
            else:
                fraction = elapsed / (duration or 1)
            progress.update(task, completed=min(fraction, 1.0) * total)

        return bench.measure(
            compiled,
            feeds,
            nireq=nireq,
            api=api,
            niter=niter,
            duration_s=duration,
            batch=batch,
            on_progress=update,
        )


def _profile(
    setup: Setup, feeds: Sequence[Mapping[str, np.ndarray]], nireq: int, *, everywhere: bool
) -> tuple[list[Any], list[Any]]:
    """Counters from a profiled compile, PROFILED_RUNS inferences per request, run after the measured loop.

    The measured loop runs without the profiler (unless a config turned PERF_COUNT on for it), so -pc does
    not change the numbers it reports. ``everywhere`` (-pc, -pcsort, a counters report) profiles every
    device's subgraphs; else the config's PERF_COUNT stands, so a device's own PERF_COUNT=YES counts only
    that device's subgraphs.
    """
    info(f"Collecting performance counters: {PROFILED_RUNS} profiled inferences per infer request")
    if everywhere:
        setup.core.set_property("HETERO", {cfg.PERF_COUNT: "YES"})
    profiled = setup.core.compile_model(setup.model, setup.device)
    per_request, history = [], []
    for k in range(nireq):
        request = profiled.create_infer_request()
        for _ in range(PROFILED_RUNS):
            request.infer(feeds[k % len(feeds)])
        per_request.append(request.get_profiling_info())
        history += request.get_profiling_history()[1:]  # the first profiled run is a warm-up
    return per_request, history


def _check_writable(path: str | None, option: str, *, folder: bool) -> None:
    """Refuse now an output the command could only fail to write at its end, after the whole run."""
    problem = _unwritable(Path(path), folder=folder) if path else None
    if problem:
        raise click.BadParameter(problem, param_hint=option)


def _unwritable(given: Path, *, folder: bool) -> str | None:
    """Why ``given`` (a folder to write into, or a file) cannot be written, None if it can: missing folders
    on the way are fine (they are created) as long as the nearest existing one is a writable folder."""
    if folder and given.exists() and not given.is_dir():
        return f"cannot write into {given}: it is a file, not a folder"
    if not folder and given.is_dir():
        return f"{given} is a folder: give a file name"
    existing = given if folder else given.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, so {given} cannot be written"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot write into {existing}: permission denied"
    return None


def _check_report_folder(folder: str | None, report_type: str | None) -> None:
    """Refuse now a report folder (-report_folder, else here) the reports could only fail to go into."""
    if not report_type:
        return
    if folder:
        _check_writable(folder, "-report_folder", folder=True)
        return
    _check_current_directory("the reports", "-report_folder")


def _check_current_directory(what: str, option: str) -> None:
    """Refuse now ``what`` going into the current directory where it cannot be written."""
    problem = _unwritable(Path.cwd(), folder=True)
    if problem:
        raise click.UsageError(f"{what} go into the current directory, but {problem}: give {option} DIR")


def _write_json(path: str, doc: Any) -> None:
    """Write ``doc`` as JSON, creating the folders on the way; a later failure removes it (``written``)."""
    written.before_writing(Path(path), folder=False)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
    except OSError as exc:
        raise HeteroError(f"cannot write {path}: {exc.strerror or exc}") from None
    written.wrote(Path(path))


# --- hetero query --------------------------------------------------------------------------------------


def crossing(plan: Any) -> dict[int, tuple[list[str], list[str]]]:
    """{subgraph index: (tensors it receives from another device, tensors it sends to another device)}."""
    out: dict[int, tuple[list[str], list[str]]] = {s.index: ([], []) for s in plan.subgraphs}
    for link in plan.links():
        if link.producer is None:
            continue
        for consumer, dev in zip(link.consumers, link.target_devices, strict=True):
            if dev != link.source_device:
                out[consumer][0].append(link.tensor)
                if link.tensor not in out[link.producer][1]:
                    out[link.producer][1].append(link.tensor)
    return out


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="Show each node's device and the subgraphs; --save them.",
)
@click.option("-m", "model", metavar="MODEL", help="ONNX model (default: models/digits.onnx).")
@click.option("-d", "device", required=True, metavar="DEVICE", help="HETERO:<dev>,<dev>,... or one device.")
@click.option(
    "--save",
    metavar="OUT.onnx",
    callback=_named,
    help="Write the model with these affinities (compile it in manual mode).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (affinities, plan, crossing tensors) instead of tables.",
)
@shared_options
def query(model: str | None, device: str, save: str | None, as_json: bool, **shared: Any) -> None:
    """Query MODEL on DEVICE: each node's device, the subgraphs, the tensors that cross devices.

    \b
      hetero query -m models/digits.onnx -d HETERO:GPU,OPENVINO,CPU
      hetero query -m models/digits.onnx -d HETERO:OPENVINO,CPU --affinity softmax=CPU --save fixed.onnx
    """
    _check_writable(save, "--save", folder=False)
    setup = prepare(model, device, announce=not as_json, **_shared(shared))
    running()
    m = setup.model
    if not as_json:
        info(f"Querying {setup.request} ({_query_mode(setup)})")
    affinities, source = _queried_affinities(setup)
    try:  # affinities set wrong are refused before the table is printed
        if setup.request.hetero and (setup.affinities or m.affinities()):
            set_affinities(setup.core, m, setup.device, setup.affinities)
        plan = setup.core.plan(m, setup.device)
    except UnsupportedNodesError:
        if not as_json:
            _affinity_table(m, affinities, source)  # the table shows which nodes no device takes
        raise
    if as_json:
        doc = {
            "model": str(setup.model_path),
            "device": str(setup.request),
            "affinities": dict(plan.affinities),
            "set_by": {n: source.get(n, "query") for n in plan.affinities},
            "plan": plan.to_dict(),
            "crossing_tensors": plan.crossing_tensors(),
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        _affinity_table(m, affinities, source)
        _subgraph_table(plan, crossing(plan))
        crossing_all = plan.crossing_tensors()
        info(
            f"{len(plan.subgraphs)} subgraph(s) on {', '.join(plan.devices)}; "
            f"{len(crossing_all)} tensor(s) cross devices{': ' + ', '.join(crossing_all) if crossing_all else ''}"
        )
    if setup.dot_dir is not None:
        written.before_writing(setup.dot_dir, folder=True)
        report_dots(visualize.dump(m, plan, setup.dot_dir), setup.render, err=as_json)
    if save:
        _save_query(m, plan, save, setup.request, as_json)


def _query_mode(setup: Setup) -> str:
    """How the query places nodes, for its first line."""
    if not setup.request.hetero:
        return "one device: it runs every node"
    return "manual mode: affinities from the model" if setup.model.affinities() else "automatic mode"


def _queried_affinities(setup: Setup) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's device for the table and who set it: the device alone, the model's (manual mode) or the
    query's (automatic mode), then --affinity's on a HETERO device."""
    m = setup.model
    if not setup.request.hetero:
        if setup.affinities:
            warn(f"--affinity only applies to HETERO devices; {setup.request} runs every node")
        supported = setup.core.query_model(m, setup.device)
        name = setup.request.names[0]
        affinities = {n.get_friendly_name(): name for n in m.get_ops()}
        return affinities, {
            n: "device" if n in supported else "device; unsupported, ORT falls back" for n in affinities
        }
    return affinities_with_sources(setup.core, m, setup.device, setup.affinities)


def _save_query(m: Model, plan: Any, save: str, request: Any, as_json: bool) -> None:
    """--save: the model with the plan's affinities (unless it has its own), folders created on the way."""
    if not m.affinities():
        m.set_affinities(dict(plan.affinities))
    written.before_writing(Path(save).parent, folder=True)  # with any data file saved beside it
    try:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HeteroError(f"cannot write {save}: {exc.strerror or exc}") from None
    m.save(save)
    written.wrote(Path(save))
    # named on stderr under --json, as every file a command writes is
    info(
        f"Saved {save} with these affinities: `hetero benchmark -m {save} -d {request}` runs it as is",
        err=as_json,
    )


def _affinity_table(model: Model, affinities: Mapping[str, str], source: Mapping[str, str]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text(f"Affinities of {model.name}"), box=_box(), show_edge=False, title_justify="left"
    )
    for column in ("#", "node", "op type", "device", "set by"):
        table.add_column(column, overflow="fold")
    for k, node in enumerate(model.get_ops(), 1):
        name = node.get_friendly_name()
        dev = affinities.get(name)
        table.add_row(
            str(k),
            Text(name),
            Text(node.get_type_name()),
            Text(dev or "- (unsupported)"),
            source.get(name, ""),
        )
    _console().print(table)


def _subgraph_table(plan: Any, links: Mapping[int, tuple[list[str], list[str]]]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text("Subgraphs (execution order)"), box=_box(), show_edge=False, title_justify="left"
    )
    for column in (
        "subgraph",
        "device",
        "nodes",
        "tensors in from another device",
        "tensors out to another device",
    ):
        table.add_column(column, overflow="fold")
    for s in plan.subgraphs:
        got, sent = links[s.index]
        table.add_row(
            s.name, s.device, str(len(s.nodes)), Text(", ".join(got) or "-"), Text(", ".join(sent) or "-")
        )
    _console().print(table)


def _box() -> Any:
    from rich import box

    return box.SIMPLE_HEAD


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)  # piped or captured: no folding at 80 columns
    return console


# --- hetero devices / hello_query_device ---------------------------------------------------------------


def _value_text(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


@click.command(
    cls=Command,
    context_settings=CONTEXT,
    short_help="List devices, like hello_query_device.",
)
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
def devices(debug: bool) -> None:
    """Every available device with its execution provider, full name and properties (OpenVINO's
    hello_query_device layout), then the known devices this machine lacks and how to get each."""
    core = Core()
    info("Available devices:")
    for name in core.available_devices:
        info(f"{name} :")
        info("\tSUPPORTED_PROPERTIES:")
        info(f"\t\tFULL_DEVICE_NAME: {core.get_property(name, 'FULL_DEVICE_NAME')}")
        info(f"\t\tEXECUTION_PROVIDER: {core.get_property(name, 'EXECUTION_PROVIDER')}")
        for key in core.get_property(name, "SUPPORTED_PROPERTIES"):
            try:
                value = _value_text(core.get_property(name, key))
            except HeteroError:
                value = "UNSUPPORTED"
            info(f"\t\t{key}: {value}")
        info()
    missing = registry.unavailable_known_devices()
    if missing:
        info("Known devices not available here:")
        for name, reason in missing:
            info(f"{name} : {reason}")
        info()
    info(f"HETERO : combines the devices above, e.g. -d HETERO:{','.join(core.available_devices[::-1])}")
    info(f"\tSUPPORTED_PROPERTIES: {', '.join(cfg.HETERO_KEYS)}")


# --- the group and the console scripts -----------------------------------------------------------------


@click.group(cls=Group, context_settings=CONTEXT, no_args_is_help=True)
@click.version_option(_version(), "--version", prog_name="hetero-cli")
@click.option("--debug", is_flag=True, help="Show Python tracebacks on errors.")
def hetero(debug: bool) -> None:
    """Run ONNX models across devices the way OpenVINO's HETERO device does (ONNX Runtime underneath).

    DEVICE is one device (CPU, OPENVINO, GPU...) or HETERO:<dev>,<dev>,... in priority order: each node
    goes to the first listed device that supports it, unavailable devices are skipped with a warning.
    """


hetero.add_command(classify, "classify")
hetero.add_command(benchmark, "benchmark")
hetero.add_command(query, "query")
hetero.add_command(devices, "devices")

#: console script ``hello_classification``: the same command as ``hetero classify``.
hello_classification = classify
#: console script ``hello_query_device``: the same command as ``hetero devices``.
hello_query_device = devices


def main() -> None:
    """console script ``hetero``."""
    hetero.main(prog_name="hetero")


if __name__ == "__main__":  # pragma: no cover
    main()
