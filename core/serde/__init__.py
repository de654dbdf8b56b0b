"""Exported programs as msgpack (schema 2.0): the schema and bounded codec (torch-free),
encode/weights (torch), decoding as hostile input (torch: decode assembles the program
and is the one error boundary, rebuild rebuilds the graph, validate checks op names and
names, expressions reads symbolic expressions by a restricted grammar), and the
torch-free reader."""
