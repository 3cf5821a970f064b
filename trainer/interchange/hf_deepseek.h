// DeepseekV3Config (DeepseekV3ForCausalLM, model_type deepseek_v3), both ways, for a kiln
// model with latent attention (model.attention=mla), with DeepSeek's experts (sigmoid
// scores, a selection bias, groups, shared experts, the first layers dense) or without.
// hf_config.h calls it; docs/interchange.md lists the fields.
//
// Where transformers' DeepseekV3 and kiln compute alike, and so what is refused either way:
//  - the latent norms (q_a_layernorm, kv_a_layernorm) take eps 1e-6 in transformers whatever
//    rms_norm_eps says, kiln's take model.norm_eps: only a model.norm_eps of 1e-6 goes across;
//  - the router scores a group of experts by its best 2 biased scores, kiln by its best
//    moe.top_k / moe.route_groups_topk: with groups, only routers where that is 2;
//  - YaRN's factor is rope_scaling's factor in transformers 5, but
//    max_position_embeddings / original_max_position_embeddings in transformers 4's code
//    that reads the latter: export writes a max_position_embeddings of factor x original
//    context, so both read the same, and import takes only files where they agree.
// One difference no config shows stays: transformers counts the experts of the groups a token
// drops as 0 where kiln leaves them out, alike while its best biased scores in the groups it
// keeps are above 0 (docs/interchange.md#deepseek-v3).
#pragma once

#include <nlohmann/json.hpp>

#include "trainer/config/config.h"
#include "trainer/interchange/hf_fields.h"

namespace kiln {

// Whether a model is written as DeepseekV3ForCausalLM: its latent attention says so.
bool exports_as_deepseek_v3(const ModelConfig& model);

// DeepseekV3Config's own fields (hf_config adds those every class shares). Refuses, in one
// line, a model the class computes differently.
nlohmann::json deepseek_v3_config(const ModelConfig& model);

// The kiln model a deepseek_v3 config.json describes, DeepseekV3Config's defaults (DeepSeek-V3's
// own) where it is silent. Refuses what kiln does not compute the same way, naming the field.
ModelConfig deepseek_v3_from_hf(const HfFields& fields);

// Whether the file keeps each rotary part's rows (q_b_proj's or q_proj's in every head,
// kv_a_proj_with_mqa's key) as interleaved pairs: rope_interleave, true where absent (its
// default in transformers), as DeepSeek's checkpoints keep them and export writes them.
bool deepseek_v3_rope_interleaved(const nlohmann::json& config);

}  // namespace kiln
