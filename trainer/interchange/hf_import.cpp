#include "trainer/interchange/hf_import.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/check.h"
#include "base/run_names.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/interchange/hf_config.h"
#include "trainer/interchange/hf_deepseek.h"
#include "trainer/interchange/hf_tensors.h"
#include "trainer/interchange/hf_tokenizer.h"
#include "trainer/interchange/lora_import.h"
#include "trainer/memory/host_copy.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_hf_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("import: cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) fail("import: " + path.string() + " is not valid JSON");
  return j;
}

// The weights of a model directory: model.safetensors, or the shards that
// model.safetensors.index.json names.
class HfWeights {
 public:
  explicit HfWeights(const fs::path& dir) {
    const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    if (fs::exists(single)) {
      open(single);
    } else if (fs::exists(index)) {
      const json map = read_hf_json(index).value("weight_map", json());
      if (!map.is_object() || map.empty()) fail("import: " + index.string() + " has no weight_map");
      std::set<std::string> shards;
      for (const auto& [name, shard] : map.items()) {
        if (!shard.is_string()) fail("import: " + index.string() + ": " + name + " names no file");
        shards.insert(shard.get<std::string>());
      }
      for (const std::string& shard : shards) {
        if (!fs::exists(dir / shard))
          fail("import: " + (dir / shard).string() + ", a shard named by " + index.string() +
               ", is missing");
        open(dir / shard);
      }
      for (const auto& [name, shard] : map.items())
        if (!index_.count(name) ||
            index_.at(name)->path() != (dir / shard.get<std::string>()).string())
          fail("import: " + index.string() + " puts " + name + " in " + shard.get<std::string>() +
               ", which does not hold it");
    } else {
      fail("import: " + dir.string() +
           " has neither model.safetensors nor model.safetensors.index.json");
    }
  }

  // The file holding `name`, or null.
  const SafetensorsFile* find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
  }
  const std::map<std::string, const SafetensorsFile*>& all() const { return index_; }
  // Where the error for a missing tensor points: the single file, or the index.
  std::string where() const {
    return files_.size() == 1 ? files_.front()->path()
                              : "the shards of model.safetensors.index.json";
  }

 private:
  void open(const fs::path& path) {
    files_.push_back(std::make_unique<SafetensorsFile>(path.string()));
    for (const TensorInfo& t : files_.back()->tensors()) index_[t.name] = files_.back().get();
  }
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> index_;
};

// A part's tensor as the directory holds it: GPT-2's files name their tensors with the
// "transformer." prefix (GPT2LMHeadModel) or without (GPT2Model, as the original gpt2 has).
struct Located {
  const SafetensorsFile* file = nullptr;
  std::string name;
};

Located locate(const HfWeights& weights, const std::string& name) {
  if (const SafetensorsFile* f = weights.find(name)) return {f, name};
  const std::string bare = name.rfind("transformer.", 0) == 0 ? name.substr(12) : "";
  if (const SafetensorsFile* f = bare.empty() ? nullptr : weights.find(bare)) return {f, bare};
  return {};
}

