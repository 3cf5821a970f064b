#include "trainer/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/core.h>

#include "base/check.h"
#include "base/private_files.h"
#include "base/run_names.h"
#include "trainer/checkpoint/durable_file.h"
#include "trainer/memory/host_copy.h"
#include "trainer/steer/setting.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "kiln-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kLatestFile = "latest";
// "step-" and at most 19 digits, and a line break: `latest` is read to this bound and no more.
constexpr size_t kMaxLatestBytes = 64;
// state.json holds the config and each MoE layer's selection bias: generous, yet a file that
// is not a checkpoint's (a link to /dev/zero) cannot exhaust memory.
constexpr size_t kMaxJsonBytes = size_t{64} << 20;

// Optimizer tensors per parameter, as PyTorch's AdamW names its state.
std::vector<std::pair<std::string, Tensor>> optimizer_tensors(const GptModel& model,
                                                              const OptimizerState& optimizer) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Parameter& p : model.parameters().all()) {
    if (p.frozen) continue;  // a LoRA run's base: no optimizer state
    out.push_back({"exp_avg." + p.name, p.view_in(optimizer.exp_avg)});
    out.push_back({"exp_avg_sq." + p.name, p.view_in(optimizer.exp_avg_sq)});
    if (optimizer.master_copy)
      out.push_back({"master." + p.name, p.view_in(optimizer.master)});
  }
  return out;
}

// Device tensors as sources: each copied to the host when its turn comes.
std::vector<TensorSource> device_sources(
    const std::vector<std::pair<std::string, Tensor>>& tensors, Ops& ops) {
  std::vector<TensorSource> out;
  for (const auto& [name, t] : tensors)
    out.push_back({{name, t.dtype, t.shape}, [&ops, t](void* host) {
                     ops.copy_to_host(host, t);
                   }});
  return out;
}

// Writes tensors into one safetensors file, one host copy at a time.
json write_tensors(const std::string& path, const std::vector<TensorSource>& tensors) {
  std::vector<TensorInfo> infos;
  for (const TensorSource& t : tensors) infos.push_back(t.info);
  SafetensorsWriter writer(path, infos, {{"format", kFormat}}, FileAccess::OwnerOnly);
  std::vector<std::byte> host;
  for (const TensorSource& t : tensors) {
    host.resize(static_cast<size_t>(t.info.shape.numel()) * dtype_size(t.info.dtype));
    t.read(host.data());
    writer.write_tensor(host.data(), host.size());
  }
  const DurableWriter& file = writer.close();
  return {{"bytes", file.bytes()}, {"sha256", file.sha256()}};
}

json write_text(const std::string& path, const std::string& text) {
  DurableWriter file(path, FileAccess::OwnerOnly);
  file.write(text.data(), text.size());
  file.close();
  return {{"bytes", file.bytes()}, {"sha256", file.sha256()}};
}

// {"3": [...]}: JSON keys are strings.
json expert_bias_to_json(const std::map<int, std::vector<double>>& bias) {
  json j = json::object();
  for (const auto& [layer, values] : bias) j[std::to_string(layer)] = values;
  return j;
}

std::map<int, std::vector<double>> expert_bias_from_json(const json& j, const std::string& file) {
  std::map<int, std::vector<double>> bias;
  for (const auto& [layer, values] : j.items()) {
    const bool number = !layer.empty() && layer.size() <= 6 &&
                        std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; });
    std::vector<double> v = values.get<std::vector<double>>();
    if (!number || !std::all_of(v.begin(), v.end(), [](double b) { return std::isfinite(b); }))
      fail("checkpoint: " + file + " is damaged: the selection bias of layer " + layer +
           " is not a list of numbers under a layer number");
    bias[std::stoi(layer)] = std::move(v);
  }
  return bias;
}

