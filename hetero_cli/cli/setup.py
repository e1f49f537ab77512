"""From the shared options to a compiled model: ``prepare`` reads and checks everything the user gave
(a configured Core, the model, the device string, the affinities, where .dot files go) before anything runs;
``compile_setup`` applies the affinities and compiles, the run-time phase of the command."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import click
from click.core import ParameterSource

from .. import data
from ..core import Core
from ..errors import ModelError
from ..graph import Model
from ..placement import affinities as placed
from ..placement import config as cfg
from ..placement import device_string, visualize
from ..runtime import CompiledModel, is_export, unfeedable
from .files import check_current_directory, check_writable, same_file, unwritable
from .options import apply_config, parse_config_options, read_affinities, read_config_file
from .output import info, warn
from .runner import running, written

DEFAULT_MODEL = data.DEFAULT_MODEL


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

    def check_not_read(self, path: str | os.PathLike[str] | None, option: str) -> None:
        """Refuse (a usage error for ``option``) an output ``path`` that names a file the command reads:
        the model given with -m, or a file its weights are read from (external data): writing it would
        destroy the model. Nothing for no path."""
        if not path:
            return
        target = Path(os.path.realpath(path))
        if same_file(target, self.model_path.resolve()):
            what = "the model"
        elif any(same_file(target, f) for f in self.model.data_files):
            what = f"a file the weights of {self.model_path} are in"
        else:
            return
        raise click.BadParameter(
            f"{path} is {what}, which writing it would destroy: give another path", param_hint=option
        )


def prepare(
    model_path: str | None,
    device: str,
    *,
    config: Sequence[str] = (),
    load_config: str | None = None,
    affinity: Sequence[str] = (),
    affinity_file: str | None = None,
    dot_dir: str | None = None,
    render: str | None = None,
    perf_count: bool = False,
    announce: bool = True,
    feeds: bool = True,
) -> Setup:
    """Everything a command reads from the user, checked before anything runs (errors here exit with 2):
    the model at ``model_path`` (default: models/digits.onnx) for ``device``, the shared options' values
    (one left out: none given). Prints the model read unless ``announce`` is off. An export (hetero
    compile's, told by its first bytes) gives its source model, compiled by importing the export on its own
    device string unless -d names another (Core.read_model). With ``feeds`` (a command that runs
    inferences) a model input no data can be fed to (bfloat16, float8) is a ModelError, before any data is
    read."""
    options = parse_config_options(config)
    loaded = read_config_file(load_config) if load_config else {}
    affinities_given = read_affinities(affinity, affinity_file)
    if model_path is not None and not model_path.strip():
        raise click.UsageError(
            "the model path is empty: give an ONNX file, or leave MODEL (-m) out for models/digits.onnx"
        )
    path = Path(model_path) if model_path is not None else default_model()
    core = Core()
    exported = core.read_model(path) if is_export(path) else None
    if exported is not None:
        device = _export_device(core, exported, device, affinities_given)
    apply_config(core, device, loaded, options)
    if perf_count:
        core.set_property("HETERO", {cfg.PERF_COUNT: "YES"})
    dots = dot_folder(core, dot_dir, render)
    # checked now (a usage error), not at compile time; HETERO alone takes its priorities from the config
    request = device_string.parse(device, core.get_property("HETERO", cfg.PRIORITIES) or None)
    if announce:
        info(f"Reading the model: {path}")
    model = exported if exported is not None else core.read_model(path)
    if feeds:
        check_feedable(model)
    if dots is not None:
        check_dot_files(model, dots, render)
    affinities = placed.check_affinities(model, affinities_given)
    return Setup(core, model, path, device, request, affinities, dots, render)


def _export_device(core: Core, model: Model, device: str, affinities: Mapping[str, str]) -> str:
    """The device string a command runs an export on: the one given with -d, else the export's own (its
    split, imported as it was compiled). A usage error for --affinity, which an export's fixed placement
    cannot take."""
    if affinities:
        raise click.UsageError(
            "--affinity and --affinity-file place the nodes of an ONNX model; an export's placement is fixed: "
            "give the .onnx model, or export again with hetero compile --affinity"
        )
    context = click.get_current_context(silent=True)
    source = context.get_parameter_source("device") if context is not None else None
    given = source is not None and source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
    return device if given else core.exported_device(model) or device


def check_feedable(model: Model) -> None:
    """ModelError for an input of ``model`` no data can be fed to (runtime.unfeedable): the command would
    otherwise read its data, compile and fail at the first inference."""
    for tensor in model.inputs:
        reason = unfeedable(tensor.name, tensor.dtype)
        if reason:
            raise ModelError(reason)


def default_model() -> Path:
    """The embedded default model (hetero_cli/data/digits.onnx, which models/digits.onnx in the source tree
    links to); a usage error where an install lost it."""
    if not DEFAULT_MODEL.is_file():
        raise click.UsageError(
            f"no model given, and the embedded default {DEFAULT_MODEL} is missing (a damaged install: "
            "reinstall hetero-cli): give -m MODEL"
        )
    return DEFAULT_MODEL


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
    asked = cfg.parse_bool(cfg.DUMP_GRAPH_DOT, core.configured("HETERO", cfg.DUMP_GRAPH_DOT) or False)
    if not visualize.wanted(asked):
        return None
    folder = core.configured("HETERO", cfg.DOT_DIR)
    if folder:
        option = "--dot-dir" if dot_dir else cfg.DOT_DIR
        check_writable(str(folder), option, folder=True)
        return Path(folder)
    why = "--render" if render else (cfg.DUMP_GRAPH_DOT if asked else visualize.ENV)
    check_current_directory(f".dot files ({why})", "--dot-dir")
    return Path.cwd()


def check_dot_files(model: Model, folder: Path, render: str | None) -> None:
    """Refuse now (a usage error) .dot files, or their renderings, that could only fail to be written after
    the compile: a folder in a file's place, a file this user cannot write."""
    for dot in visualize.dot_paths(model, folder):
        for path in (dot, dot.with_suffix(f".{render}")) if render else (dot,):
            if path.is_dir():
                problem = f"{path} is a folder, where the command writes a file: remove it, or give another"
                raise click.UsageError(f"{problem} --dot-dir")
            problem = unwritable(path, folder=False, fix="give another --dot-dir")
            if problem:
                raise click.UsageError(problem)


