#include "trainer/config/config.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/check.h"

namespace kiln {
namespace {

using nlohmann::json;

// The smallest valid config: only the required keys.
json minimal() {
  return json::parse(R"({"model": {"n_layer": 2, "n_head": 4, "d_model": 64,
                                    "vocab_size": 257, "seq_len": 32}})");
}

Config with(std::vector<std::string> overrides, json j = minimal()) {
  for (const std::string& o : overrides) apply_override(j, o);
  return config_from_json(j);
}

// The message of the kiln::Error that parsing throws, or "" when it does not throw.
std::string json_error(const json& j) {
  try {
    config_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::vector<std::string>& overrides, json j = minimal()) {
  for (const std::string& o : overrides) apply_override(j, o);
  return json_error(j);
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
  << "message: \"" << (haystack) << "\" lacks \"" << (needle) << "\""

TEST(Config, DefaultsFillWhatTheJsonLeavesOut) {
  const Config c = config_from_json(minimal());
  EXPECT_EQ(c.model.arch, "gpt2");
  EXPECT_EQ(c.model.n_layer, 2);
  EXPECT_EQ(c.model.n_kv_head, 0);
  EXPECT_EQ(c.model.kv_heads(), 4);
  EXPECT_EQ(c.model.ffn_dim(), 256);
  EXPECT_EQ(c.model.head_dim(), 16);
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_EQ(c.model.make_vocab_size_divisible_by, 128);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.model.norm_eps, 1e-5);
  EXPECT_EQ(c.train.steps, 1000);
  EXPECT_EQ(c.train.global_batch, 8);
  EXPECT_EQ(c.grad_accum(), 1);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.train.min_lr, 3e-5);
  EXPECT_EQ(c.train.decay, "cosine");
  EXPECT_DOUBLE_EQ(c.train.beta2, 0.95);
  EXPECT_EQ(c.train.seed, 1234u);
  EXPECT_FALSE(c.train.async_checkpoint);
  EXPECT_TRUE(c.data.paths.empty());
  EXPECT_EQ(c.data.split, "969,30,1");
  EXPECT_EQ(c.data.tokenizer, "byte");
  EXPECT_EQ(c.parallel.tp, 1);
  EXPECT_FALSE(c.parallel.sequence_parallel);
  EXPECT_EQ(c.precision.dtype, "fp32");
  EXPECT_EQ(c.backend.device, "auto");
  EXPECT_EQ(c.backend.threads, 0);
  EXPECT_TRUE(c.backend.tune_products);
  EXPECT_EQ(c.store.path, "");
}

TEST(Config, RequiredKeys) {
  for (const char* key : {"n_layer", "n_head", "d_model", "vocab_size", "seq_len"}) {
    json j = minimal();
    j["model"].erase(key);
    EXPECT_EQ(json_error(j), std::string("config: model.") + key + " is required");
  }
  EXPECT_EQ(json_error(json::object()), "config: model.n_layer is required");
}

TEST(Config, TieEmbeddingsDefaultsByArch) {
  EXPECT_TRUE(with({}).model.tie_embeddings);
  EXPECT_FALSE(with({"model.arch=llama"}).model.tie_embeddings);
  EXPECT_TRUE(with({"model.arch=llama", "model.tie_embeddings=true"}).model.tie_embeddings);
  EXPECT_FALSE(with({"model.tie_embeddings=false"}).model.tie_embeddings);
}

TEST(Config, AsyncCheckpointIsABool) {
  EXPECT_TRUE(with({"train.async_checkpoint=true"}).train.async_checkpoint);
  EXPECT_FALSE(with({"train.async_checkpoint=false"}).train.async_checkpoint);
  EXPECT_EQ(error_of({"train.async_checkpoint=sometimes"}),
            "config: train.async_checkpoint must be true or false, got \"sometimes\"");
}

TEST(Config, UnknownSectionsAndKeys) {
  EXPECT_EQ(error_of({"modle.n_layer=3"}), "config: unknown section \"modle\" (did you mean model?)");
  EXPECT_EQ(error_of({"train.lr_max=1"}), "config: unknown key train.lr_max (did you mean train.lr?)");
  EXPECT_EQ(error_of({"model.n_heads=4"}), "config: unknown key model.n_heads (did you mean model.n_head?)");
  EXPECT_EQ(error_of({"train.seq_len=4"}), "config: unknown key train.seq_len (did you mean model.seq_len?)");
  EXPECT_EQ(error_of({"data.path=x"}), "config: unknown key data.path (did you mean data.paths?)");
  EXPECT_EQ(error_of({"model.num_layers=4"}), "config: unknown key model.num_layers (did you mean model.n_layer?)");
  EXPECT_EQ(error_of({"train.zzzzzz=1"}), "config: unknown key train.zzzzzz");
  json j = minimal();
  j["train"] = 3;
  EXPECT_EQ(json_error(j), "config: section train must be an object, got 3");
  EXPECT_HAS(json_error(json::array()), "top level must be an object");
}

TEST(Config, TypesAreChecked) {
  EXPECT_EQ(error_of({"model.n_layer=3.5"}), "config: model.n_layer must be an integer, got 3.5");
  EXPECT_EQ(error_of({"train.lr=fast"}), "config: train.lr must be a number, got \"fast\"");
  EXPECT_EQ(error_of({"parallel.sequence_parallel=1"}),
            "config: parallel.sequence_parallel must be true or false, got 1");
  EXPECT_HAS(error_of({"model.n_layer=\"4\""}), "model.n_layer must be an integer");
  EXPECT_HAS(error_of({"model.n_layer=3000000000"}), "model.n_layer must be an integer from");
  EXPECT_HAS(error_of({"train.seed=-1"}), "train.seed must be an integer from 0");
  EXPECT_HAS(error_of({"data.paths=[\"a\",true]"}), "data.paths[1] must be a string, got true");
  // A number in data.paths is a blend weight, kept as its text.
  EXPECT_EQ(with({"data.paths=[0.7,\"a\",0.3,\"b\"]"}).data.paths,
            (std::vector<std::string>{"0.7", "a", "0.3", "b"}));
  json j = minimal();
  j["model"]["arch"] = 3;
  EXPECT_EQ(json_error(j), "config: model.arch must be a string, got 3");
  j = minimal();
  j["data"]["paths"] = json::object();
  EXPECT_EQ(json_error(j), "config: data.paths must be an array of strings, e.g. [\"data/kjv-bpe\"], got {}");
  EXPECT_EQ(error_of({"data.paths=foo"}),
            "config: data.paths must be an array of strings, e.g. [\"data/kjv-bpe\"], got \"foo\"");
  // Whole floats are integers: 1e5 steps is what the user meant.
  EXPECT_EQ(with({"train.steps=1e5"}).train.steps, 100000);
  EXPECT_EQ(with({"train.seed=18446744073709551615"}).train.seed, 18446744073709551615ull);
}

// Each rule: an override that breaks it, and the text its error must contain.
struct Rule {
  std::vector<std::string> overrides;
  std::string message;
};