json state_to_json(const TrainingState& s) {
  json j = {{"format", kFormat},
          {"version", kVersion},
          {"step", s.step},
          {"optimizer_steps", s.optimizer_steps},
          {"consumed_samples", s.consumed_samples},
          {"seed", s.seed},
          {"lr_scale", s.lr_scale},
          {"loss_scaler",
           {{"scale", s.loss_scaler.scale},
            {"clean_steps", s.loss_scaler.clean_steps},
            {"skipped", s.loss_scaler.skipped}}},
          {"run_name", s.run_name},
          {"layout", s.layout},
          {"config", s.config},
          {"expert_bias", expert_bias_to_json(s.expert_bias)}};
  if (s.step_seconds) j["step_seconds"] = *s.step_seconds;
  return j;
}

// "step-" and at least 8 digits, as checkpoints are named.
bool is_step_folder_name(const std::string& name) {
  return name.size() >= 13 && name.size() <= 24 && name.rfind("step-", 0) == 0 &&
         std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The step a step folder's name holds; nullopt for another name, or a number past int64.
std::optional<int64_t> step_of_folder(const std::string& name) {
  int64_t step = 0;
  if (!is_step_folder_name(name)) return std::nullopt;
  const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + name.size(), step);
  if (ec != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return step;
}

// A state whose numbers no run could have written is damaged, whatever its checksums say:
// it must not start a run at a negative step or a NaN learning rate.
void check_state(const TrainingState& s, const std::string& file) {
  const auto bad = [&](const std::string& what) { fail("checkpoint: " + file + " is damaged: " + what); };
  if (s.step < 0) bad("step " + std::to_string(s.step) + " is negative");
  if (s.optimizer_steps < 0 || s.optimizer_steps > s.step)
    bad("optimizer_steps " + std::to_string(s.optimizer_steps) + " is not between 0 and the step");
  if (s.consumed_samples < 0) bad("consumed_samples " + std::to_string(s.consumed_samples) + " is negative");
  // The one range steering holds a run to, forced or not (trainer/steer/setting.h).
  if (const std::string problem = lr_scale_problem(s.lr_scale); !problem.empty())
    bad("lr_scale " + fmt::format("{:g}", s.lr_scale) + " is not a number " + problem);
  if (!std::isfinite(s.loss_scaler.scale) || s.loss_scaler.scale <= 0)
    bad("the loss scale " + fmt::format("{:g}", s.loss_scaler.scale) + " is not a positive number");
  if (s.step_seconds && !(std::isfinite(*s.step_seconds) && *s.step_seconds >= 0))
    bad("step_seconds " + fmt::format("{:g}", *s.step_seconds) + " is not a number of seconds");
}

TrainingState state_from_json(const json& j, const std::string& file) {
  try {
    if (j.at("format") != kFormat || j.at("version").get<int>() != kVersion)
      fail("checkpoint: " + file + " is not a kiln checkpoint state of version " +
           std::to_string(kVersion));
    TrainingState s;
    s.step = j.at("step").get<int64_t>();
    s.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    s.consumed_samples = j.at("consumed_samples").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.lr_scale = j.at("lr_scale").get<double>();
    const json& scaler = j.at("loss_scaler");
    s.loss_scaler = {scaler.at("scale").get<double>(), scaler.at("clean_steps").get<int64_t>(),
                     scaler.at("skipped").get<int64_t>()};
    s.run_name = j.at("run_name").get<std::string>();
    s.layout = j.at("layout").get<std::string>();
    s.config = j.at("config");
    // Written since MoE layers came; older checkpoints have no selection bias.
    if (j.contains("expert_bias")) s.expert_bias = expert_bias_from_json(j.at("expert_bias"), file);
    // Written since goodput came.
    if (j.contains("step_seconds")) s.step_seconds = j.at("step_seconds").get<double>();
    check_state(s, file);
    return s;
  } catch (const json::exception& e) {
    fail("checkpoint: " + file + " is damaged: " + e.what());
  }
}

json read_json(const std::string& path) {
  const json j = json::parse(read_small_file(path, kMaxJsonBytes, true, "checkpoint:"), nullptr, false);
  if (j.is_discarded()) fail("checkpoint: " + path + " is damaged (not valid JSON)");
  return j;
}

// Whether a name is there, a link included (which fs::exists would follow).
bool present(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

// Refuses what kiln is about to write a checkpoint into unless it is this user's own real
// folder that no one else may write; the hint says what to do.
void require_own_for_writing(const std::string& path, const std::string& what) {
  if (const std::string why = why_not_private(path); !why.empty())
    fail("checkpoint: " + what + " " + path + " " + why +
         "; checkpoints go only into folders of your own (give the run another --name, or remove it)");
}

// Refuses what a resumed run is about to trust, if it is there (a missing file is reported
// by the checks that follow): it must be this user's own, not a link, and no one else's to
// write, since the run takes its config from it and continues writing beside it.
void require_own_for_resuming(const std::string& path, const std::string& what) {
  if (!present(path)) return;
  if (const std::string why = why_not_private(path); !why.empty())
    fail("checkpoint: " + what + " " + path + " " + why +
         "; kiln resumes only checkpoints of your own (copy one you trust into a folder of yours)");
}

// A new folder 0700 for one write: an existing name (a link planted there) is refused.
void make_new_private_folder(const fs::path& path) {
  if (::mkdir(path.c_str(), 0700) != 0)
    fail("checkpoint: cannot create " + path.string() + ": " + std::strerror(errno));
}

// Keeps the newest `keep` checkpoints under root, and clears temporary folders that a
// crashed write left behind.
void prune(const std::string& root, const std::string& just_written, int keep) {
  std::vector<std::string> steps;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0) fs::remove_all(entry.path());
    else if (name.rfind("step-", 0) == 0 && entry.is_directory()) steps.push_back(name);
  }
  if (keep <= 0) return;
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
    if (steps[i] != just_written) fs::remove_all(fs::path(root) / steps[i]);
}

