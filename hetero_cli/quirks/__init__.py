"""The known defects of ONNX Runtime and its execution providers, one record each, and where each acts."""
