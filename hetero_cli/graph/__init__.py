"""The graph layer: ONNX models as hetero-cli reads them, in pure onnx (it never imports onnxruntime).

Model (the OpenVINO-shaped node API over a ModelProto), reading a model from a file or bytes, the types of
its tensors, its weights left in their file, and extracting a set of nodes as a standalone model. Layers
above import these names from here, not from the modules inside.
"""

from .model import Model, ModelCheck, Node, TensorInfo, read_model, shape_text, type_shape

__all__ = ["Model", "ModelCheck", "Node", "TensorInfo", "read_model", "shape_text", "type_shape"]
