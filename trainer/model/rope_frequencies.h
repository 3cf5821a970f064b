// The rotary embedding's inverse frequencies, one per pair of a head's dimensions: theta^(-2i/d),
// or with model.rope_scaling=llama3, Llama 3.1's long-context version of them (as Hugging Face
// computes it for rope_type "llama3"): the frequencies whose wavelength passes the original
// context / low_freq_factor are divided by the factor, those below original / high_freq_factor
// kept, and those between blended smoothly from one to the other.
#pragma once

#include <vector>

#include "trainer/config/config.h"

namespace kiln {

std::vector<double> rope_inverse_frequencies(const ModelConfig& m);

}  // namespace kiln