// Copies saved bytes into a device tensor, converting when the dtypes differ.
void load_into(Ops& ops, const Tensor& dst, const SafetensorsFile& file, const std::string& name) {
  const TensorInfo& info = file.info(name);
  if (!(info.shape == dst.shape))
    fail("checkpoint: " + name + " is " + info.shape.str() + " in " + file.path() + ", " +
         dst.shape.str() + " in this model");
  const auto bytes = file.data(name);
  if (info.dtype == dst.dtype) {
    ops.copy_from_host(dst, bytes.data());
  } else {
    copy_from_doubles(ops, dst, doubles_from_bytes(bytes.data(), info.dtype, dst.numel()));
  }
}

// load_into for this rank's piece of a tensor-parallel parameter (or of a tensor laid out
// like it): the file holds the whole tensor.
void load_piece(Ops& ops, const Tensor& dst, const Parameter& p, const SafetensorsFile& file,
                const std::string& name) {
  if (!p.split.sharded()) return load_into(ops, dst, file, name);
  const TensorInfo& info = file.info(name);
  const Shape whole = p.whole_shape();
  if (!(info.shape == whole))
    fail("checkpoint: " + name + " is " + info.shape.str() + " in " + file.path() + ", " +
         whole.str() + " in this model");
  const auto bytes = file.data(name);
  copy_from_doubles(ops, dst, p.piece_of(doubles_from_bytes(bytes.data(), info.dtype, whole.numel())));
}

}  // namespace

CheckpointSources checkpoint_sources(const GptModel& model, const OptimizerState& optimizer, Ops& ops) {
  std::vector<std::pair<std::string, Tensor>> params;
  for (const Parameter& p : model.parameters().all()) params.push_back({p.name, p.value});
  return {device_sources(params, ops), device_sources(optimizer_tensors(model, optimizer), ops)};
}

WrittenCheckpoint save_checkpoint(const std::string& root, const TrainingState& state,
                                  const GptModel& model, const OptimizerState& optimizer,
                                  Ops& ops, int keep) {
  const CheckpointSources sources = checkpoint_sources(model, optimizer, ops);
  return write_checkpoint(root, state, sources.model, sources.optimizer, keep);
}

