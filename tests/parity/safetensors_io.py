"""Reads a safetensors file without the `safetensors` package, which Debian's python3 lacks.

The format: an 8-byte little-endian header length N, N bytes of JSON giving each tensor's
dtype, shape and [begin, end) byte range in the data that follows, then the data. An
optional "__metadata__" entry maps strings to strings.
"""
import json
import struct

import numpy as np

_NUMPY_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    """Every tensor of the file as a numpy array, by name; BF16 is widened to float32."""
    with open(path, "rb") as f:
        raw = f.read()
    (header_bytes,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_bytes])
    data = memoryview(raw)[8 + header_bytes:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        chunk = data[begin:end]
        if entry["dtype"] == "BF16":
            # bf16 is the top half of a float32: shift the bits back into place.
            array = (np.frombuffer(chunk, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(chunk, dtype=_NUMPY_DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).copy()
    return tensors
