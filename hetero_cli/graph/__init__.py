"""The graph layer: ONNX models as hetero-cli reads them, in pure onnx (it never imports onnxruntime).

Model (the OpenVINO-shaped node API over a ModelProto, model.py; its node index in index.py, its weights
in weights.py, the types of its tensors in types.py), reading a model from a file or bytes (reading.py),
extracting a set of nodes as a standalone model (extract.py), and the memory one inference's tensors
take at given shapes (footprint.py). Layers above import these names from here, not from the modules
inside.
"""

from .footprint import activation_peak
from .input_shapes import disagreement, refused_shapes, with_input_shapes
from .model import Model, Node, TensorInfo
from .reading import ModelCheck, read_model
from .saving import new_file_beside
from .types import shape_text, type_shape

__all__ = [
    "Model",
    "ModelCheck",
    "Node",
    "TensorInfo",
    "activation_peak",
    "disagreement",
    "new_file_beside",
    "read_model",
    "refused_shapes",
    "shape_text",
    "type_shape",
    "with_input_shapes",
]