WrittenCheckpoint write_checkpoint(const std::string& root, const TrainingState& state,
                                   const std::vector<TensorSource>& model,
                                   const std::vector<TensorSource>& optimizer, int keep) {
  check_run_folder(root);
  make_private_folder(root);
  const std::string name = fmt::format("step-{:08d}", state.step);
  const fs::path final_path = fs::path(root) / name;
  const fs::path tmp = fs::path(root) / fmt::format(".tmp-{}-{}", name, getpid());
  // A step that is already there (a run resumed from an earlier checkpoint) is replaced, once
  // the new one is whole: checked first, so a link there costs no write.
  const bool replacing = present(final_path);
  if (replacing) require_own_for_writing(final_path.string(), "the step folder");
  fs::remove_all(tmp);
  json files;
  try {
    make_new_private_folder(tmp);
    files[kModelFile] = write_tensors((tmp / kModelFile).string(), model);
    files[kOptimizerFile] = write_tensors((tmp / kOptimizerFile).string(), optimizer);
    files[kStateFile] = write_text((tmp / kStateFile).string(), state_to_json(state).dump(2) + "\n");
    // The manifest last: a folder with a manifest has every file it names.
    const json manifest = {{"format", kFormat}, {"version", kVersion}, {"files", files}};
    write_text((tmp / kManifestFile).string(), manifest.dump(2) + "\n");
    sync_directory(tmp.string());
  } catch (...) {
    // A write that failed (a full disk) leaves no half-written folder taking the space a
    // run that trains on needs for its next checkpoint.
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }

  const fs::path old = fs::path(root) / fmt::format(".tmp-old-{}-{}", name, getpid());
  if (replacing) fs::rename(final_path, old);
  fs::rename(tmp, final_path);
  sync_directory(root);
  write_file_atomically((fs::path(root) / kLatestFile).string(), name + "\n", FileAccess::OwnerOnly);
  fs::remove_all(old);
  prune(root, name, keep);

  int64_t bytes = 0;
  for (const auto& [file, entry] : files.items()) bytes += entry["bytes"].get<int64_t>();
  return {final_path.string(), bytes};
}

std::vector<int64_t> complete_checkpoint_steps(const std::string& root) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::optional<int64_t> step = step_of_folder(entry.path().filename().string());
    if (step && present(entry.path() / kManifestFile)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void drop_checkpoints_after(const std::string& root, int64_t step) {
  check_run_folder(root);
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::optional<int64_t> folder_step = step_of_folder(entry.path().filename().string());
    if (folder_step && *folder_step > step) fs::remove_all(entry.path());
  }
  write_file_atomically((fs::path(root) / kLatestFile).string(), fmt::format("step-{:08d}\n", step),
                        FileAccess::OwnerOnly);
  sync_directory(root);
}

Checkpoint::Checkpoint(std::string path) : path_(std::move(path)) {
  const fs::path dir(path_);
  if (!fs::is_directory(dir)) fail("checkpoint: " + path_ + " is not a folder");
  const fs::path manifest_path = dir / kManifestFile;
  if (!fs::exists(manifest_path))
    fail("checkpoint: " + path_ + " is not a complete checkpoint (it has no " + kManifestFile + ")");
  const json manifest = read_json(manifest_path.string());
  if (!manifest.contains("files") || !manifest["files"].is_object())
    fail("checkpoint: " + manifest_path.string() + " is damaged (no files)");
  for (const char* name : {kModelFile, kOptimizerFile, kStateFile}) {
    const fs::path file = dir / name;
    if (!manifest["files"].contains(name))
      fail("checkpoint: " + manifest_path.string() + " does not list " + name);
    const json& entry = manifest["files"][name];
    if (!fs::exists(file)) fail("checkpoint: " + file.string() + " is missing");
    const auto size = static_cast<int64_t>(fs::file_size(file));
    const auto expected = entry.value("bytes", int64_t{-1});
    if (size != expected)
      fail(fmt::format("checkpoint: {} is damaged: {} bytes, the manifest says {}", file.string(),
                       size, expected));
    if (sha256_of_file(file.string()) != entry.value("sha256", std::string()))
      fail("checkpoint: " + file.string() + " is damaged: its SHA-256 does not match the manifest");
  }
  state_ = state_from_json(read_json((dir / kStateFile).string()), (dir / kStateFile).string());
  model_ = std::make_unique<SafetensorsFile>((dir / kModelFile).string());
  optimizer_ = std::make_unique<SafetensorsFile>((dir / kOptimizerFile).string());
}

