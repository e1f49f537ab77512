"""Visualisation: GraphViz .dot files of affinities and subgraphs, as OpenVINO_HETERO_VISUALIZE writes them.

    hetero_affinity_<model>.dot    every operation, filled with its device's colour
    hetero_subgraphs_<model>.dot   one cluster per subgraph, cross-device tensors drawn bold and red,
                                   subgraphs an inference runs side by side (HETERO_CONCURRENCY) marked

Colours are fixed per device (sorted order), so two runs of one model give identical files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..errors import HeteroError
from ..graph import Model
from .partition import Plan

ENV = "OPENVINO_HETERO_VISUALIZE"
PALETTE = (
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
    "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f", "#a6cee3", "#b2df8a",
)  # fmt: skip


def wanted(dump_config: bool = False) -> bool:
    """Whether a compile should write .dot files: the environment variable, or HETERO_DUMP_GRAPH_DOT."""
    return bool(os.environ.get(ENV)) or dump_config


def safe_name(name: str) -> str:
    """A model name made safe as part of a file name."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "model"


def quote(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, '&', other control characters and
    non-ASCII as HTML entities (so that two names never give one string: 'a<TAB>b' is not 'a b', a
    literal '&#233;' is not 'é')."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "&":
            out.append("&amp;")
        elif ord(ch) < 32 or ord(ch) > 126:
            out.append(f"&#{ord(ch)};")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


LABEL_LIMIT = 1000  # characters of a name shown in a label: Graphviz refuses quoted strings over 16,384
ID_LIMIT = 200


def node_id(kind: str, name: str) -> str:
    """A DOT node id, quoted: the kind of box (``in``, ``out``, ``op``, ``copy``, ``legend``) then the name,
    so no two kinds collide (an op named ``in:x`` is not the model input ``x``); a long name is cut and
    keeps a hash of the whole, so ids stay unique and within Graphviz's limits."""
    if len(name) > ID_LIMIT:
        name = f"{name[: ID_LIMIT // 2]}...#{hashlib.sha1(name.encode('utf-8')).hexdigest()[:16]}"
    return quote(f"{kind}:{name}")


def device_colours(devices: Iterable[str]) -> dict[str, str]:
    """A fixed colour per device, assigned in sorted order."""
    return {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(sorted(set(devices)))}


def _label(*lines: str) -> str:
    return quote(
        "\n".join(line if len(line) <= LABEL_LIMIT else line[:LABEL_LIMIT] + "..." for line in lines)
    )


def affinity_dot(model: Model, affinities: Mapping[str, str]) -> str:
    """DOT text: every op labelled with name, type and device, filled with the device's colour."""
    colours = device_colours(affinities.values())
    lines = [
        f"digraph {_label('hetero_affinity_' + model.name)} {{",
        "  rankdir=TB;",
        "  node [shape=box, style=filled];",
    ]
    for name in model.input_names:
        lines.append(f"  {node_id('in', name)} [shape=ellipse, style=solid, label={_label('input', name)}];")
    for node in model.get_ops():
        device = affinities.get(node.friendly_name, "?")
        lines.append(
            f"  {node_id('op', node.friendly_name)} [label={_label(node.friendly_name, node.get_type_name(), 'device=' + device)}, "
            f"fillcolor={quote(colours.get(device, '#ffffff'))}];"
        )
    lines += _edges(model)
    lines += _outputs(model)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _producer_id(model: Model, tensor: str) -> str | None:
    """The quoted id of what makes ``tensor``: its op, or the model input; None for an initializer."""
    node = model.producer.get(tensor)
    if node is not None:
        return node_id("op", node.friendly_name)
    if tensor in model.input_names:
        return node_id("in", tensor)
    return None


def _edges(model: Model) -> list[str]:
    """One edge per tensor read, from its producer (op or model input) to each reader."""
    lines = []
    for node in model.get_ops():
        for tensor in node.inputs:
            src = _producer_id(model, tensor)
            if src is not None:
                lines.append(f"  {src} -> {node_id('op', node.friendly_name)} [label={_label(tensor)}];")
    return lines


def _outputs(model: Model) -> list[str]:
    lines = []
    for name in model.output_names:
        lines.append(
            f"  {node_id('out', name)} [shape=ellipse, style=solid, label={_label('output', name)}];"
        )
        src = _producer_id(model, name)
        if src is not None:
            lines.append(f"  {src} -> {node_id('out', name)};")
    return lines


def subgraphs_dot(model: Model, plan: Plan, together: Sequence[Sequence[int]] = ()) -> str:
    """DOT text: one cluster per subgraph titled ``subgraph<N>: <DEVICE>``, crossing tensors bold red, legend.
    ``together``: groups of subgraph indexes an inference runs side by side (Schedule.side_by_side): their
    clusters are drawn bold and say which others they run with, and the legend lists the groups."""
    colours = device_colours(s.device for s in plan.subgraphs)
    beside = {i: [j for g in together if i in g for j in g if j != i] for g in together for i in g}
    owner = {n: s for s in plan.subgraphs for n in s.nodes}
    folded = set(plan.folded)
    lines = [f"digraph {_label('hetero_subgraphs_' + model.name)} {{", "  rankdir=TB; compound=true;",
             "  node [shape=box, style=filled];"]  # fmt: skip
    for name in model.input_names:
        lines.append(f"  {node_id('in', name)} [shape=ellipse, style=solid, label={_label('input', name)}];")
    for s in plan.subgraphs:
        colour = colours[s.device]
        lines.append(f"  subgraph {quote('cluster_' + str(s.index + 1))} {{")
        title, style = f"{s.name}: {s.device}", "rounded"
        if beside.get(s.index):
            others = ", ".join(f"subgraph{j + 1}" for j in dict.fromkeys(beside[s.index]))
            title, style = f"{title}\nruns side by side with {others}", '"rounded,bold"'
        lines.append(f"    label={quote(title)}; style={style}; color={quote(colour)}; penwidth=2;")
        for c in s.constant_nodes:
            node = model.node(c)
            lines.append(
                f"    {node_id('copy', c + '@' + s.name)} [label={_label(c, node.get_type_name(), 'constant copy')}, "
                f'fillcolor={quote(colour)}, style="filled,dashed"];'
            )
        for n in s.nodes:
            node = model.node(n)
            lines.append(
                f"    {node_id('op', n)} [label={_label(n, node.get_type_name(), 'subgraph=' + str(s.index + 1))}, "
                f"fillcolor={quote(colour)}];"
            )
        for t in s.fixed:  # a static shape value the subgraph holds as a constant of its own
            lines.append(
                f"    {node_id('value', t + '@' + s.name)} [label={_label(t, 'static shape value')}, "
                f'fillcolor={quote(colour)}, style="filled,dashed", shape=note];'
            )
        lines.append("  }")
    lines += _folded(model, plan)

    crossing = ', color="#d62728", penwidth=3, fontcolor="#d62728", style=bold'
    for s in plan.subgraphs:
        copies = set(s.constant_nodes)
        for name in (*s.constant_nodes, *s.nodes):
            node = model.node(name)
            dst = node_id("copy", name + "@" + s.name) if name in copies else node_id("op", name)
            for tensor in node.inputs:
                producer = model.producer.get(tensor)
                if producer is None:
                    if tensor in model.input_names:
                        lines.append(f"  {node_id('in', tensor)} -> {dst} [label={_label(tensor)}];")
                    continue
                if producer.is_constant:
                    src, extra = node_id("copy", producer.friendly_name + "@" + s.name), ""
                elif tensor in s.fixed:
                    src, extra = node_id("value", tensor + "@" + s.name), ""
                    if producer.friendly_name in folded:  # where the value it holds comes from
                        lines.append(
                            f"  {node_id('op', producer.friendly_name)} -> {src} [label={_label(tensor)}, style=dashed];"
                        )
                else:
                    src = node_id("op", producer.friendly_name)
                    extra = crossing if owner[producer.friendly_name].device != s.device else ""
                lines.append(f"  {src} -> {dst} [label={_label(tensor)}{extra}];")
    lines += _outputs(model)
    lines.append('  subgraph "cluster_legend" {')
    lines.append('    label="devices"; style=dashed;')
    for device, colour in colours.items():
        lines.append(f"    {node_id('legend', device)} [label={quote(device)}, fillcolor={quote(colour)}];")
    for group in together:
        text = "side by side: " + " + ".join(f"subgraph{i + 1}" for i in group)
        lines.append(f"    {node_id('legend', text)} [label={quote(text)}, shape=note, style=solid];")
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _folded(model: Model, plan: Plan) -> list[str]:
    """The folded nodes (Plan.folded: no session runs them) in a dashed cluster of their own, with the
    tensors they read from model inputs and other ops; nothing where none is folded."""
    if not plan.folded:
        return []
    lines = [
        '  subgraph "cluster_folded" {',
        '    label="folded: no session (they only feed static shape values)"; style=dashed;',
    ]
    for name in plan.folded:
        node = model.node(name)
        lines.append(
            f"    {node_id('op', name)} [label={_label(name, node.get_type_name(), 'folded')}, "
            'fillcolor="#eeeeee", style="filled,dashed"];'
        )
    lines.append("  }")
    for name in plan.folded:
        for tensor in model.node(name).inputs:
            src = _producer_id(model, tensor)
            if src is not None and not (tensor in model.producer and model.producer[tensor].is_constant):
                lines.append(f"  {src} -> {node_id('op', name)} [label={_label(tensor)}, style=dashed];")
    return lines


def dot_stem(model: Model) -> str:
    """What the .dot files of ``model`` are named after: the model file's name, with the ONNX graph's name
    after it where the two differ (exporters name every graph ``main_graph`` or ``torch-jit-export``: the
    file tells two models apart); the graph's name alone for a model not read from a file."""
    if model.path is None:
        return safe_name(model.name)
    stem, graph = model.path.stem, model.name
    return safe_name(stem if safe_name(graph) == safe_name(stem) else f"{stem}_{graph}")


def dot_paths(model: Model, folder: Path) -> tuple[Path, Path]:
    """The two .dot files ``dump`` writes for ``model`` into ``folder``: the affinities', the subgraphs'."""
    stem = dot_stem(model)
    return folder / f"hetero_affinity_{stem}.dot", folder / f"hetero_subgraphs_{stem}.dot"


def dump(
    model: Model,
    plan: Plan,
    directory: str | os.PathLike[str] | None = None,
    together: Sequence[Sequence[int]] = (),
) -> tuple[Path, Path]:
    """Write both .dot files into ``directory`` (default: the current directory), both or neither; returns
    their paths. ``together``: as subgraphs_dot's. Raises HeteroError naming the folder or the file that
    cannot be written."""
    folder = Path(directory) if directory is not None else Path.cwd()
    if directory is not None and not str(directory):
        raise HeteroError("the folder for .dot files is empty: give a folder name, or leave it out for here")
    if folder.exists() and not folder.is_dir():
        raise HeteroError(f"cannot write .dot files into {folder}: it is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HeteroError(f"cannot write .dot files into {folder}: {exc.strerror or exc}") from None
    affinity, subgraphs = dot_paths(model, folder)
    write_all(
        {affinity: affinity_dot(model, plan.affinities), subgraphs: subgraphs_dot(model, plan, together)}
    )
    return affinity, subgraphs


def write_all(texts: Mapping[Path, str]) -> None:
    """Write each text to its file, all or none: each goes to a new file beside its target first, renamed
    over it once every one is written; the new files are removed on a failure. Raises HeteroError naming
    the file that cannot be written (a folder in its place, say)."""
    done: dict[Path, Path] = {}
    target = next(iter(texts), Path())
    try:
        for target, text in texts.items():
            if target.is_dir():
                raise IsADirectoryError(0, "it is a folder, not a file")
            part = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.part")
            with open(part, "x", encoding="utf-8") as handle:  # "x": the umask's mode, as a plain write has
                done[target] = part
                handle.write(text)
        for target, part in done.items():
            os.replace(part, target)
    except OSError as exc:
        raise HeteroError(f"cannot write {target}: {_reason(exc)}") from None
    finally:
        for part in done.values():
            part.unlink(missing_ok=True)


def _reason(exc: OSError) -> str:
    """An OSError's reason as the end of a sentence ("permission denied", "it is a folder, not a file")."""
    reason = exc.strerror or str(exc)
    return reason[:1].lower() + reason[1:]


def render(path: str | os.PathLike[str], fmt: str = "svg") -> Path:
    """Render a .dot file with Graphviz's ``dot`` beside it (``x.dot`` -> ``x.svg``)."""
    if fmt not in ("svg", "png", "pdf"):
        raise HeteroError(f"cannot render as {fmt!r}: use svg, png or pdf")
    exe = shutil.which("dot")
    if exe is None:
        raise HeteroError(
            "Graphviz is not installed (no 'dot' on PATH): install it, e.g. apt-get install graphviz"
        )
    src = Path(path)
    out = src.with_suffix("." + fmt)
    result = subprocess.run([exe, f"-T{fmt}", str(src), "-o", str(out)], capture_output=True, text=True)
    if result.returncode != 0:
        out.unlink(missing_ok=True)
        raise HeteroError(f"Graphviz could not render {src}: {result.stderr.strip()[:300]}")
    return out
