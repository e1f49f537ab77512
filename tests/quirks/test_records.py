"""The quirk records (hetero_cli/quirks) against docs/limits.md and their repro tests: the page lists exactly
the records, one section each, and each record's repro test exists (a record without one says why)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hetero_cli.quirks import NOT_REPORTED, all_quirks, folds_initializers, node_refusals, quirk

ROOT = Path(__file__).resolve().parents[2]
LIMITS = ROOT / "docs" / "limits.md"
QUIRKS = all_quirks()


def documented_ids() -> list[str]:
    """The quirk ids docs/limits.md gives a section ("### <id>") under its "## Quirks" heading."""
    text = LIMITS.read_text(encoding="utf-8")
    section = text.split("\n## Quirks", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^### `([a-z0-9-]+)`", section, flags=re.MULTILINE)


def test_limits_md_lists_exactly_the_quirk_records():
    ids = [q.id for q in QUIRKS]
    assert len(ids) == len(set(ids)), "two records share an id"
    assert documented_ids() == ids  # the same ids, in the registry's order


@pytest.mark.parametrize("record", QUIRKS, ids=lambda q: q.id)
def test_each_section_says_the_records_versions_and_upstream(record):
    text = LIMITS.read_text(encoding="utf-8")
    section = text.split(f"### `{record.id}`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    assert record.ep in section
    assert record.versions_seen in section
    assert f"- **Affected**: {record.affected}" in section
    assert record.upstream in section


@pytest.mark.parametrize("record", QUIRKS, ids=lambda q: q.id)
def test_each_records_repro_test_exists(record):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", record.id)
    assert record.upstream == NOT_REPORTED or record.upstream.startswith("https://github.com/")
    assert record.ep.endswith("ExecutionProvider") and record.versions_seen and record.hook
    if not record.repro:
        assert "repro" in record.summary, f"{record.id} has no repro and does not say why"
        return
    path, _, name = record.repro.partition("::")
    assert path.startswith("tests/quirks/") and name, record.repro
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {re.escape(name)}\(", source, flags=re.MULTILINE), record.repro


def test_the_registry_answers_by_id_and_ep():
    assert quirk("openvino-outer-scope-loop").ops == frozenset({"Loop", "Scan"})
    refusing = (
        "openvino-outer-scope-loop",
        "openvino-loop-body-partitioned",
        "openvino-lstm-peepholes",
        "openvino-lone-input-variadic",
    )
    assert node_refusals("OpenVINOExecutionProvider") == tuple(quirk(q) for q in refusing)
    assert node_refusals("CPUExecutionProvider") == ()
    assert folds_initializers("OpenVINOExecutionProvider") and folds_initializers("TensorrtExecutionProvider")
    assert not folds_initializers("CUDAExecutionProvider")
    with pytest.raises(KeyError):
        quirk("no-such-quirk")


def test_a_refusal_for_outer_reads_only_leaves_a_self_contained_body_alone():
    outer, any_loop = quirk("openvino-outer-scope-loop"), quirk("openvino-loop-body-partitioned")
    assert outer.refuses("Scan", "", reads_outer=True) and not outer.refuses("Scan", "", reads_outer=False)
    assert any_loop.refuses("Loop", "ai.onnx", reads_outer=False)
    assert not any_loop.refuses("Scan", "", reads_outer=False)
    assert not any_loop.refuses("Loop", "com.example", reads_outer=False)


def test_a_refusal_for_a_given_input_leaves_a_node_without_it_alone():
    peepholes = quirk("openvino-lstm-peepholes")
    assert peepholes.refuses("LSTM", "", reads_outer=False, inputs=["x", "W", "R", "B", "", "", "", "P"])
    assert not peepholes.refuses("LSTM", "", reads_outer=False, inputs=["x", "W", "R", "B", "", "h", "c", ""])
    assert not peepholes.refuses("LSTM", "", reads_outer=False, inputs=["x", "W", "R"])
    assert not peepholes.refuses("GRU", "", reads_outer=False, inputs=["x", "W", "R", "B", "", "", "", "P"])
    lone = quirk("openvino-lone-input-variadic")
    assert lone.refuses("Max", "", reads_outer=False, inputs=["x"])
    assert not lone.refuses("Max", "", reads_outer=False, inputs=["x", "y"])
    assert not lone.refuses("Mean", "", reads_outer=False, inputs=["x"])


HOOK_REFERENCE = re.compile(r"\b((?:graph|placement|runtime|ort|app|cli)\.[a-z_]+\.[A-Za-z_][\w.]*)")


@pytest.mark.parametrize("record", QUIRKS, ids=lambda q: q.id)
def test_each_hook_names_code_that_exists_where_it_says(record):
    """A hook's ``layer.module.name`` references resolve to a function, class or constant defined in that
    module (not merely imported there): a workaround that moved is found again from its record."""
    import importlib

    for reference in HOOK_REFERENCE.findall(record.hook):
        layer, module, *path = reference.rstrip(".").split(".")
        owner = importlib.import_module(f"hetero_cli.{layer}.{module}")
        target = owner
        for part in path:
            assert hasattr(target, part), f"{record.id}: {reference} does not exist"
            target = getattr(target, part)
        defined_in = getattr(target, "__module__", owner.__name__)
        assert defined_in == owner.__name__, f"{record.id}: {reference} is defined in {defined_in}"


@pytest.mark.parametrize("record", QUIRKS, ids=lambda q: q.id)
def test_a_fixed_records_hook_acts_only_on_an_affected_release(record):
    """A record with a fixed release says so in its hook (the code consults quirks.in_force), and the
    releases before it are affected, the fixed one and later not."""
    if not record.fixed_in:
        assert record.affects("0.1") and record.affects("99.0")
        return
    assert "on an affected release" in record.hook, record.id
    assert not record.affects(record.fixed_in) and not record.affects("99.0")
    assert record.affects("1.0")


@pytest.mark.parametrize(
    ("version", "parsed"),
    [("1.27.0", (1, 27)), ("1.27", (1, 27)), ("1.27.0.dev20260501", (1, 27)), ("1.26.10", (1, 26, 10))],
)
def test_release_reads_the_numeric_part_of_a_version(version, parsed):
    from hetero_cli.quirks.record import release

    assert release(version) == parsed
    assert release("1.9.0") < release("1.10.0")