void Checkpoint::check_model(const json& model_config) const {
  const json saved = state_.config.value("model", json::object());
  json keys = saved;
  keys.update(model_config);
  for (const auto& [key, unused] : keys.items()) {
    const json here = model_config.value(key, json()), there = saved.value(key, json());
    if (here != there)
      fail(fmt::format("checkpoint: {} holds another model: model.{} is {} there, {} here", path_,
                       key, there.dump(), here.dump()));
  }
}

void Checkpoint::restore(GptModel& model, AdamW& optimizer, Ops& ops) const {
  const bool has_master = has_master_weights(model.parameters());
  const OptimizerState state = optimizer.state_to_restore();
  for (const Parameter& p : model.parameters().all()) {
    // Under mixed precision the F32 master weights are the truth; a run in F32 resuming a
    // mixed-precision checkpoint takes them rather than the rounded copies.
    const bool from_master = has_master && !state.master_copy && optimizer_->contains("master." + p.name);
    // A LoRA run's adapters start fresh from a checkpoint that has none (an import, a full
    // fine-tune): they keep their initial values and zero moments.
    if (p.adapter && !model_->contains(p.name)) {
      ops.fill(p.view_in(state.exp_avg), 0.0);
      ops.fill(p.view_in(state.exp_avg_sq), 0.0);
      if (state.master_copy) ops.cast(p.view_in(state.master), p.value);
      continue;
    }
    load_piece(ops, p.value, p, from_master ? *optimizer_ : *model_, (from_master ? "master." : "") + p.name);
    if (p.frozen) continue;
    load_piece(ops, p.view_in(state.exp_avg), p, *optimizer_, "exp_avg." + p.name);
    load_piece(ops, p.view_in(state.exp_avg_sq), p, *optimizer_, "exp_avg_sq." + p.name);
    if (state.master_copy)
      load_piece(ops, p.view_in(state.master), p, has_master ? *optimizer_ : *model_,
                (has_master ? "master." : "") + p.name);
  }
  optimizer.restored(state, state_.optimizer_steps);
}

bool Checkpoint::has_master_weights(const ParameterSet& params) const {
  for (const Parameter& p : params.all())
    if (!p.frozen && optimizer_->contains("master." + p.name)) return true;
  return false;
}

void Checkpoint::load_parameters(GptModel& model, Ops& ops) const {
  const ParameterSet& params = model.parameters();
  const bool master = params.value_dtype() == DType::F32 && has_master_weights(params);
  for (const Parameter& p : params.all()) {
    const bool from_master = master && optimizer_->contains("master." + p.name);
    load_piece(ops, p.value, p, from_master ? *optimizer_ : *model_, (from_master ? "master." : "") + p.name);
  }
  // The selection bias picks the experts a token takes, at inference as in training.
  for (const auto& [layer, bias] : state_.expert_bias)
    if (MoeMlp* experts = model.experts(layer)) experts->set_bias(ops, bias);
}