TEST(Config, EveryValidationRuleNamesItsKey) {
  const std::vector<Rule> rules = {
      {{"model.n_layer=0"}, "model.n_layer must be >= 1, got 0"},
      {{"model.n_head=0"}, "model.n_head must be >= 1"},
      {{"model.d_model=0"}, "model.d_model must be >= 1"},
      {{"model.vocab_size=0"}, "model.vocab_size must be >= 1"},
      {{"model.seq_len=-4"}, "model.seq_len must be >= 1, got -4"},
      {{"model.n_kv_head=-1"}, "model.n_kv_head must be >= 0"},
      {{"model.d_ff=-1"}, "model.d_ff must be >= 0"},
      {{"model.n_head=5", "model.d_model=256"}, "config: model.n_head=5 does not divide model.d_model=256"},
      {{"model.n_kv_head=3"}, "model.n_kv_head=3 does not divide model.n_head=4"},
      {{"model.arch=llama", "model.n_head=4", "model.d_model=60"}, "the head dimension 15 (model.head_dim, or model.d_model / model.n_head) must be even"},
      {{"model.arch=llama", "model.head_dim=15"}, "the head dimension 15 (model.head_dim, or model.d_model / model.n_head) must be even"},
      {{"model.head_dim=-2"}, "model.head_dim must be >= 0"},
      {{"model.arch=gpt3"}, "model.arch must be one of gpt2, llama, got \"gpt3\""},
      {{"model.rope_theta=0"}, "model.rope_theta must be > 0"},
      {{"model.make_vocab_size_divisible_by=0"}, "model.make_vocab_size_divisible_by must be >= 1"},
      {{"model.norm_eps=0"}, "model.norm_eps must be > 0"},
      {{"model.init_std=-0.02"}, "model.init_std must be > 0"},
      {{"train.steps=0"}, "train.steps must be >= 1"},
      {{"train.global_batch=0"}, "train.global_batch must be >= 1"},
      {{"train.micro_batch=0"}, "train.micro_batch must be >= 1"},
      {{"train.log_interval=0"}, "train.log_interval must be >= 1"},
      {{"train.eval_interval=-1"}, "train.eval_interval must be >= 0"},
      {{"train.eval_iters=-1"}, "train.eval_iters must be >= 0"},
      {{"train.warmup=-1"}, "train.warmup must be >= 0"},
      {{"train.sample_tokens=-1"}, "train.sample_tokens must be >= 0"},
      {{"train.checkpoint_failures=0"}, "train.checkpoint_failures must be >= 1, got 0"},
      {{"train.global_batch=8", "train.micro_batch=3"}, "train.micro_batch=3 does not divide train.global_batch=8"},
      {{"train.lr=0"}, "train.lr must be > 0"},
      {{"train.min_lr=-1e-5"}, "train.min_lr must be in [0, train.lr=0.0003], got -1e-05"},
      {{"train.min_lr=1e-3"}, "train.min_lr must be in [0, train.lr"},
      {{"train.decay=step"}, "train.decay must be one of cosine, linear, wsd, constant"},
      {{"train.wsd_decay_fraction=0"}, "train.wsd_decay_fraction must be in (0, 1], got 0"},
      {{"train.wsd_decay_fraction=1.5"}, "train.wsd_decay_fraction must be in (0, 1]"},
      {{"train.beta1=1"}, "train.beta1 must be in [0, 1), got 1"},
      {{"train.beta2=-0.1"}, "train.beta2 must be in [0, 1)"},
      {{"train.adam_eps=0"}, "train.adam_eps must be > 0"},
      {{"train.weight_decay=-0.1"}, "train.weight_decay must be >= 0"},
      {{"train.clip_grad=-1"}, "train.clip_grad must be >= 0"},
      {{"train.sample_temperature=0"}, "train.sample_temperature must be > 0"},
      {{"data.split=98,2,x"}, "data.split must be 1 to 3 comma-separated"},
      {{"data.split=0,0,0"}, "data.split must be"},
      {{"data.split=1,2,3,4"}, "data.split must be"},
      {{"data.split=1,-2"}, "data.split must be"},
      {{"data.split="}, "data.split must be"},
      {{"data.paths=[\"a\",\"\"]"}, "data.paths[1] is empty"},
      {{"data.tokenizer=\"\""}, "data.tokenizer is empty"},
      {{"model.vocab_size=256"}, "model.vocab_size=256 is smaller than the 257 tokens of data.tokenizer"},
      {{"parallel.tp=0"}, "parallel.tp must be >= 1"},
      {{"parallel.pp=0"}, "parallel.pp must be >= 1"},
      {{"parallel.vpp=0"}, "parallel.vpp must be >= 1"},
      {{"parallel.timeout_s=0"}, "parallel.timeout_s must be > 0"},
      {{"parallel.device_comm=gloo"}, "parallel.device_comm must be one of auto, nccl, mpi, got \"gloo\""},
      {{"parallel.tp=8"}, "parallel.tp=8 does not divide model.n_head=4"},
      {{"model.n_kv_head=1", "parallel.tp=2"}, "parallel.tp=2 does not divide model.n_kv_head=1"},
      {{"model.d_ff=255", "parallel.tp=2"}, "parallel.tp=2 does not divide model.d_ff=255"},
      {{"model.make_vocab_size_divisible_by=1", "parallel.tp=2"}, "parallel.tp=2 does not divide the padded vocab 257"},
      {{"model.seq_len=33", "parallel.tp=2", "parallel.sequence_parallel=true"}, "parallel.tp=2 does not divide model.seq_len=33"},
      {{"parallel.cp=0"}, "parallel.cp must be >= 1"},
      {{"model.seq_len=36", "parallel.cp=4"}, "2 x parallel.cp=8 does not divide model.seq_len=36"},
      {{"model.seq_len=36", "parallel.cp=2", "parallel.tp=4", "parallel.sequence_parallel=true"},
       "parallel.tp=4 does not divide model.seq_len / parallel.cp=18"},
      {{"parallel.pp=4", "model.n_layer=6"}, "parallel.pp * parallel.vpp=4 does not divide model.n_layer=6"},
      {{"parallel.vpp=2"}, "parallel.vpp=2 needs parallel.pp > 1"},
      {{"parallel.last_stage_layers=1"},
       "parallel.first_stage_layers and parallel.last_stage_layers need parallel.pp > 1"},
      {{"parallel.first_stage_layers=-1"}, "parallel.first_stage_layers must be >= 0"},
      {{"parallel.pp=2", "model.n_layer=6", "parallel.first_stage_layers=6"},
       "pipeline: model.n_layer=6 - 6 on the first stage leaves 0 layers, which do not split "
       "evenly over the other 1 of pp x vpp = 2 x 1 = 2 stages (each needs one or more)"},
      {{"precision.dtype=int8"}, "precision.dtype must be one of fp32, bf16, fp16, fp8"},
      {{"precision.fp8_scaling=tensorwise"}, "precision.fp8_scaling must be one of delayed, current"},
      {{"precision.fp8_amax_history=0"}, "precision.fp8_amax_history must be >= 1"},
      {{"precision.fp8_margin=31"}, "precision.fp8_margin must be between 0 and 30, got 31"},
      {{"backend.device=tpu"}, "backend.device must be one of cpu, cuda, auto"},
      {{"backend.threads=-1"}, "backend.threads must be >= 0"},
      {{"backend.attention=flash"}, "backend.attention must be one of auto, cudnn, kiln, got \"flash\""},
      {{"backend.attention=cudnn", "backend.device=cpu"},
       "backend.attention=cudnn needs backend.device=cuda; the CPU backend computes attention "
       "with kiln's kernels"},
      {{"backend.attention=cudnn", "backend.device=cuda"},
       "backend.attention=cudnn needs precision.dtype=bf16 or fp16"},
      {{"precision.dtype=bf16", "data.reset_attention_mask=true", "backend.attention=cudnn"},
       "backend.attention=cudnn cannot reset attention at document boundaries "
       "(data.reset_attention_mask=true); use backend.attention=auto"},
  };
  for (const Rule& rule : rules) {
    SCOPED_TRACE(rule.overrides.back());
    const std::string message = error_of(rule.overrides);
    EXPECT_HAS(message, rule.message);
    EXPECT_EQ(message.rfind("config: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Config, LimitsThatAreValid) {
  // Single-process limits are the trainer's: tp=2 is a valid layout here.
  EXPECT_EQ(with({"parallel.tp=2", "parallel.pp=2", "parallel.vpp=1"}).parallel.tp, 2);
  // Uneven stages: 6 layers as 1 + 2 + 2 + 1 over pp 2 x vpp 2.
  EXPECT_EQ(with({"parallel.pp=2", "parallel.vpp=2", "model.n_layer=6",
                  "parallel.first_stage_layers=1", "parallel.last_stage_layers=1"})
                .parallel.first_stage_layers,
            1);
  EXPECT_EQ(with({"model.n_kv_head=2", "model.arch=llama"}).model.kv_heads(), 2);
  const Config c = with({"train.warmup=1000", "train.min_lr=3e-4", "train.beta1=0", "train.clip_grad=0",
                         "train.eval_interval=0", "train.decay=wsd", "train.wsd_decay_fraction=1",
                         "data.split=100", "backend.device=cuda", "precision.dtype=bf16"});
  EXPECT_EQ(c.train.warmup, 1000);
  EXPECT_EQ(c.data.split, "100");
  EXPECT_EQ(c.train.decay, "wsd");
}

TEST(Config, Overrides) {
  json j = minimal();
  apply_override(j, "train.lr=1e-3");
  EXPECT_TRUE(j["train"]["lr"].is_number_float());  // created: minimal() has no train section
  EXPECT_DOUBLE_EQ(j["train"]["lr"].get<double>(), 1e-3);
  apply_override(j, "data.paths=[\"a\",\"b\"]");
  EXPECT_EQ(j["data"]["paths"], json::array({"a", "b"}));
  apply_override(j, "store.path=runs.db");
  EXPECT_EQ(j["store"]["path"], "runs.db");
  apply_override(j, "model.arch=llama");
  apply_override(j, "model.n_layer=6");
  apply_override(j, "train.sample_prompt=x=1, y=2");  // only the first '=' splits
  apply_override(j, "train.lr=2e-3");                 // later overrides win

  const Config c = config_from_json(j);
  EXPECT_DOUBLE_EQ(c.train.lr, 2e-3);
  EXPECT_EQ(c.data.paths, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(c.store.path, "runs.db");
  EXPECT_EQ(c.model.arch, "llama");
  EXPECT_EQ(c.model.n_layer, 6);
  EXPECT_EQ(c.train.sample_prompt.texts, (std::vector<std::string>{"x=1, y=2"}));
}

TEST(Config, StringKeysKeepTheTextAsWritten) {
  EXPECT_EQ(with({"data.split=100"}).data.split, "100");
  EXPECT_EQ(with({"train.sample_prompt=42"}).train.sample_prompt.first(), "42");
  EXPECT_EQ(with({"train.sample_prompt=\"quoted\""}).train.sample_prompt.first(), "quoted");
  EXPECT_EQ(with({"store.path="}).store.path, "");
}

// A smoke run of a config that warms up longer than it runs trains, warming up over all of it.
TEST(Config, AWarmUpLongerThanTheRunIsFittedToItWithAWarning) {
  Config c = with({"train.steps=20", "train.warmup=50"});
  EXPECT_EQ(fit_to_steps(c.train),
            std::vector<std::string>{"train.warmup=50 is longer than train.steps=20; warming up over all 20 steps"});
  EXPECT_EQ(c.train.warmup, 20);
  EXPECT_TRUE(fit_to_steps(c.train).empty());
}

TEST(Config, ScheduleChangesNameEachKey) {
  const Config before = with({"train.steps=1000", "train.warmup=10"});
  const Config after = with({"train.steps=2000", "train.warmup=10", "train.decay=wsd"});
  EXPECT_EQ(schedule_changes(before.train, after.train),
            (std::vector<std::string>{"train.steps 1000 -> 2000", "train.decay \"cosine\" -> \"wsd\""}));
  EXPECT_TRUE(schedule_changes(before.train, before.train).empty());
}

TEST(Config, APathListIsAlwaysAList) {
  json j = minimal();
  j["data"]["paths"] = "data/kjv";
  EXPECT_EQ(json_error(j), "config: data.paths must be an array of strings, e.g. [\"data/kjv-bpe\"], got \"data/kjv\"");
  EXPECT_EQ(with({"data.paths=[\"data/kjv\"]"}).data.paths, std::vector<std::string>{"data/kjv"});
}

TEST(Config, MalformedOverrides) {
  json j = minimal();
  for (const char* bad : {"train.lr", "lr=3", ".lr=3", "train.=3", "train.lr.x=3", "=3"}) {
    SCOPED_TRACE(bad);
    try {
      apply_override(j, bad);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_HAS(e.what(), "section.key");
      EXPECT_HAS(e.what(), bad);
    }
  }
  j["train"] = 1;
  EXPECT_THROW(apply_override(j, "train.lr=1"), Error);
}

// One prompt or several: a string is one (as every config before lists were), an array is
// several, each sampled at every validation; written back as it was given.
TEST(Config, SamplePromptIsOneStringOrAListOfThem) {
  EXPECT_EQ(with({}).train.sample_prompt.texts, (std::vector<std::string>{""})) << "a new document";
  const Config two = with({"train.sample_prompt=[\"In the\", \"And\"]"});
  EXPECT_EQ(two.train.sample_prompt.texts, (std::vector<std::string>{"In the", "And"}));
  EXPECT_EQ(two.train.sample_prompt.first(), "In the");
  EXPECT_EQ(config_to_json(two)["train"]["sample_prompt"], json::array({"In the", "And"}));
  EXPECT_EQ(config_to_json(with({"train.sample_prompt=Doc"}))["train"]["sample_prompt"], "Doc");
  EXPECT_EQ(error_of({"train.sample_prompt=[]"}),
            "config: train.sample_prompt must be a string or a non-empty array of strings, got []");
  EXPECT_EQ(error_of({"train.sample_prompt=[\"a\", 2]"}),
            "config: train.sample_prompt must be a string or a non-empty array of strings, got [\"a\",2]");
  json many = json::array();
  for (size_t i = 0; i <= SamplePrompts::kMax; ++i) many.push_back("p" + std::to_string(i));
  EXPECT_EQ(error_of({"train.sample_prompt=" + many.dump()}),
            "config: train.sample_prompt lists 17 prompts; at most 16 are sampled");
}

TEST(Config, RoundTrips) {
  for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
           {},
           {"model.arch=llama", "model.n_kv_head=2", "model.d_ff=100", "train.seed=18446744073709551615",
            "train.lr=1.2345678901234567e-4", "data.paths=[\"x\",\"y\"]", "parallel.distributed_optimizer=true",
            "train.sample_prompt=\"hi\\nthere\""},
           {"train.sample_prompt=[\"a\", \"b\\nc\"]"}}) {
    const Config c = with(overrides);
    const json j = config_to_json(c);
    EXPECT_EQ(config_to_json(config_from_json(j)), j);
  }
  const json j = config_to_json(with({"model.arch=llama"}));
  EXPECT_EQ(j["model"]["tie_embeddings"], false);
  EXPECT_EQ(j["model"]["n_kv_head"], 0);  // as given, not resolved to n_head
}

TEST(Config, AttentionBiasIsForLlamaLayers) {
  EXPECT_EQ(error_of({"model.arch=llama", "model.attention_bias=true"}), "");
  EXPECT_EQ(error_of({"model.attention_bias=true"}),
            "config: model.attention_bias is for arch llama (gpt2's layers have every bias already)");
}

TEST(Config, QkNormIsForLlamaLayers) {
  EXPECT_EQ(error_of({"model.arch=llama", "model.qk_norm=true"}), "");
  EXPECT_EQ(error_of({"model.qk_norm=true"}), "config: model.qk_norm is for arch llama (gpt2 normalises no heads)");
}

TEST(Config, LatentAttentionIsCheckedInOneLine) {
  const std::vector<std::string> mla = {"model.arch=llama", "model.attention=mla", "model.kv_lora_rank=16",
                                        "model.qk_nope_head_dim=12", "model.qk_rope_head_dim=8", "model.v_head_dim=10"};
  const auto with_mla = [&](std::vector<std::string> more) {
    more.insert(more.begin(), mla.begin(), mla.end());
    return error_of(more);
  };
  EXPECT_EQ(with_mla({}), "");
  EXPECT_EQ(with_mla({"model.q_lora_rank=24", "parallel.tp=2", "parallel.sequence_parallel=true"}), "");
  const Config c = with({"model.arch=llama", "model.attention=mla", "model.kv_lora_rank=16", "model.qk_nope_head_dim=12",
                         "model.qk_rope_head_dim=8", "model.v_head_dim=10"});
  EXPECT_EQ(c.model.head_dim(), 20);
  EXPECT_EQ(c.model.rope_dim(), 8);
  EXPECT_EQ(c.model.value_head_dim(), 10);
  EXPECT_EQ(error_of({"model.attention=mla"}),
            "config: model.attention=mla needs model.arch=llama (RMSNorm and rotary embeddings)");
  EXPECT_EQ(error_of({"model.arch=llama", "model.attention=gqa"}),
            "config: model.attention must be one of mha, mla, got \"gqa\"");
  EXPECT_EQ(with_mla({"model.qk_rope_head_dim=7"}),
            "config: model.qk_rope_head_dim=7 must be even (rotary embeddings turn pairs)");
  EXPECT_EQ(with_mla({"model.v_head_dim=24"}),
            "config: model.v_head_dim=24 must be at most model.qk_nope_head_dim + model.qk_rope_head_dim = 20");
  EXPECT_EQ(with_mla({"model.kv_lora_rank=0"}), "config: model.kv_lora_rank must be >= 1, got 0");
  const std::string own_heads =
      "config: model.attention=mla sets its heads' widths itself (model.qk_nope_head_dim, qk_rope_head_dim, "
      "v_head_dim; a key and value head for every query head), without model.n_kv_head, model.head_dim, "
      "model.qk_norm or model.attention_bias";
  EXPECT_EQ(with_mla({"model.n_kv_head=2"}), own_heads);
  EXPECT_EQ(with_mla({"model.qk_norm=true"}), own_heads);
  EXPECT_EQ(with_mla({"parallel.cp=2", "parallel.tp=2", "parallel.sequence_parallel=true"}), "");
  EXPECT_EQ(with_mla({"finetune.lora.rank=4"}),
            "config: finetune.lora with model.attention=mla is not supported yet: its projections have no adapters");
}

TEST(Config, MultiTokenPredictionIsCheckedInOneLine) {
  const auto with_mtp = [&](std::vector<std::string> more) {
    more.insert(more.begin(), {"model.arch=llama", "model.mtp_depth=2"});
    return error_of(more);
  };
  EXPECT_EQ(with_mtp({}), "");
  EXPECT_EQ(with_mtp({"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.pp=2", "moe.num_experts=4"}), "");
  const Config c = with({"model.arch=llama", "model.mtp_depth=3", "model.n_layer=4"});
  EXPECT_EQ(c.model.block_count(), 7);
  EXPECT_TRUE(c.model.head_reads_embedding());
  EXPECT_DOUBLE_EQ(c.model.mtp_loss_weight, 0.1);  // Megatron's default
  EXPECT_EQ(with_mtp({"model.mtp_depth=5"}),
            "config: model.mtp_depth must be in [0, 4] (the run store keeps a loss per depth), got 5");
  EXPECT_EQ(with_mtp({"model.mtp_loss_weight=-0.5"}), "config: model.mtp_loss_weight must be a finite number >= 0, got -0.5");
  EXPECT_EQ(error_of({"model.mtp_depth=1"}), "config: model.mtp_depth needs model.arch=llama (DeepSeek's RMSNorm modules)");
  EXPECT_EQ(with_mtp({"parallel.cp=2"}),
            "config: model.mtp_depth with parallel.cp=2 is not supported yet: each depth reads tokens ahead of another "
            "rank's chunk (set parallel.cp=1)");
  EXPECT_EQ(with_mtp({"parallel.pp=2", "parallel.schedule=zbv", "model.n_layer=4"}),
            "config: model.mtp_depth with parallel.schedule=zbv is not supported yet: the modules' weight gradients are "
            "not split from their input's (set parallel.schedule=1f1b)");
  EXPECT_EQ(with_mtp({"finetune.lora.rank=4"}),
            "config: model.mtp_depth with finetune.lora is not supported: the modules have no adapters");
  // Megatron's and DeepSeek's names for the keys.
  EXPECT_EQ(error_of({"model.num_nextn_predict_layers=1"}),
            "config: unknown key model.num_nextn_predict_layers (did you mean model.mtp_depth?)");
}

TEST(Config, TheMistralFamilyAndItsWindowAreCheckedInOneLine) {
  EXPECT_EQ(error_of({"model.arch=llama", "model.family=mistral", "model.sliding_window=64"}), "");
  EXPECT_EQ(error_of({"model.arch=llama", "model.family=qwen"}),
            "config: model.family must be empty (the model is named by its layers) or mistral, got \"qwen\"");
  EXPECT_EQ(error_of({"model.arch=llama", "model.family=mistral", "model.qk_norm=true"}),
            "config: model.family=mistral names a dense Llama layer without attention biases or normalised heads "
            "(MistralForCausalLM's)");
  EXPECT_EQ(error_of({"model.family=mistral"}),
            "config: model.family=mistral names a dense Llama layer without attention biases or normalised heads "
            "(MistralForCausalLM's)");
  EXPECT_EQ(error_of({"model.arch=llama", "model.sliding_window=16"}),
            "config: model.sliding_window=16 is below model.seq_len=32; kiln's attention sees the whole sequence, "
            "which is the window's only up to its length");
  EXPECT_EQ(error_of({"model.sliding_window=64"}),
            "config: model.sliding_window is for arch llama (Mistral's and Mixtral's window)");
}

TEST(Config, AnExplicitHeadDimNeedNotDivideTheModelWidth) {
  const Config c = with({"model.arch=llama", "model.n_head=5", "model.d_model=64", "model.head_dim=24"});
  EXPECT_EQ(c.model.head_dim(), 24);
  EXPECT_EQ(error_of({"model.n_head=5", "model.d_model=64"}), "config: model.n_head=5 does not divide model.d_model=64");
}

TEST(Config, RopeScalingIsCheckedInOneLine) {
  EXPECT_EQ(error_of({"model.arch=llama", "model.rope_scaling=llama3"}), "");
  EXPECT_EQ(error_of({"model.rope_scaling=llama3"}),
            "config: model.rope_scaling=llama3 needs model.arch=llama (gpt2 has no rotary embeddings)");
  EXPECT_EQ(error_of({"model.arch=llama", "model.rope_scaling=yarn"}), "");
  EXPECT_HAS(error_of({"model.arch=llama", "model.rope_scaling=ntk"}), "model.rope_scaling");
  EXPECT_EQ(error_of({"model.arch=llama", "model.rope_scaling=yarn", "model.rope_beta_fast=0.5"}),
            "config: model.rope_beta_fast (0.5) must be above model.rope_beta_slow (1.0)");
  EXPECT_EQ(error_of({"model.rope_scaling=yarn"}),
            "config: model.rope_scaling=yarn needs model.arch=llama (gpt2 has no rotary embeddings)");
  EXPECT_EQ(error_of({"model.arch=llama", "model.rope_scaling=llama3", "model.rope_scaling_factor=0.5"}),
            "config: model.rope_scaling_factor must be >= 1 (got 0.5)");
  EXPECT_EQ(error_of({"model.arch=llama", "model.rope_scaling=llama3", "model.rope_high_freq_factor=1"}),
            "config: model.rope_high_freq_factor (1.0) must be above model.rope_low_freq_factor (1.0)");
}

TEST(Config, ShardLevelsAndTheirAlias) {
  const auto level = [](const std::vector<std::string>& overrides) {
    json j = minimal();
    for (const std::string& o : overrides) apply_override(j, o);
    return shard_level(config_from_json(j).parallel);
  };
  EXPECT_EQ(level({}), ShardLevel::None);
  EXPECT_EQ(level({"parallel.distributed_optimizer=true"}), ShardLevel::Optimizer);
  EXPECT_EQ(level({"parallel.shard=optimizer"}), ShardLevel::Optimizer);
  EXPECT_EQ(level({"parallel.shard=gradients"}), ShardLevel::Gradients);
  // The alias names the lowest level; a higher one shards the optimizer too.
  EXPECT_EQ(level({"parallel.shard=parameters", "parallel.distributed_optimizer=true"}), ShardLevel::Parameters);
  EXPECT_STREQ(shard_name(ShardLevel::Gradients), "gradients");
  EXPECT_HAS(error_of({"parallel.shard_group=2"}), "parallel.shard_group=2 needs parallel.shard");
  EXPECT_HAS(error_of({"parallel.shard=optimizer", "parallel.shard_group=-1"}), "parallel.shard_group");
  EXPECT_HAS(error_of({"parallel.shard=zero3"}), "parallel.shard");
  EXPECT_HAS(error_of({"parallel.shard=gradients", "model.arch=llama", "finetune.lora.rank=4"}),
             "finetune.lora with parallel.shard=gradients is not supported");
  EXPECT_EQ(error_of({"parallel.shard=parameters", "parallel.ep=2", "moe.num_experts=4"}), "");
}

TEST(Config, TheZeroBubbleScheduleAndWhatItRefuses) {
  EXPECT_EQ(error_of({"parallel.pp=2", "parallel.schedule=zb-h1"}), "");
  EXPECT_HAS(error_of({"parallel.schedule=zbh1"}), "parallel.schedule");
  EXPECT_EQ(error_of({"parallel.schedule=zb-h1"}),
            "config: parallel.schedule=zb-h1 needs a pipeline of one chunk a stage (parallel.pp >= 2, "
            "parallel.vpp=1), got pp=1, vpp=1");
  EXPECT_HAS(error_of({"parallel.pp=2", "parallel.vpp=2", "parallel.schedule=zb-h1"}), "got pp=2, vpp=2");
  EXPECT_HAS(error_of({"parallel.pp=2", "parallel.schedule=zb-h1", "parallel.shard=gradients"}),
             "parallel.schedule=zb-h1 with parallel.shard=gradients is not supported yet");
  EXPECT_HAS(error_of({"parallel.pp=2", "parallel.schedule=zb-h1", "precision.dtype=fp8"}),
             "parallel.schedule=zb-h1 with precision.dtype=fp8 is not supported yet");
}

TEST(Config, TheVShapedSchedulesHoldTwoChunksAStage) {
  for (const std::string schedule : {"zbv", "dualpipev"}) {
    const std::string set = "parallel.schedule=" + schedule;
    EXPECT_EQ(error_of({"parallel.pp=2", set, "model.n_layer=4"}), "") << schedule;
    EXPECT_EQ(error_of({"parallel.pp=2", set, "model.n_layer=6"}),
              "config: 2 x parallel.pp (the V's stages)=4 does not divide model.n_layer=6");
    EXPECT_EQ(error_of({"parallel.pp=2", set, "model.n_layer=7", "parallel.first_stage_layers=2",
                        "parallel.last_stage_layers=1"}),
              "")
        << schedule;
    EXPECT_EQ(error_of({set}), "config: parallel.schedule=" + schedule +
                                   " places two chunks a stage in a V itself: it needs parallel.pp >= 2 and "
                                   "parallel.vpp=1, got pp=1, vpp=1");
    EXPECT_HAS(error_of({"parallel.pp=2", "parallel.vpp=2", set, "model.n_layer=8"}), "got pp=2, vpp=2");
    EXPECT_HAS(error_of({"parallel.pp=2", set, "model.n_layer=4", "parallel.shard=parameters"}),
               "parallel.schedule=" + schedule + " with parallel.shard=parameters is not supported yet");
    EXPECT_HAS(error_of({"parallel.pp=2", set, "model.n_layer=4", "precision.dtype=fp8"}),
               "parallel.schedule=" + schedule + " with precision.dtype=fp8 is not supported yet");
  }
  Config v;
  v.parallel.schedule = "dualpipev";
  EXPECT_TRUE(splits_backward(v.parallel) && v_shaped(v.parallel));
  EXPECT_EQ(stage_chunk_count(v.parallel), 2);
  v.parallel.schedule = "zb-h1";
  EXPECT_TRUE(splits_backward(v.parallel) && !v_shaped(v.parallel));
  v.parallel.schedule = "1f1b";
  v.parallel.vpp = 3;
  EXPECT_FALSE(splits_backward(v.parallel));
  EXPECT_EQ(stage_chunk_count(v.parallel), 3);
}

TEST(Config, ToJsonWritesEveryKey) {
  const json j = config_to_json(Config{});
  const std::vector<std::pair<std::string, size_t>> sections = {
      {"model", 35}, {"moe", 18}, {"finetune", 1}, {"train", 27}, {"data", 8}, {"parallel", 18},
      {"precision", 4}, {"backend", 4}, {"store", 1}, {"alerts", 16}};
  EXPECT_EQ(j.size(), sections.size());
  for (const auto& [name, keys] : sections) EXPECT_EQ(j.at(name).size(), keys) << name;
  EXPECT_EQ(j["train"]["adam_eps"], 1e-8);
  EXPECT_EQ(j["data"]["paths"], json::array());
  EXPECT_EQ(j["parallel"]["device_comm"], "auto");
  EXPECT_EQ(j["backend"]["attention"], "kiln");
  EXPECT_EQ(j["backend"]["tune_products"], true);
  EXPECT_EQ(j["finetune"], json::parse(R"({"lora": {"rank": 0, "alpha": 8.0, "dropout": 0.0, "targets": "q,v"}})"));
}

TEST(Config, LoraKeysNestUnderFinetune) {
  EXPECT_FALSE(with({}).model.lora.enabled());
  const Config c = with({"model.arch=llama", "finetune.lora.rank=16", "finetune.lora.alpha=32",
                         "finetune.lora.targets=q,k, v,o,gate,up,down"});
  EXPECT_EQ(c.model.lora.rank, 16);
  EXPECT_DOUBLE_EQ(c.model.lora.scale(), 2.0);
  EXPECT_EQ(c.model.lora.targets, "q,k, v,o,gate,up,down");
  // The same as nested JSON, and back.
  json j = minimal();
  j["finetune"] = json::parse(R"({"lora": {"rank": 4, "targets": "o"}})");
  const Config from_json = config_from_json(j);
  EXPECT_EQ(from_json.model.lora.rank, 4);
  EXPECT_EQ(config_to_json(from_json)["finetune"]["lora"]["targets"], "o");
  EXPECT_EQ(config_from_json(config_to_json(c)).model.lora.targets, c.model.lora.targets);
}

TEST(Config, LoraIsCheckedInOneLine) {
  EXPECT_EQ(error_of({"finetune.lora.rank=-1"}), "config: finetune.lora.rank must be >= 0, got -1");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.alpha=0"}),
            "config: finetune.lora.alpha must be > 0, got 0.0");
  EXPECT_HAS(error_of({"finetune.lora.rank=8", "finetune.lora.targets=q,x"}),
             "config: finetune.lora.targets names no layer \"x\"");
  EXPECT_HAS(error_of({"finetune.lora.rank=8", "finetune.lora.targets=q,x"}), "; arch gpt2 has q,k,v,o,down,fc");
  EXPECT_EQ(error_of({"model.arch=llama", "finetune.lora.rank=8", "finetune.lora.targets=q_proj"}),
            "config: finetune.lora.targets names no layer \"q_proj\" (did you mean q?); arch llama has "
            "q,k,v,o,gate,up,down");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.targets=q,gate"}),
            "config: finetune.lora.targets names \"gate\", which arch gpt2 lacks; it has q,k,v,o,down,fc");
  EXPECT_EQ(error_of({"model.arch=llama", "finetune.lora.rank=8", "finetune.lora.targets=fc"}),
            "config: finetune.lora.targets names \"fc\", which arch llama lacks; it has q,k,v,o,gate,up,down");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.targets=q,q"}),
            "config: finetune.lora.targets names \"q\" twice");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.targets= "}),
            "config: finetune.lora.targets is empty; arch gpt2 has q,k,v,o,down,fc");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.dropout=-0.1"}),
            "config: finetune.lora.dropout must be in [0, 1) (the fraction of each adapter's input dropped), got -0.1");
  EXPECT_HAS(error_of({"finetune.lora.rank=8", "finetune.lora.dropout=1"}), "finetune.lora.dropout must be in [0, 1)");
  EXPECT_EQ(error_of({"finetune.lora.rank=8", "finetune.lora.dropout=0.05"}), "");
  EXPECT_HAS(error_of({"finetune.lora.rank=8", "moe.num_experts=4"}), "finetune.lora with MoE layers");
  EXPECT_HAS(error_of({"finetune.lora.rank=8", "precision.dtype=fp8"}), "finetune.lora with precision.dtype=fp8");
  // Unknown keys within the nested object, and an object where a value belongs.
  EXPECT_EQ(error_of({"finetune.lora.rnak=8"}),
            "config: unknown key finetune.lora.rnak (did you mean finetune.lora.rank?)");
  EXPECT_EQ(error_of({"finetune.lora=8"}), "config: finetune.lora must be an object, got 8");
  json j = minimal();
  j["finetune"] = json::parse(R"({"lora": {"rnak": 8}})");
  EXPECT_HAS(json_error(j), "config: unknown key finetune.lora.rnak");
  EXPECT_HAS(json_error(j), "finetune.lora.rank");
  j["finetune"] = json::parse(R"({"lora": 8})");
  EXPECT_EQ(json_error(j), "config: finetune.lora must be an object, got 8");
}

