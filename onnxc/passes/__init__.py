"""Graph passes on the onnx ModelProto, before the IR is built. Each module: one job."""
