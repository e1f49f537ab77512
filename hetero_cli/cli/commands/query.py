"""``hetero query``: each node's device and where it came from, the subgraphs, the tensors that cross
devices, as tables or --json; --save writes the model with these affinities."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from ...errors import UnsupportedNodesError
from ...graph import Model
from ...placement import device_string, visualize
from ...placement.affinities import mark_automatic
from ...placement.partition import Plan
from ..files import benchmark_line, check_writable, save_model
from ..options import named, shared, shared_options
from ..output import console, info, new_table
from ..progress import busy
from ..runner import CONTEXT, Command, running, written
from ..setup import (
    Setup,
    affinities_with_sources,
    prepare,
    report_dots,
    set_affinities,
    warn_unused_affinities,
)


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
    callback=named,
    help="Write the model with these affinities (compile it in manual mode).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (affinities, plan, crossing tensors) instead of tables.",
)
@click.option(
    "--summary",
    is_flag=True,
    help="Only the subgraphs and the tensors crossing devices, not every node's row.",
)
@click.option(
    "--compile",
    "compile_too",
    is_flag=True,
    help="Compile the plan too, and show it as compiled: where HETERO_FALLBACK moved a subgraph that failed.",
)
@shared_options
def query(
    model: str | None,
    device: str,
    save: str | None,
    as_json: bool,
    summary: bool,
    compile_too: bool,
    **options: Any,
) -> None:
    """Query MODEL on DEVICE: each node's device, the subgraphs, the tensors that cross devices.

    \b
      hetero query -m models/digits.onnx -d HETERO:GPU,OPENVINO,CPU
      hetero query -m models/digits.onnx -d HETERO:OPENVINO,CPU --affinity softmax=CPU --save fixed.onnx
      hetero query -m model.onnx -d HETERO:OPENVINO,CPU --compile --save works.onnx
      hetero query -m densenet.onnx -d HETERO:OPENVINO,CPU --summary
    """
    check_writable(save, "--save", folder=False)
    setup = prepare(model, device, announce=not as_json, feeds=False, **shared(options))
    setup.check_not_read(save, "--save")
    running()
    m = setup.model
    if not as_json:
        info(f"Querying {setup.request} ({_query_mode(setup)})")
    with busy(f"Querying {setup.request} (a probe session per device)"):
        affinities, source = _queried_affinities(setup)
    try:  # affinities set wrong are refused before the table is printed
        if setup.request.hetero and (setup.affinities or m.affinities()):
            set_affinities(setup)
        with busy("Partitioning the model"):
            plan = setup.core.plan(m, setup.device)
        if compile_too:
            with busy("Compiling the plan (HETERO_FALLBACK moves what a device fails)"):
                plan = _compiled_plan(setup, affinities, source)
    except UnsupportedNodesError:
        if not as_json:
            _affinity_table(m, affinities, source, summary)  # the table shows which nodes no device takes
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
        if not summary:
            _affinity_table(m, affinities, source)
        _subgraph_table(plan, plan.crossing_by_subgraph())
        crossing_all = plan.crossing_tensors()
        on = f" on {', '.join(plan.devices)}" if plan.devices else " (the model has no nodes to run)"
        info(
            f"{len(plan.subgraphs)} subgraph(s){on}; "
            f"{len(crossing_all)} tensor(s) cross devices{': ' + ', '.join(crossing_all) if crossing_all else ''}"
        )
        if len(plan.subgraphs) > 1:
            info(f"Schedule: {setup.core.schedule(plan, setup.device, model=m).describe()}")
        if plan.folded:
            info(plan.folded_line())
        for name, names in m.index.renamed.items():
            info(
                f"{len(names)} nodes named {name!r} in the model are shown as {', '.join(names)} (node names "
                f"must be unique here): --affinity {name}=DEVICE sets them all"
            )
    if setup.dot_dir is not None:
        written().before_writing(setup.dot_dir, folder=True)
        together = (
            setup.core.schedule(plan, setup.device, model=m).side_by_side if len(plan.subgraphs) > 1 else ()
        )
        report_dots(visualize.dump(m, plan, setup.dot_dir, together), setup.render, err=as_json)
    if save:
        moved = any(how.startswith("fallback") for how in source.values())
        automatic = setup.request.hetero and not setup.affinities and not moved
        _save_query(m, plan, save, setup.request, as_json, automatic)


def _compiled_plan(setup: Setup, affinities: dict[str, str], source: dict[str, str]) -> Plan:
    """--compile: the plan as compile_model leaves it; nodes HETERO_FALLBACK moved are marked in
    ``affinities`` and ``source``."""
    compiled = setup.core.compile_model(setup.model, setup.device)
    for move in compiled.moves:
        for name in move.nodes:
            affinities[name] = move.to
            source[name] = f"fallback from {move.left}"
    return compiled.plan


def _query_mode(setup: Setup) -> str:
    """How the query places nodes, for its first line."""
    if not setup.request.hetero:
        return "one device: it runs every node"
    if setup.model.affinities():
        given = " and --affinity" if setup.affinities else ""
        return f"manual mode: affinities from the model{given}"
    if setup.affinities:
        return f"automatic mode, then {len(setup.affinities)} node(s) fixed by --affinity"
    return "automatic mode"


def _queried_affinities(setup: Setup) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's device for the table and who set it: the device alone, the model's (manual mode) or the
    query's (automatic mode), then --affinity's on a HETERO device."""
    m = setup.model
    if not setup.request.hetero:
        warn_unused_affinities(setup)
        supported = setup.core.query_model(m, setup.device)
        name = setup.request.names[0]
        affinities = {n.get_friendly_name(): name for n in m.get_ops()}
        return affinities, {
            n: "device" if n in supported else "device; unsupported, ORT falls back" for n in affinities
        }
    return affinities_with_sources(setup)