TEST(Config, AttentionKernelsAreChosenByName) {
  EXPECT_EQ(with({}).backend.attention, "kiln");
  EXPECT_EQ(with({"backend.attention=kiln"}).backend.attention, "kiln");
  // cuDNN needs a GPU and bf16 or fp16; document resets need auto (or kiln).
  EXPECT_EQ(with({"backend.attention=cudnn", "precision.dtype=bf16"}).backend.attention, "cudnn");
  EXPECT_EQ(with({"backend.attention=cudnn", "backend.device=cuda", "precision.dtype=fp16"})
                .backend.attention,
            "cudnn");
  EXPECT_EQ(with({"backend.attention=auto", "data.reset_attention_mask=true"}).backend.attention,
            "auto");
}

TEST(Config, Fp8IsAPrecisionWithItsScalingRecipe) {
  const Config c = with({"precision.dtype=fp8"});
  EXPECT_EQ(c.precision.fp8_scaling, "delayed");
  EXPECT_EQ(c.precision.fp8_amax_history, 1024);
  EXPECT_EQ(c.precision.fp8_margin, 0);
  const Config current =
      with({"precision.dtype=fp8", "precision.fp8_scaling=current", "precision.fp8_margin=2"});
  EXPECT_EQ(current.precision.fp8_scaling, "current");
  EXPECT_EQ(current.precision.fp8_margin, 2);
}

