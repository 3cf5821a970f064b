#!/usr/bin/python3
"""Megatron-LM's GPT-dataset and blending indices, written out in numpy as Megatron builds
them (megatron/core/datasets/gpt_dataset.py with helpers.cpp's build_sample_idx and
build_blending_indices), drawing from numpy.random.RandomState itself. Run by
tests/megatron_indices_test.cpp, which compares kiln's cached arrays with these.

  megatron_indices.py gpt PREFIX FIRST_DOC LAST_DOC NUM_SAMPLES SEQ_LEN SEED OUT
      reads PREFIX.idx (Megatron's index format) without kiln, builds the indices of
      documents [FIRST_DOC, LAST_DOC) and writes OUT-document_index.npy,
      OUT-sample_index.npy and OUT-shuffle_index.npy
  megatron_indices.py blend W1,W2,... SIZE OUT
      writes OUT-dataset_index.npy and OUT-dataset_sample_index.npy
"""
import sys

import numpy


def document_sizes(prefix):
    """Tokens per document from PREFIX.idx: magic, version, dtype code, sequence count S,
    document-index count D, lengths int32[S], pointers int64[S], document indices int64[D]."""
    with open(prefix + ".idx", "rb") as f:
        data = f.read()
    assert data[:9] == b"MMIDIDX\x00\x00"
    sequences = int(numpy.frombuffer(data, numpy.uint64, 1, 18)[0])
    doc_count = int(numpy.frombuffer(data, numpy.uint64, 1, 26)[0])
    lengths = numpy.frombuffer(data, numpy.int32, sequences, 34)
    docs = numpy.frombuffer(data, numpy.int64, doc_count, 34 + 12 * sequences)
    return numpy.array([lengths[docs[d]:docs[d + 1]].sum() for d in range(doc_count - 1)],
                       dtype=numpy.int64)


def document_index(documents, num_epochs, rng, separate_final_epoch):
    if not separate_final_epoch or num_epochs == 1:
        index = numpy.mgrid[0:num_epochs, 0:len(documents)][1]
        index[:] = documents
        index = index.reshape(-1).astype(numpy.int32)
        rng.shuffle(index)
        return index
    first = document_index(documents, num_epochs - 1, rng, False)
    last = document_index(documents, 1, rng, False)
    return numpy.concatenate((first, last))


def sample_index(sizes, doc_index, seq_length, num_epochs, tokens_per_epoch):
    """helpers.cpp's build_sample_idx with add_extra_token_to_sequence = 1."""
    num_samples = (num_epochs * tokens_per_epoch - 1) // seq_length
    out = numpy.zeros((num_samples + 1, 2), dtype=numpy.int64)
    at, offset = 0, 0
    for k in range(1, num_samples + 1):
        remaining = seq_length + 1
        while remaining != 0:
            length = sizes[doc_index[at]] - offset
            remaining -= length
            if remaining <= 0:
                offset += remaining + length - 1
                remaining = 0
            else:
                at += 1
                offset = 0
        out[k] = (at, offset)
    return out


def shuffle_index(num_samples, total_size, rng):
    dtype = numpy.uint32 if total_size < numpy.iinfo(numpy.uint32).max - 1 else numpy.int64
    first = numpy.arange(0, num_samples, 1, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    last = numpy.arange(num_samples, total_size, 1, dtype=dtype)
    rng.shuffle(last)
    return numpy.concatenate((first, last))


def gpt(prefix, first_doc, last_doc, num_samples, seq_length, seed, out):
    sizes = document_sizes(prefix)
    documents = numpy.arange(first_doc, last_doc, dtype=numpy.int32)
    tokens_per_epoch = int(sizes[first_doc:last_doc].sum())
    num_epochs, tokens = 1, tokens_per_epoch
    while tokens < num_samples * seq_length + 1:
        num_epochs += 1
        tokens += tokens_per_epoch
    separate_final_epoch = False
    if num_epochs > 1:
        before_final = ((num_epochs - 1) * tokens_per_epoch - 1) // seq_length
        from_final = num_samples - before_final
        per_epoch = (tokens_per_epoch - 1) // seq_length
        separate_final_epoch = from_final < int(0.80 * per_epoch)
    rng = numpy.random.RandomState(seed)
    doc_index = document_index(documents, num_epochs, rng, separate_final_epoch)
    samples = sample_index(sizes, doc_index, seq_length, num_epochs, tokens_per_epoch)
    if separate_final_epoch:
        order = shuffle_index(before_final, samples.shape[0] - 1, rng)
    else:
        order = shuffle_index(samples.shape[0] - 1, samples.shape[0] - 1, rng)
    numpy.save(out + "-document_index.npy", doc_index)
    numpy.save(out + "-sample_index.npy", samples)
    numpy.save(out + "-shuffle_index.npy", order.astype(numpy.int64))


def blend(weights, size, out):
    weights = numpy.array(weights, dtype=numpy.float64)
    weights /= weights.sum()
    dataset = numpy.zeros(size, dtype=numpy.int16)
    dataset_sample = numpy.zeros(size, dtype=numpy.int64)
    taken = [0] * len(weights)
    for i in range(size):
        so_far = max(float(i), 1.0)
        errors = [weights[d] * so_far - taken[d] for d in range(len(weights))]
        pick = max(range(len(weights)), key=lambda d: (errors[d], -d))
        dataset[i] = pick
        dataset_sample[i] = taken[pick]
        taken[pick] += 1
    numpy.save(out + "-dataset_index.npy", dataset)
    numpy.save(out + "-dataset_sample_index.npy", dataset_sample)


if __name__ == "__main__":
    if sys.argv[1] == "gpt":
        gpt(sys.argv[2], *(int(a) for a in sys.argv[3:8]), sys.argv[8])
    else:
        blend([float(w) for w in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4])