namespace {

// The run folder under checkpoint_dir whose `latest` changed last, among this user's own: in
// a checkpoint_dir others share, another user's run is never the one picked.
std::string newest_own_run(const std::string& checkpoint_dir) {
  std::string newest;
  timespec newest_time{};
  bool others = false;
  std::error_code ec;
  for (const auto& run : fs::directory_iterator(checkpoint_dir, ec)) {
    struct stat folder {}, latest {};
    if (::lstat(run.path().c_str(), &folder) != 0) continue;
    if (folder.st_uid != ::geteuid()) {
      others = true;
      continue;
    }
    if (::lstat((run.path() / kLatestFile).c_str(), &latest) != 0) continue;
    const timespec time = latest.st_mtim;
    if (newest.empty() || time.tv_sec > newest_time.tv_sec ||
        (time.tv_sec == newest_time.tv_sec && time.tv_nsec > newest_time.tv_nsec)) {
      newest = run.path().string();
      newest_time = time;
    }
  }
  if (newest.empty())
    fail("--resume latest: no checkpoint " + std::string(others ? "of yours " : "") + "under " + checkpoint_dir +
         " (train.checkpoint_dir)");
  return newest;
}

// Where a spec leads: the checkpoint folder, and the run folder whose `latest` named it ("" when
// the spec named the checkpoint itself).
struct FoundCheckpoint {
  std::string checkpoint;
  std::string run_folder;
};

FoundCheckpoint locate_checkpoint(const std::string& spec, const std::string& checkpoint_dir) {
  if (spec == "latest") return locate_checkpoint(newest_own_run(checkpoint_dir), checkpoint_dir);
  const fs::path path(spec);
  if (present(path / kManifestFile)) return {path.string(), ""};
  const fs::path latest = path / kLatestFile;
  if (present(latest)) {
    // A regular file, never a link, read to a bound: a link to /dev/zero or a FIFO is refused.
    std::string name = read_small_file(latest.string(), kMaxLatestBytes, false, "checkpoint: the latest file");
    name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return c == '\n'; }), name.end());
    // Only a name kiln writes: the file's bytes are never shown, nor followed out of the folder.
    if (!is_step_folder_name(name))
      fail("--resume " + spec + ": its " + kLatestFile +
           " file does not name a checkpoint (expected step-NNNNNNNN); give a checkpoint folder instead");
    return {(path / name).string(), path.string()};
  }
  fail("--resume " + spec + ": not a checkpoint (no " + kManifestFile +
       ") nor a folder of checkpoints (no " + kLatestFile + " file)");
}

}  // namespace

std::string find_checkpoint(const std::string& spec, const std::string& checkpoint_dir) {
  return locate_checkpoint(spec, checkpoint_dir).checkpoint;
}

std::string find_checkpoint_to_resume(const std::string& spec, const std::string& checkpoint_dir) {
  const FoundCheckpoint found = locate_checkpoint(spec, checkpoint_dir);
  if (!found.run_folder.empty()) {
    require_own_for_resuming(found.run_folder, "the run folder");
    require_own_for_resuming((fs::path(found.run_folder) / kLatestFile).string(), "the latest file");
  }
  require_own_for_resuming(found.checkpoint, "the checkpoint folder");
  for (const char* file : {kManifestFile, kStateFile, kModelFile, kOptimizerFile})
    require_own_for_resuming((fs::path(found.checkpoint) / file).string(), "the checkpoint file");
  return found.checkpoint;
}

void check_run_folder(const std::string& root) {
  if (present(root)) require_own_for_writing(root, "the run folder");
}

std::string run_checkpoint_root(const std::string& checkpoint_dir, const std::string& run_name) {
  kiln::check_run_name(run_name);
  const fs::path root = fs::path(checkpoint_dir) / run_name;
  // What check_run_name guarantees, checked where the path is made: one folder down.
  if (root.lexically_normal().lexically_relative(fs::path(checkpoint_dir).lexically_normal()) != fs::path(run_name))
    fail("checkpoint: run name '" + run_name + "' would write outside " + checkpoint_dir);
  return root.string();
}

TrainingState checkpoint_state(const std::string& path) {
  const std::string file = (fs::path(path) / kStateFile).string();
  if (!present(file)) fail("checkpoint: " + file + " is missing");
  return state_from_json(read_json(file), file);
}

nlohmann::json checkpoint_config(const std::string& path) { return checkpoint_state(path).config; }

ResumedConfig resumed_config(const std::string& checkpoint, const std::vector<std::string>& overrides) {
  json config = checkpoint_config(checkpoint);
  ResumedConfig resumed;
  if (config.contains("alerts") && config["alerts"].is_object() && config["alerts"].contains("command")) {
    const json hook = config["alerts"]["command"];
    resumed.dropped_hook = hook.is_string() ? hook.get<std::string>() : hook.dump();
    config["alerts"].erase("command");
  }
  // A hook this command gives is the user's own, whatever the checkpoint held.
  json given = json::object();
  for (const std::string& assignment : overrides) apply_override(given, assignment);
  if (given.contains("/alerts/command"_json_pointer)) resumed.dropped_hook.clear();
  resumed.config = config_with_overrides(std::move(config), overrides);
  return resumed;
}

}  // namespace kiln