TEST(Config, ProductTuningCanBeTurnedOff) {
  EXPECT_TRUE(with({}).backend.tune_products);
  EXPECT_FALSE(with({"backend.tune_products=false"}).backend.tune_products);
}

TEST(Config, PaddedVocab) {
  ModelConfig m;
  m.vocab_size = 50257;
  EXPECT_EQ(m.padded_vocab(), 50304);
  m.vocab_size = 257;
  m.make_vocab_size_divisible_by = 8;
  EXPECT_EQ(m.padded_vocab(), 264);
  m.vocab_size = 128256;
  m.make_vocab_size_divisible_by = 128;
  EXPECT_EQ(m.padded_vocab(), 128256);
  m.vocab_size = 257;
  m.make_vocab_size_divisible_by = 1;
  EXPECT_EQ(m.padded_vocab(), 257);
}

TEST(Config, SplitFractions) {
  DataConfig d;
  d.split = "98,2,0";
  EXPECT_DOUBLE_EQ(d.split_fractions()[0], 0.98);
  EXPECT_DOUBLE_EQ(d.split_fractions()[1], 0.02);
  EXPECT_DOUBLE_EQ(d.split_fractions()[2], 0.0);
  d.split = "969, 30, 1";
  EXPECT_DOUBLE_EQ(d.split_fractions()[1], 0.03);
  d.split = "100";
  EXPECT_DOUBLE_EQ(d.split_fractions()[0], 1.0);
  EXPECT_DOUBLE_EQ(d.split_fractions()[2], 0.0);
  d.split = "nope";
  EXPECT_THROW(d.split_fractions(), Error);
}

