"""Affinities a user gives on top of a model's (``--affinity NODE=DEVICE``): checked against the model,
merged with the model's own (manual mode) or the automatic query's, and required for every node.

OpenVINO's query-then-fix: start from the model's affinities, or from ``query_model``'s, then override
some nodes. The functions take the query as a callable, so that it runs only where the model has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..errors import AffinityError, ConfigError
from ..graph import Model
from . import devices as registry
from .devices import Device
from .query import unsupported_nodes_error
from .schedule import MODES, parse_mode

#: Where a node's affinity came from: the model's own, the automatic query's, or an override.
MODEL, QUERY, OPTION = "model", "query", "option"

#: A model metadata key saying its affinities are the automatic plan's (``hetero query --save`` without
#: overrides; ``hetero tune`` where the automatic plan won): a compile in manual mode then probes as the
#: automatic mode does, so that the split can run in the query's one session as the automatic plan did.
SOURCE_KEY = "hetero_cli.affinities"
AUTOMATIC = "automatic"


def mark_automatic(model: Model, automatic: bool) -> None:
    """Say in ``model``'s metadata (kept by save) whether its affinities are the automatic plan's."""
    model.set_metadata(SOURCE_KEY, AUTOMATIC if automatic else None)


#: A model metadata key holding the HETERO_CONCURRENCY its placement runs best with (``hetero tune`` where a
#: placement won run so): a compile takes it where its config sets none, as the affinities are the model's.
CONCURRENCY_KEY = "hetero_cli.concurrency"


def mark_concurrency(model: Model, mode: str | None) -> None:
    """Say in ``model``'s metadata (kept by save) the HETERO_CONCURRENCY its placement runs with (None:
    none, the compile's own)."""
    model.set_metadata(CONCURRENCY_KEY, mode)


def marked_concurrency(model: Model) -> str | None:
    """The HETERO_CONCURRENCY ``model``'s metadata says its placement runs with (mark_concurrency), None
    where it says none. ConfigError for a value that is no mode (the model file is not hetero-cli's)."""
    value = model.metadata_props.get(CONCURRENCY_KEY)
    if value is None:
        return None
    try:
        return parse_mode(value)
    except ConfigError:
        raise ConfigError(
            f"the model's metadata {CONCURRENCY_KEY} says {value!r:.40}, which is no HETERO_CONCURRENCY "
            f"({', '.join(MODES)}): remove it from the model, or give --config HETERO_CONCURRENCY=..."
        ) from None


def marked_automatic(model: Model) -> bool:
    """Whether ``model``'s metadata says its affinities are the automatic plan's (mark_automatic)."""
    return model.metadata_props.get(SOURCE_KEY) == AUTOMATIC


def check_affinities(model: Model, affinities: Mapping[str, str]) -> dict[str, str]:
    """``affinities`` ({node name: device}) by friendly name (a name the file gives several nodes sets them
    all: Model.by_friendly_name) with canonical device names; AffinityError for a node ``model`` lacks or
    a device nobody knows, before anything is compiled."""
    out = {}
    for node, dev in model.by_friendly_name(affinities).items():
        if not model.has_node(node):
            sample = ", ".join(n.get_friendly_name() for n in model.get_ops()[:4])
            raise AffinityError(
                f"affinity for {registry.shown(node)} names no node of {model.name}: node names are friendly "
                f"names such as {sample} (`hetero query -m MODEL -d DEVICE` lists them all)"
            )
        name = registry.canonical_name(dev)
        if name is None:
            raise AffinityError(
                f"affinity for {registry.shown(node)} names unknown device {registry.shown(str(dev))}: known "
                f"devices are {registry.known_names_text()}"
            )
        out[node] = name
    return out


def affinities_with_sources(
    model: Model, overrides: Mapping[str, str], query: Callable[[], dict[str, str]]
) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's device and where it came from (MODEL, QUERY or OPTION): the model's own affinities
    (manual mode) or else ``query()``'s (automatic mode: the nodes some device supports), then
    ``overrides`` on top. Nodes no device takes are missing from both."""
    if model.affinities():
        base, origin = model.affinities(), MODEL
    else:
        base, origin = query(), QUERY
    source = dict.fromkeys(base, origin)
    base.update(overrides)
    source.update(dict.fromkeys(overrides, OPTION))
    return base, source


def set_affinities(
    model: Model,
    overrides: Mapping[str, str],
    query: Callable[[], dict[str, str]],
    *,
    device: str,
    priorities: Sequence[Device],
) -> dict[str, str]:
    """Set every node's affinity on ``model``: its own or the query's, with ``overrides`` on top.

    ``device`` is the device string and ``priorities`` its devices, for the message. Returns {node: where
    its affinity came from}. Raises AffinityError when the model sets affinities for only some nodes (manual
    mode needs them all), UnsupportedNodesError when no device of ``priorities`` supports some node.
    """
    from_model = bool(model.affinities())
    base, source = affinities_with_sources(model, overrides, query)
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
        fix = (
            "pin them with --affinity NODE=DEVICE"
            if any(d.is_cpu for d in priorities)
            else "add CPU to the device list or pin them with --affinity NODE=CPU"
        )
        raise unsupported_nodes_error(
            model, missing, device, f"; {fix}", listed=f"{len(missing)} node(s): {names}"
        )
    model.set_affinities(base)
    return source