def _save_query(
    m: Model, plan: Plan, save: str, request: device_string.DeviceRequest, as_json: bool, automatic: bool
) -> None:
    """--save: the model with the plan's affinities (unless it has its own), folders created on the way;
    ``automatic``: they are the automatic plan's, so marked (a manual compile may run them in one session)."""
    if not m.affinities():
        m.set_affinities(dict(plan.affinities))
        mark_automatic(m, automatic)
    save_model(m, save)
    # named on stderr under --json, as every file a command writes is
    info(
        f"Saved {save} with these affinities: {benchmark_line(save, request, m)} runs it as is",
        err=as_json,
    )


def _affinity_table(
    model: Model, affinities: Mapping[str, str], source: Mapping[str, str], unsupported_only: bool = False
) -> None:
    """Each node of ``model`` with its device and who set it (``source``); with ``unsupported_only``, only
    the nodes no device takes."""
    from rich.text import Text

    table = new_table(f"Affinities of {model.name}", ("#", "node", "op type", "device", "set by"))
    for k, node in enumerate(model.get_ops(), 1):
        name = node.get_friendly_name()
        dev = affinities.get(name)
        if unsupported_only and dev is not None:
            continue
        table.add_row(
            str(k),
            Text(name),
            Text(node.get_type_name()),
            Text(dev or "- (unsupported)"),
            source.get(name, ""),
        )
    console().print(table)


def _subgraph_table(plan: Plan, links: Mapping[int, tuple[list[str], list[str]]]) -> None:
    """The plan's subgraphs in execution order, with the tensors each receives and sends (``links``)."""
    from rich.text import Text

    table = new_table(
        "Subgraphs (execution order)",
        ("subgraph", "device", "nodes", "tensors in from another device", "tensors out to another device"),
    )
    for s in plan.subgraphs:
        got, sent = links[s.index]
        table.add_row(
            s.name, s.device, str(len(s.nodes)), Text(", ".join(got) or "-"), Text(", ".join(sent) or "-")
        )
    console().print(table)
