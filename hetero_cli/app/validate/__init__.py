"""Validate a split against the whole model: the same inputs through the split and one whole-model ONNX
Runtime session, every output compared with Polygraphy's tolerance syntax and semantics, the first subgraph
that differs named; inputs and outputs in Polygraphy's own JSON formats."""
