"""The torch-free data that crosses every seam: signatures, diagnostics, results,
and their conversion to plain data for msgpack."""