TEST(Config, EmbeddedTinyConfigLoads) {
  const Config c = load_config("", {});
  EXPECT_EQ(c.model.arch, "gpt2");
  EXPECT_EQ(c.model.n_layer, 4);
  EXPECT_EQ(c.model.d_model, 128);
  EXPECT_EQ(c.model.vocab_size, 2048);  // the demo's BPE, trained on its corpus
  EXPECT_EQ(c.model.padded_vocab(), 2048);
  EXPECT_EQ(c.backend.device, "cpu");
  EXPECT_EQ(c.data.paths, std::vector<std::string>{"data/kjv-bpe"});
  EXPECT_EQ(c.data.tokenizer, "data/kjv-tokenizer");
  const Config changed = load_config("", {"train.steps=10", "train.warmup=5"});
  EXPECT_EQ(changed.train.steps, 10);
  EXPECT_EQ(changed.model.n_layer, 4);
}

TEST(Config, LoadsFilesAndReportsBadOnes) {
  const auto dir = std::filesystem::temp_directory_path() / "kiln_config_test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string good = write("good.json", minimal().dump());
  EXPECT_EQ(load_config(good, {"model.n_layer=3"}).model.n_layer, 3);

  const std::string broken = write("broken.json", "{\"model\": {\"n_layer\": 2,}}");
  try {
    load_config(broken, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_HAS(e.what(), "config: " + broken + ": parse error at line 1");
  }
  EXPECT_THROW(
      {
        try {
          load_config((dir / "missing.json").string(), {});
        } catch (const Error& e) {
          EXPECT_HAS(e.what(), "config: cannot open");
          throw;
        }
      },
      Error);
  std::filesystem::remove_all(dir);
}

TEST(Config, EveryShippedConfigLoads) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_SOURCE_DIR "/configs")) {
    // A fine-tune's recipe is a part of a config (trainer/train/finetune_setup_test.cpp).
    if (entry.path().extension() != ".json" || entry.path().filename().string().starts_with("finetune-")) continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config(entry.path().string(), {}));
    ++count;
  }
  EXPECT_GE(count, 6u);
}

