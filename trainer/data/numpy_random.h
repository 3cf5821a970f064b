// numpy.random.RandomState's legacy shuffle, reproduced exactly. Megatron builds its GPT
// dataset's document order and sample order with numpy.random.RandomState(seed).shuffle, so
// drawing ours the same way trains, for a given seed, on the very order Megatron trains on
// (tests/parity/megatron_indices.py checks it against numpy itself). It is also portable:
// std::shuffle and the <random> distributions differ between standard libraries, this does
// not.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>

namespace kiln {

class NumpyRandomState {
 public:
  // numpy's legacy seeding of an integer is MT19937's init_genrand, as std::mt19937's;
  // numpy accepts seeds in [0, 2^32), and so do we (kiln::Error otherwise).
  explicit NumpyRandomState(uint64_t seed);

  // numpy's random_interval: uniform on [0, max], drawn by masked rejection (32-bit draws
  // while max fits 32 bits, else two draws joined high word first).
  uint64_t interval(uint64_t max);

  // RandomState.shuffle of a 1-D array: Fisher-Yates from the last element down.
  template <typename T>
  void shuffle(std::span<T> values) {
    for (size_t i = values.size(); i-- > 1;) std::swap(values[i], values[interval(i)]);
  }

 private:
  std::mt19937 engine_;
};

}  // namespace kiln
