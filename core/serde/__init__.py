"""Exported programs as msgpack (schema 2.0): the schema and bounded codec (torch-free),
encode/decode/weights/validate (torch), and the torch-free reader."""