TEST(Config, ShippedConfigsHaveThePublishedShapes) {
  const auto load = [](const char* name) { return load_config(std::string(KILN_SOURCE_DIR "/configs/") + name, {}); };
  struct Shape {
    const char* file;
    const char* arch;
    int n_layer, n_head, kv_heads, d_model, head_dim, ffn_dim, vocab_size, seq_len;
    int64_t padded_vocab;
    bool tied;
  };
  for (const Shape& s : {Shape{"gpt2-124m.json", "gpt2", 12, 12, 12, 768, 64, 3072, 50257, 1024, 50304, true},
                         Shape{"gpt2-350m.json", "gpt2", 24, 16, 16, 1024, 64, 4096, 50257, 1024, 50304, true},
                         Shape{"gpt2-1.5b.json", "gpt2", 48, 25, 25, 1600, 64, 6400, 50257, 1024, 50304, true},
                         Shape{"llama-1b.json", "llama", 16, 32, 8, 2048, 64, 8192, 128256, 2048, 128256, true},
                         Shape{"llama-8b.json", "llama", 32, 32, 8, 4096, 128, 14336, 128256, 2048, 128256, false}}) {
    SCOPED_TRACE(s.file);
    const ModelConfig m = load(s.file).model;
    EXPECT_EQ(m.arch, s.arch);
    EXPECT_EQ(m.n_layer, s.n_layer);
    EXPECT_EQ(m.n_head, s.n_head);
    EXPECT_EQ(m.kv_heads(), s.kv_heads);
    EXPECT_EQ(m.d_model, s.d_model);
    EXPECT_EQ(m.ffn_dim(), s.ffn_dim);
    EXPECT_EQ(m.vocab_size, s.vocab_size);
    EXPECT_EQ(m.seq_len, s.seq_len);
    EXPECT_EQ(m.padded_vocab(), s.padded_vocab);
    EXPECT_EQ(m.tie_embeddings, s.tied);
    EXPECT_EQ(m.head_dim(), s.head_dim);
    if (m.is_llama()) {
      EXPECT_DOUBLE_EQ(m.rope_theta, 500000.0);
    }
  }
}

