"""kiln's LoRA dropout masks (kernels/dropout_mask.h), computed again from their definition,
so the references can drop what kiln drops: element (sequence b, place t, feature f) of an
adapter's input is kept when the Philox4x32-10 uniform (kernels/counter_random.h) of
counter ((first_sample + b) * seq_len + t) * features + f, stream FNV-1a(name +
".lora_dropout"), key seed is at least p.
"""
import numpy as np

M32 = np.uint64(0xFFFFFFFF)


def fnv1a(text):
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def counter_uniform(seed, stream, index):
    """kiln's counter_uniform over a uint64 array of indices: uniform in (0, 1)."""
    index = index.astype(np.uint64)
    c = [index & M32, index >> np.uint64(32),
         np.full_like(index, stream & 0xFFFFFFFF), np.full_like(index, stream >> 32)]
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for round_ in range(10):
        if round_ > 0:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & M32,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & M32]
    bits52 = ((c[1] << np.uint64(32)) | c[0]) >> np.uint64(12)
    return (np.uint64(2) * bits52 + np.uint64(1)).astype(np.float64) * 2.0 ** -53


def keep_mask(name, p, seed, first_sample, batch, seq_len, features):
    """bool [batch, seq_len, features]: the elements adapter `name` keeps of a training batch
    whose first sample is the run's first_sample."""
    b = np.arange(batch, dtype=np.uint64)[:, None, None]
    t = np.arange(seq_len, dtype=np.uint64)[None, :, None]
    f = np.arange(features, dtype=np.uint64)[None, None, :]
    index = ((np.uint64(first_sample) + b) * np.uint64(seq_len) + t) * np.uint64(features) + f
    return counter_uniform(seed, fnv1a(name + ".lora_dropout"), index) >= p