// Buffers Hugging Face keeps in some files that are not weights: GPT-2's causal masks and
// Llama's rotary frequencies, which kiln computes.
bool ignorable(const std::string& name) {
  for (const char* suffix : {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"})
    if (name.ends_with(suffix)) return true;
  return false;
}

bool is_floating(DType d) {
  return d == DType::F32 || d == DType::F64 || d == DType::BF16 || d == DType::F16;
}

// DeepSeek's checkpoints keep their multi-token prediction modules as layers past
// num_hidden_layers (DeepSeek-V3's model.layers.61.*), which transformers' DeepseekV3 does not
// read. kiln imports those its config.json declares (num_nextn_predict_layers, the model's
// mtp_depth) and skips any past them.
bool prediction_layer_tensor(const std::string& name, const ModelConfig& m) {
  const std::string prefix = "model.layers.";
  if (!m.latent_attention() || !name.starts_with(prefix)) return false;
  int layer = 0;
  const char* first = name.data() + prefix.size();
  const auto [end, ec] = std::from_chars(first, name.data() + name.size(), layer);
  return ec == std::errc() && end != first && *end == '.' && layer >= m.block_count();
}

// The tensor `name`, present, of `shape` and a floating dtype.
const SafetensorsFile& checked_tensor(const HfWeights& weights, const std::string& name, const Shape& shape) {
  const Located at = locate(weights, name);
  if (!at.file) fail("import: " + weights.where() + " has no tensor " + name);
  const TensorInfo& info = at.file->info(at.name);
  if (!(info.shape == shape))
    fail("import: " + at.name + " is " + info.shape.str() + " in " + at.file->path() + "; the config.json says " +
         shape.str());
  if (!is_floating(info.dtype))
    fail("import: " + at.name + " in " + at.file->path() + " is " + dtype_name(info.dtype) + ", not a floating dtype");
  return *at.file;
}

// An imported model is fine-tuned, not pre-trained from scratch: the run config it carries
// starts from what a fine-tune wants rather than kiln's pre-training defaults. The learning
// rate is the usual full fine-tune's (Hugging Face's Trainer default, 5e-5), a tenth of it at
// the end; a few warm-up steps let Adam's moments settle before full-size updates reach weights
// that are already good; a checkpoint every 100 steps (and the final one every run keeps); a
// split with a validation share a small fine-tuning set still fills (5% of its documents) and
// no test share, since a fine-tune's benchmark lives elsewhere.
void set_fine_tune_defaults(Config& config) {
  config.train.lr = 5e-5;
  config.train.min_lr = 5e-6;
  config.train.warmup = 10;
  config.train.checkpoint_interval = 100;
  config.data.split = "95,5,0";
}

// A copy the file keeps of a tensor (HfTensor::copy) holds the same bytes as the tensor's own
// place: kiln keeps the one tensor.
void check_copy(const HfWeights& weights, const std::vector<HfTensor>& map, const HfTensor& copy) {
  const auto own = std::find_if(map.begin(), map.end(), [&](const HfTensor& t) {
    return !t.copy && t.kiln_name == copy.kiln_name;
  });
  KILN_CHECK(own != map.end() && own->parts.size() == 1 && copy.parts.size() == 1,
             "interchange: " + copy.parts.front().name + " copies no tensor of its own");
  const Located a = locate(weights, own->parts.front().name), b = locate(weights, copy.parts.front().name);
  const std::span<const std::byte> x = a.file->data(a.name), y = b.file->data(b.name);
  if (a.file->info(a.name).dtype != b.file->info(b.name).dtype || x.size() != y.size() ||
      !std::equal(x.begin(), x.end(), y.begin()))
    fail("import: " + b.name + " differs from " + a.name + "; kiln's multi-token prediction modules share the "
         "model's embedding and output layer, so the file's copies must hold the same values");
}

// Every part present, of a floating dtype and the expected shape (GPT-2's position table
// may have more rows than the kiln model keeps), and every selection bias; nothing left over
// but what is skipped. Returns how many tensors of multi-token prediction layers it skips.
int64_t check_weights(const HfWeights& weights, const std::vector<HfTensor>& map, const ModelConfig& m,
                      int64_t hf_positions, const std::map<int, std::string>& selection_bias) {
  std::set<std::string> used;
  for (const HfTensor& t : map) {
    for (const HfPart& p : t.parts) {
      Shape want = hf_shape(t, p);
      if (t.kiln_name == "wpe") want = {hf_positions, m.d_model};
      checked_tensor(weights, p.name, want);
      used.insert(locate(weights, p.name).name);
    }
    if (t.copy) check_copy(weights, map, t);
  }
  for (const auto& [layer, name] : selection_bias) {
    checked_tensor(weights, name, {m.moe.num_experts});
    used.insert(name);
  }
  int64_t skipped = 0;
  for (const auto& [name, file] : weights.all()) {
    if (used.count(name) || ignorable(name)) continue;
    if (m.tie_embeddings && name == "lm_head.weight") continue;  // a copy of the tied embedding
    if (prediction_layer_tensor(name, m)) {
      ++skipped;
      continue;
    }
    fail("import: " + file->path() + " holds " + name + ", which a kiln " + m.arch +
         " model has no place for");
  }
  return skipped;
}

// DeepseekV3's e_score_correction_bias of each layer with experts: the checkpoint's selection bias.
std::map<int, std::vector<double>> selection_bias_of(const HfWeights& weights, const std::map<int, std::string>& names,
                                                     int64_t experts) {
  std::map<int, std::vector<double>> bias;
  for (const auto& [layer, name] : names) {
    const SafetensorsFile& file = *weights.find(name);
    bias[layer] = doubles_from_bytes(file.data(name).data(), file.info(name).dtype, experts);
  }
  return bias;
}

// The dtype the checkpoint keeps the weights in: the one all of them have, when it is one a
// model computes in (F32, BF16, F16), so that bf16 weights stay bf16 and export writes them
// back bit for bit; else F32, every value widened exactly (F64's rounded).
DType kept_dtype(const HfWeights& weights, const std::vector<HfTensor>& map) {
  std::set<DType> dtypes;
  for (const HfTensor& t : map)
    for (const HfPart& p : t.parts) {
      const Located at = locate(weights, p.name);
      dtypes.insert(at.file->info(at.name).dtype);
    }
  const DType only = *dtypes.begin();
  return dtypes.size() == 1 && only != DType::F64 ? only : DType::F32;
}

// The kiln tensor in `dtype` with zero padding rows, filled from its parts: copied when they
// have that dtype, else (dtype F32) widened.
TensorSource model_source(const HfWeights& weights, const HfTensor& t, DType dtype) {
  return {{t.kiln_name, dtype, t.kiln_shape}, [&weights, &t, dtype](void* host) {
            auto* kiln = static_cast<std::byte*>(host);
            const size_t element = dtype_size(dtype);
            std::memset(kiln, 0, static_cast<size_t>(t.kiln_shape.numel()) * element);
            std::vector<float> widened;
            for (const HfPart& p : t.parts) {
              const Located at = locate(weights, p.name);
              const DType saved = at.file->info(at.name).dtype;
              // The leading values are the part: a position table may be longer than kiln keeps.
              const std::byte* part = at.file->data(at.name).data();
              if (saved != dtype) {
                const std::vector<double> values =
                    doubles_from_bytes(part, saved, hf_shape(t, p).numel());
                widened.assign(values.begin(), values.end());
                part = reinterpret_cast<const std::byte*>(widened.data());
              }
              copy_part_in(part, t, p, element, kiln);
            }
          }};
}

TensorSource zeros(const std::string& name, Shape shape) {
  return {{name, DType::F32, shape}, [shape](void* host) {
            std::memset(host, 0, static_cast<size_t>(shape.numel()) * sizeof(float));
          }};
}

// data.tokenizer of the import: OUTPUT/tokenizer when the directory has tokenizer files
// (copied there once everything is checked), else byte.
std::string tokenizer_spec(const fs::path& input, const fs::path& output,
                           std::vector<std::string>& notes) {
  if (!fs::exists(tokenizer_files(input.string()).front().source)) {
    notes.push_back(input.string() +
                    " has no tokenizer files; data.tokenizer is byte (set "
                    "another with --set data.tokenizer=SPEC when resuming)");
    return "byte";
  }
  return fs::absolute(output / "tokenizer").lexically_normal().string();
}

}  // namespace

HfImportSummary import_hf(const HfImportOptions& options) {
  const fs::path input(options.input), output(options.output);
  if (!fs::is_directory(input)) fail("import: " + options.input + " is not a folder");
  if (!fs::exists(input / "config.json"))
    fail("import: " + options.input + " has no config.json (a Hugging Face model folder has one)");
  if (fs::exists(output) && !(fs::is_directory(output) && fs::is_empty(output)))
    fail("import: " + options.output + " already exists; give a new folder");

  const std::string config_file = (input / "config.json").string();
  const json hf_config_json = read_hf_json(config_file);
  ModelConfig model = model_from_hf_config(hf_config_json, config_file);
  const int64_t hf_positions = model.seq_len;
  if (options.seq_len > 0) {
    if (!model.is_llama() && options.seq_len > hf_positions)
      fail(fmt::format("import: --seq-len {} exceeds the {} learned positions of {} (n_positions)",
                       options.seq_len, hf_positions, config_file));
    model.seq_len = options.seq_len;
  }
  if (model.sliding_window > 0 && model.sliding_window < model.seq_len)
    fail(fmt::format("import: {}: sliding_window {} is below the context of {} tokens; kiln's attention sees the "
                     "whole sequence, which is the window's only up to its length: import with --seq-len {} or less",
                     config_file, model.sliding_window, model.seq_len, model.sliding_window));
  HfImportSummary summary;
  summary.arch = model.arch;
  // The folder's name, made fit to name a run (and its checkpoint folder) when resumed.
  summary.run_name = kiln::run_name_from(
      output.filename().empty() ? output.parent_path().filename().string() : output.filename().string(), "imported");
  Config config;
  config.model = model;
  if (!options.adapter.empty()) {
    const fs::path adapter_config = fs::path(options.adapter) / "adapter_config.json";
    if (!fs::exists(adapter_config))
      fail("import: " + options.adapter + " has no adapter_config.json (a PEFT adapter folder has one)");
    config.model.lora = read_peft_config(read_hf_json(adapter_config), adapter_config.string(), model);
  }
  set_fine_tune_defaults(config);
  summary.tokenizer = config.data.tokenizer = tokenizer_spec(input, output, summary.notes);
  // Validated as a run validates it, so the checkpoint resumes.
  config = config_from_json(config_to_json(config));

  const HfWeights weights(input);
  const std::vector<HfTensor> map = hf_tensor_map(config.model, deepseek_v3_rope_interleaved(hf_config_json));
  const std::map<int, std::string> bias_names = hf_selection_bias_names(config.model);
  const int64_t skipped = check_weights(weights, map, config.model, hf_positions, bias_names);
  if (skipped > 0)
    summary.notes.push_back(fmt::format("skipped the {} tensors of the multi-token prediction layers past layer {} "
                                        "(model.layers.{}. on), which kiln does not import",
                                        skipped, config.model.n_layer - 1, config.model.n_layer));
  std::unique_ptr<PeftAdapterTensors> adapter;
  if (!options.adapter.empty()) adapter = std::make_unique<PeftAdapterTensors>(options.adapter, config.model);

  // Everything is checked: from here on the output is written.
  if (summary.tokenizer != "byte") {
    fs::create_directories(summary.tokenizer);
    std::vector<TokenizerFile> files = tokenizer_files(input.string());
    for (TokenizerFile& f : chat_template_files(input.string())) files.push_back(std::move(f));
    for (const TokenizerFile& f : files)
      fs::copy_file(f.source, fs::path(summary.tokenizer) / f.name, fs::copy_options::overwrite_existing);
  }

  // A LoRA import keeps F32, its adapters' dtype, in the weights they merge into on export.
  const DType dtype = adapter ? DType::F32 : kept_dtype(weights, map);
  std::vector<TensorSource> params, moments;
  for (const HfTensor& t : map) {
    if (t.copy) continue;  // checked to equal the tensor it copies
    params.push_back(model_source(weights, t, dtype));
    // Under LoRA the base is frozen: no optimizer state.
    if (!adapter) {
      moments.push_back(zeros("exp_avg." + t.kiln_name, t.kiln_shape));
      moments.push_back(zeros("exp_avg_sq." + t.kiln_name, t.kiln_shape));
    }
    for (const HfPart& p : t.parts) summary.parameters += hf_shape(t, p).numel();
  }
  if (adapter) {
    for (const TensorSource& source : adapter->sources()) {
      params.push_back(source);
      moments.push_back(zeros("exp_avg." + source.info.name, source.info.shape));
      moments.push_back(zeros("exp_avg_sq." + source.info.name, source.info.shape));
    }
    summary.parameters += adapter->parameters();
  }
  TrainingState state;
  state.seed = config.train.seed;
  state.run_name = summary.run_name;
  state.layout = "tp1.pp1.dp1";
  state.config = config_to_json(config);
  state.expert_bias = selection_bias_of(weights, bias_names, config.model.moe.num_experts);
  summary.checkpoint = write_checkpoint(output.string(), state, params, moments, 0).path;

  if (summary.tokenizer != "byte") {
    try {
      const int32_t ids = load_tokenizer(summary.tokenizer)->vocab_size();
      if (ids > model.vocab_size)
        summary.notes.push_back(fmt::format(
            "the tokenizer has {} ids, more than the model's vocab_size {}", ids, model.vocab_size));
    } catch (const Error& e) {
      summary.notes.push_back(std::string("kiln cannot read the tokenizer (") + e.what() +
                              "); set another with --set data.tokenizer=SPEC when resuming");
    }
  }
  return summary;
}

}  // namespace kiln