TEST(Config, ShippedMoeConfigsHaveTheirExperts) {
  const auto load = [](const char* name) { return load_config(std::string(KILN_SOURCE_DIR "/configs/") + name, {}); };
  const ModelConfig mixtral = load("mixtral-8x1b.json").model;
  EXPECT_EQ(mixtral.moe.num_experts, 8);
  EXPECT_EQ(mixtral.moe.top_k, 2);
  EXPECT_TRUE(mixtral.moe.is_moe_layer(15));
  const ModelConfig deepseek = load("deepseek-moe-16b.json").model;
  EXPECT_EQ(deepseek.moe.num_experts, 64);
  EXPECT_EQ(deepseek.moe.top_k, 6);
  EXPECT_EQ(deepseek.moe.shared_experts, 2);
  EXPECT_EQ(deepseek.moe.score, "sigmoid");
  EXPECT_FALSE(deepseek.moe.is_moe_layer(0));  // DeepSeek's first layer stays dense
  EXPECT_TRUE(deepseek.moe.is_moe_layer(26));
  EXPECT_EQ(load("moe-tiny.json").model.moe.num_experts, 8);
}

TEST(Config, MixtureOfExpertsKeysAreChecked) {
  const Config c = with({"moe.num_experts=8", "moe.top_k=2", "moe.layer_freq=2"});
  EXPECT_TRUE(c.model.moe.enabled());
  EXPECT_TRUE(c.model.moe.is_moe_layer(0));
  EXPECT_FALSE(c.model.moe.is_moe_layer(1));
  EXPECT_EQ(c.model.expert_ffn_dim(), c.model.ffn_dim());
  const Config listed = with({"moe.num_experts=4", "moe.layers=1, 0"});
  EXPECT_TRUE(listed.model.moe.is_moe_layer(1));
  EXPECT_TRUE(listed.model.moe.is_moe_layer(0));
  EXPECT_FALSE(with({}).model.moe.is_moe_layer(0));
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.top_k=5"}),
            "config: moe.top_k=5 is more than moe.num_experts=4");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.layers=0,2"}),
            "config: moe.layers must list layer numbers from 0 to model.n_layer - 1 = 1 "
            "separated by commas, got \"0,2\"");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.score=relu"}),
            "config: moe.score must be one of softmax, sigmoid, got \"relu\"");
  const Config deepseek = with({"model.n_layer=4", "moe.num_experts=8", "moe.top_k=4", "moe.route_groups=4",
                                "moe.route_groups_topk=2", "moe.dense_layers=1"});
  EXPECT_FALSE(deepseek.model.moe.is_moe_layer(0));
  EXPECT_TRUE(deepseek.model.moe.is_moe_layer(1));
  EXPECT_TRUE(deepseek.model.moe.is_moe_layer(3));
  EXPECT_EQ(error_of({"moe.num_experts=8", "moe.route_groups=3"}),
            "config: moe.route_groups=3 does not divide moe.num_experts=8");
  EXPECT_EQ(error_of({"moe.num_experts=8", "moe.route_groups=2", "moe.route_groups_topk=3"}),
            "config: moe.route_groups_topk=3 is more than moe.route_groups=2");
  EXPECT_EQ(error_of({"moe.num_experts=8", "moe.top_k=1", "moe.route_groups=4", "moe.route_groups_topk=2"}),
            "config: moe.route_groups_topk=2 is more than moe.top_k=1: each group is scored by its best top_k / "
            "route_groups_topk experts, at least one");
  EXPECT_EQ(error_of({"moe.num_experts=8", "moe.top_k=4", "moe.route_groups=4", "moe.route_groups_topk=1"}),
            "config: moe.top_k=4 is more than the 2 experts of moe.route_groups_topk=1 groups");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.dense_layers=1", "moe.layers=1"}),
            "config: moe.dense_layers and moe.layers both choose the MoE layers; give one");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.dense_layers=2"}),
            "config: moe.dense_layers=2 leaves none of the model's 2 layers an MoE layer");
  EXPECT_EQ(error_of({"moe.n_group=2"}), "config: unknown key moe.n_group (did you mean moe.route_groups?)");
  EXPECT_EQ(error_of({"moe.routed_scaling_factor=2.5"}),
            "config: unknown key moe.routed_scaling_factor (did you mean moe.gate_scale?)");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.pad_to_capacity=true"}),
            "config: moe.pad_to_capacity needs moe.capacity_factor > 0 (dropless experts have no "
            "capacity)");
  EXPECT_EQ(error_of({"moe.num_experts=4", "moe.ffn_hidden=30", "parallel.tp=4"}),
            "config: parallel.tp=4 does not divide moe.ffn_hidden=30");
  EXPECT_EQ(error_of({"parallel.ep=2"}),
            "config: parallel.ep=2 splits the experts of MoE layers, and this model has none; set "
            "moe.num_experts or parallel.ep=1");
  EXPECT_EQ(error_of({"moe.num_experts=4", "parallel.ep=3"}),
            "config: parallel.ep=3 does not divide moe.num_experts=4");
  EXPECT_EQ(error_of({"moe.num_experts=4", "parallel.ep=0"}),
            "config: parallel.ep must be >= 1, got 0");
  EXPECT_EQ(error_of({"parallel.expert_model_parallel_size=2"}),
            "config: unknown key parallel.expert_model_parallel_size (did you mean parallel.ep?)");
  EXPECT_EQ(error_of({"model.num_experts=4"}),
            "config: unknown key model.num_experts (did you mean moe.num_experts?)");
  EXPECT_EQ(error_of({"moe.num_experts=4", "parallel.tp=2", "parallel.etp=3"}),
            "config: parallel.etp=3 must be 1 (whole experts) or parallel.tp=2 (0 says the same)");
  EXPECT_EQ(error_of({"moe.num_experts=4", "parallel.tp=2", "parallel.etp=1"}),
            "config: parallel.etp=1 with parallel.tp=2 needs parallel.sequence_parallel=true: each "
            "tensor rank routes its own share of the tokens");
  EXPECT_EQ(error_of({"moe.num_experts=4", "parallel.cp=2"}),
            "config: parallel.cp=2 with MoE layers is not supported yet: context parallelism trains dense "
            "models (set parallel.cp=1 or moe.num_experts=0)");
  EXPECT_EQ(error_of({"parallel.expert_tensor_parallel_size=1"}),
            "config: unknown key parallel.expert_tensor_parallel_size (did you mean parallel.etp?)");
}