def affinities_with_sources(setup: Setup) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's device and where it came from ("model", "query" or "option"): the model's own
    affinities or the automatic query's, then --affinity's on top (placement.affinities)."""
    return placed.affinities_with_sources(setup.model, setup.affinities, lambda: _query(setup))


def set_affinities(setup: Setup) -> dict[str, str]:
    """Set every node's affinity on the setup's model, --affinity's on top of the model's or the query's;
    returns {node: where its affinity came from}. Raises AffinityError or UnsupportedNodesError."""
    return placed.set_affinities(
        setup.model,
        setup.affinities,
        lambda: _query(setup),
        device=setup.device,
        priorities=setup.request.priorities,
    )


def warn_unused_affinities(setup: Setup) -> None:
    """Warn that --affinity has no effect where the device is no HETERO one (it runs every node)."""
    if setup.affinities and not setup.request.hetero:
        warn(f"--affinity only applies to HETERO devices; {setup.request} runs every node")


def _query(setup: Setup) -> dict[str, str]:
    return setup.core.query_model(setup.model, setup.device)


def start_running(setup: Setup) -> None:
    """The run-time phase from here on: --affinity's nodes set on the model (or a warning where they do
    not apply), and the .dot folder and files noted among what the command writes (now: a compile inside
    the library, validate's, draws them, and an interruption after it must remove them too)."""
    running()
    if setup.request.hetero and setup.affinities:
        set_affinities(setup)
    else:
        warn_unused_affinities(setup)
    if setup.dot_dir is not None:
        written().before_writing(setup.dot_dir, folder=True)
        for path in visualize.dot_paths(setup.model, setup.dot_dir):
            written().wrote(path)


def compile_setup(setup: Setup) -> CompiledModel:
    """Apply affinities and compile, printing each subgraph; run-time phase from here on."""
    start_running(setup)
    compiled = setup.core.compile_model(setup.model, setup.device)
    for sub in compiled.subgraphs:
        info(f"  {sub.description}")
    if compiled.plan.folded:
        info(f"  {compiled.plan.folded_line()}")
    if compiled.one_session:
        info(
            f"  the {len(compiled.subgraphs)} subgraphs run in one ONNX Runtime session: the query's, which "
            "placed every node as this plan does (PERFORMANCE_HINT=THROUGHPUT gives each its own)"
        )
    report_dots(compiled.dot_files, setup.render)
    return compiled


def report_dots(paths: Sequence[Path], render: str | None, *, err: bool = False) -> None:
    """Name the .dot files this command wrote, however they were asked for, rendering them if asked (as
    ``render``: svg or png); a failure later in the command removes them again (``written``)."""
    for path in paths:
        written().wrote(path)
        info(f"Wrote {path}", err=err)
        if render:
            out = visualize.render(path, render)
            written().wrote(out)
            info(f"Rendered {out}", err=err)