TEST(Config, AlertsAreOnByDefaultAndTheirKeysAreChecked) {
  const AlertsConfig a = with({}).alerts;
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.window, 50);
  EXPECT_DOUBLE_EQ(a.loss_zscore, 6);
  EXPECT_DOUBLE_EQ(a.memory_fraction, 0.95);
  EXPECT_TRUE(a.action_map().empty());
  const auto actions = with({"alerts.actions=loss_spike=stop, straggler = checkpoint"}).alerts.action_map();
  EXPECT_EQ(actions, (std::map<std::string, std::string>{{"loss_spike", "stop"}, {"straggler", "checkpoint"}}));
  EXPECT_EQ(error_of({"alerts.window=1"}), "config: alerts.window must be >= 2, got 1");
  EXPECT_EQ(error_of({"alerts.min_samples=60"}), "config: alerts.min_samples=60 is more than alerts.window=50");
  EXPECT_EQ(error_of({"alerts.throughput_fraction=1"}), "config: alerts.throughput_fraction must be in [0, 1), got 1.0");
  EXPECT_EQ(error_of({"alerts.memory_fraction=1.5"}), "config: alerts.memory_fraction must be in [0, 1], got 1.5");
  EXPECT_EQ(error_of({"alerts.command_timeout_s=0"}), "config: alerts.command_timeout_s must be > 0, got 0.0");
  EXPECT_EQ(error_of({"alerts.straggler_steps=0"}), "config: alerts.straggler_steps must be >= 1, got 0");
  EXPECT_EQ(error_of({"alerts.throughput_steps=0"}), "config: alerts.throughput_steps must be >= 1, got 0");
  EXPECT_EQ(error_of({"alerts.actions=loss=stop"}),
            "config: alerts.actions names no rule \"loss\" (rules: nan, loss_spike, grad_spike, throughput, "
            "straggler, stall, memory); write rule=action, e.g. \"loss_spike=pause\"");
  EXPECT_EQ(error_of({"alerts.actions=stall=reboot"}),
            "config: alerts.actions' action for stall must be one of pause, checkpoint, stop, got \"reboot\"");
  EXPECT_EQ(error_of({"alerts.actions=nan=stop"}),
            "config: alerts.actions cannot act on nan: a run whose loss is not a number ends failed");
  EXPECT_EQ(error_of({"alerts.actions=memory=stop,memory=pause"}), "config: alerts.actions names memory twice");
  EXPECT_EQ(error_of({"alerts.stall=5"}), "config: unknown key alerts.stall (did you mean alerts.stall_s?)");
}

TEST(Config, RewindIsTheLossSpikesActionAloneAndReservesItsSkippedData) {
  const AlertsConfig plain = with({}).alerts;
  EXPECT_EQ(plain.rewind_skip, 200);
  EXPECT_EQ(plain.max_rewinds, 3);
  EXPECT_FALSE(plain.rewinds());
  EXPECT_EQ(plain.rewind_reserve(), 0);
  const AlertsConfig a = with({"alerts.actions=loss_spike=rewind", "alerts.rewind_skip=50", "alerts.max_rewinds=4"}).alerts;
  EXPECT_TRUE(a.rewinds());
  EXPECT_EQ(a.rewind_reserve(), 200);
  // Off when the rule that would ask for it is.
  EXPECT_FALSE(with({"alerts.actions=loss_spike=rewind", "alerts.loss_zscore=0"}).alerts.rewinds());
  EXPECT_FALSE(with({"alerts.actions=loss_spike=rewind", "alerts.enabled=false"}).alerts.rewinds());
  EXPECT_EQ(with({"alerts.actions=loss_spike=rewind", "alerts.rewind_skip=0"}).alerts.rewind_reserve(), 0);
  EXPECT_EQ(error_of({"alerts.actions=grad_spike=rewind"}),
            "config: alerts.actions: rewind is the loss_spike rule's action alone (it goes back to the checkpoint "
            "before the spike); grad_spike can pause, checkpoint or stop");
  EXPECT_EQ(error_of({"alerts.actions=nan=rewind"}),
            "config: alerts.actions cannot act on nan: a run whose loss is not a number ends failed");
  EXPECT_EQ(error_of({"alerts.actions=loss_spike=undo"}),
            "config: alerts.actions' action for loss_spike must be one of pause, checkpoint, stop, rewind, got \"undo\"");
  EXPECT_EQ(error_of({"alerts.rewind_skip=-1"}), "config: alerts.rewind_skip must be >= 0, got -1");
  EXPECT_EQ(error_of({"alerts.max_rewinds=0"}), "config: alerts.max_rewinds must be >= 1, got 0");
}

}  // namespace
}  // namespace kiln
