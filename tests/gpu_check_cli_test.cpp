// scripts/gpu-check without a GPU: each test copies the script (and bench/gpu_step.py, which it
// runs) into a checkout of its own, so that whatever the check writes lands there, and puts a
// fake nvidia-smi first on the PATH and fake binaries in a build folder (--build). What is
// proved: no GPU, a GPU kiln cannot use and cuDNN not loading each end the check in one line;
// the plan keeps the priority order and starts only what fits the budget; every stage appends
// its records as it finishes, and the budget stops the stage in flight. And cuda_tests under
// KILN_REQUIRE_GPU=1, which the check sets, fails the run whose test skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/ops.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_file(const fs::path& path, const std::string& text, bool executable = false) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  if (executable) fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
}

// nvidia-smi listing one H100 whose driver supports CUDA 12.2, or none.
std::string fake_nvidia_smi(bool gpu) {
  if (!gpu) return "#!/bin/sh\necho 'No devices were found'\nexit 6\n";
  return "#!/bin/sh\n"
         "case \"$1\" in\n"
         "  --query-gpu=name,driver_version) echo 'NVIDIA H100 80GB HBM3, 535.104.05' ;;\n"
         "  --query-gpu=name) echo 'NVIDIA H100 80GB HBM3' ;;\n"
         "  --query-gpu=driver_version) echo '535.104.05' ;;\n"
         "  *) echo '| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |' ;;\n"
         "esac\n";
}

// kiln_bench_step: --describe probes pass unless `probe_error` is given (printed as the
// binary prints an error, for the probes that contain `probe_match`); --sleep N waits N seconds (an
// A/B arm that outlasts the budget); --profile writes its JSON; --benchmark_out=FILE gets one
// benchmark's JSON, as does stdout otherwise (bench/gpu_step.py reads it there).
std::string fake_bench_step(const std::string& probe_match = "", const std::string& probe_error = "") {
  std::string s =
      "#!/bin/sh\n"
      "out= profile= sleep=0 prev=\n"
      "for a in \"$@\"; do\n"
      "  case \"$prev\" in --profile-json) profile=$a ;; --sleep) sleep=$a ;; esac\n"
      "  case \"$a\" in --benchmark_out=*) out=${a#--benchmark_out=} ;; esac\n"
      "  prev=$a\n"
      "done\n";
  if (!probe_error.empty())
    s += "case \"$*\" in *" + probe_match + "*--describe*|*--describe*" + probe_match +
         "*) echo 'kiln_bench_step: " + probe_error + "' >&2; exit 1 ;; esac\n";
  s += "case \"$*\" in *--describe*) echo '{}'; exit 0 ;; esac\n"
       "if [ -n \"$profile\" ]; then\n"
       "  echo '{\"gemm_tflops\": 798, \"ops\": [{\"op\": \"matmul\", \"ms_per_step\": 1.5}]}' > \"$profile\"\n"
       "  echo '| op | ms/step |'; exit 0\n"
       "fi\n"
       "sleep \"$sleep\"\n"
       "result='{\"benchmarks\": [{\"name\": \"kiln_step\", \"label\": \"cuda:0 (NVIDIA H100 80GB HBM3)\","
       " \"real_time\": 40.0, \"tok_per_s\": 400000.0, \"tflops\": 340.0, \"mfu\": 0.34, \"hfu\": 0.35,"
       " \"peak_mem_bytes\": 8.5e9, \"device_mem_bytes\": 8.5e9, \"fwd_ms\": 13.0, \"bwd_ms\": 25.0,"
       " \"opt_ms\": 2.0}]}'\n"
       "if [ -n \"$out\" ]; then echo \"$result\" > \"$out\"; echo 'kiln_step 40.0 ms'; else echo \"$result\"; fi\n";
  return s;
}

// cuda_tests: each shard writes gtest's JSON report with one passing test, except shard 3,
// whose test fails, and shard 5, whose test skipped (the run exits 1 for both, as
// cuda_test_main.cpp's does under KILN_REQUIRE_GPU=1); every test fails where the check did not
// set KILN_REQUIRE_GPU=1 and the paths of kiln and the sources.
std::string fake_cuda_tests(const std::string& build, const std::string& root) {
  return "#!/bin/sh\n"
         "for a in \"$@\"; do case \"$a\" in --gtest_output=json:*) report=${a#--gtest_output=json:} ;; esac; done\n"
         "name=Shard$GTEST_SHARD_INDEX failures= result=COMPLETED\n"
         "[ \"$GTEST_SHARD_INDEX\" = 3 ] && failures=', \"failures\": [{\"failure\": \"expected 1\"}]'\n"
         "[ \"$GTEST_SHARD_INDEX\" = 5 ] && result=SKIPPED\n"
         "if [ \"$KILN_REQUIRE_GPU\" != 1 ] || [ \"$KILN_BINARY\" != '" + build + "/kiln' ] ||"
         " [ \"$KILN_SOURCE_DIR\" != '" + root + "' ]; then\n"
         "  name=EnvironmentMissing failures=', \"failures\": [{\"failure\": \"environment\"}]'\n"
         "fi\n"
         "echo \"[ RUN      ] Fake.$name\"\n"
         "echo \"{\\\"testsuites\\\": [{\\\"name\\\": \\\"Fake\\\", \\\"testsuite\\\": [{\\\"name\\\": \\\"$name\\\","
         " \\\"result\\\": \\\"$result\\\"$failures}]}]}\" > \"$report\"\n"
         "[ -z \"$failures\" ] && [ $result = COMPLETED ]\n";
}

std::string fake_attention() {
  return "#!/bin/sh\n"
         "for a in \"$@\"; do case \"$a\" in --benchmark_out=*) out=${a#--benchmark_out=} ;; esac; done\n"
         "echo '{\"benchmarks\": [{\"name\": \"BM_attention_forward/cudnn:0/head_dim:64/group:1/real_time\","
         " \"label\": \"kiln'\"'\"'s kernels\", \"real_time\": 1.78, \"TFLOPS\": 154.5}, {\"name\":"
         " \"BM_attention_forward/cudnn:1/head_dim:64/group:1/real_time\", \"label\": \"cuDNN 9.19.0\","
         " \"real_time\": 0.69, \"TFLOPS\": 398.5}]}' > \"$out\"\n";
}

// The PyTorch peer, as bench/gpu_step.py runs it (its JSON on the last line).
const char* kFakePeer =
    "print('{\"tokens_per_s\": 320000.0, \"mfu\": 0.3, \"peak_mem_bytes\": 8e9, \"torch\": \"fake\"}')\n";

// A checkout of its own: scripts/gpu-check and bench/gpu_step.py copied from the sources, the
// given A/B file, the fake peer, a fake nvidia-smi in bin/ and fake binaries in build/.
class GpuCheckCli : public testing::Test {
 protected:
  void make_checkout(const std::string& name, bool gpu, const std::string& bench_step,
                     const std::string& ab = "[]") {
    root_ = fs::path(fresh_dir(name));
    for (const char* file : {"scripts/gpu-check", "bench/gpu_step.py"}) {
      fs::create_directories((root_ / file).parent_path());
      fs::copy_file(fs::path(source_dir()) / file, root_ / file);
    }
    fs::permissions(root_ / "scripts/gpu-check", fs::perms::owner_all, fs::perm_options::add);
    write_file(root_ / "bench/gpu-ab.json", ab);
    write_file(root_ / "bench/peers/torch_gpu_step.py", kFakePeer);
    write_file(root_ / "bin/nvidia-smi", fake_nvidia_smi(gpu), true);
    const fs::path build = root_ / "build";
    write_file(build / "kiln", "#!/bin/sh\necho 'kiln 0.1.0 (commit 0123456789ab)'\n", true);
    write_file(build / "kiln_bench_step", bench_step, true);
    write_file(build / "cuda_tests", fake_cuda_tests(build.string(), root_.string()), true);
    write_file(build / "kiln_bench_attention", fake_attention(), true);
    // Where CMake records nvcc's version when it configures a build folder.
    write_file(build / "CMakeFiles/3.25.1/CMakeCUDACompiler.cmake",
               "set(CMAKE_CUDA_COMPILER \"/usr/local/cuda/bin/nvcc\")\nset(CMAKE_CUDA_COMPILER_VERSION \"13.0.88\")\n");
  }
  CommandResult check(const std::string& args) const {
    return run_command("cd / && PATH=" + (root_ / "bin").string() + ":$PATH " +
                       (root_ / "scripts/gpu-check").string() + " --build " + (root_ / "build").string() +
                       " " + args);
  }
  // Every record of the one check file under bench/results/.
  std::vector<json> records() const {
    std::vector<json> out;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(root_ / "bench/results"))
      if (entry.path().string().ends_with("-gpu-check.jsonl")) files.push_back(entry.path());
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return out;
    std::istringstream lines(read_text(files[0].string()));
    for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
    return out;
  }
  fs::path root_;
};

TEST_F(GpuCheckCli, NoVisibleGpuIsAFailureInOneLine) {
  make_checkout("gpu_check_no_gpu", false, fake_bench_step());
  const CommandResult r = check("");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "gpu-check: FAILED: no GPU: nvidia-smi lists none (No devices were found)\n");
  EXPECT_FALSE(fs::exists(root_ / "bench/results"));
}

TEST_F(GpuCheckCli, AGpuKilnCannotSeeIsADriverFailureInOneLine) {
  // What kiln says when the CUDA runtime finds no device (trainer/train/backend.cpp).
  make_checkout("gpu_check_old_driver", true,
                fake_bench_step("", "backend.device=cuda: no CUDA GPU is visible to this process (check "
                                    "nvidia-smi and CUDA_VISIBLE_DEVICES), or use backend.device=cpu"));
  const CommandResult r = check("");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "gpu-check: FAILED: nvidia-smi lists 1 GPU (NVIDIA H100 80GB HBM3, driver 535.104.05) but kiln "
            "sees none: the driver supports CUDA 12.2, older than the CUDA 13.0.88 runtime kiln was built "
            "with; update the driver\n");
  EXPECT_FALSE(fs::exists(root_ / "bench/results"));
}

TEST_F(GpuCheckCli, CudnnThatDoesNotLoadIsAFailureInOneLine) {
  make_checkout("gpu_check_no_cudnn", true,
                fake_bench_step("backend.attention=cudnn",
                                "backend.attention=cudnn: cuDNN cannot be loaded (libcudnn.so.9: cannot open "
                                "shared object file: No such file or directory)"));
  const CommandResult r = check("");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output,
            "gpu-check: FAILED: cuDNN, which the check needs (the cuDNN attention tests, A/B and "
            "benchmark), does not load: backend.attention=cudnn: cuDNN cannot be loaded (libcudnn.so.9: "
            "cannot open shared object file: No such file or directory)\n");
}

const char* kAb = R"([{"name": "quick", "why": "a test", "binary": "kiln_bench_step",
  "args": ["--set", "backend.device=cuda"], "arms": {"a": ["--sleep", "0"], "b": ["--sleep", "0"]},
  "repeats": 2, "metric": "tok_per_s", "seconds": 50, "seconds_from": "the test"}])";

TEST_F(GpuCheckCli, PlanStartsWhatFitsTheBudgetInPriorityOrder) {
  make_checkout("gpu_check_plan", false, fake_bench_step(), kAb);
  const std::vector<std::string> order = {"tests", "ab:quick", "step:gpt2-124m", "step:llama-1b",
                                          "step:gpt2-1.5b", "attention", "profile:gpt2-124m"};
  for (const int budget : {100, 300, 480, 2000}) {
    const CommandResult r = check("--plan --budget " + std::to_string(budget));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // "run   NAME   SECONDS s  ends by  END s  SOURCE" or "skip  NAME ... would end at ...".
    static const std::regex line(R"(^(run|skip) +(\S+) +(\d+) s +(?:ends by|would end at) +(\d+) s +\S)");
    std::vector<std::string> names;
    int elapsed = 0, started = 0;
    std::istringstream lines(r.output);
    std::string text;
    std::getline(lines, text);
    EXPECT_EQ(text, "gpu-check: plan for a budget of " + std::to_string(budget) +
                        " s (expected seconds, the end of each, and where each figure comes from)");
    while (std::getline(lines, text)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(text, m, line)) << text;
      names.push_back(m[2]);
      const int seconds = std::stoi(m[3]), end = std::stoi(m[4]);
      if (m[2] == "ab:quick") {
        EXPECT_EQ(seconds, 50);  // from the A/B file
      }
      EXPECT_EQ(end, elapsed + seconds) << text;
      const bool fits = elapsed + seconds <= budget;
      EXPECT_EQ(m[1] == "run", fits) << "budget " << budget << ": " << text;
      if (fits) elapsed += seconds, ++started;
    }
    EXPECT_EQ(names, order) << r.output;
    if (budget == 100) {
      EXPECT_EQ(started, 2) << r.output;  // the A/B and the profile
    }
    if (budget == 2000) {
      EXPECT_EQ(started, 7) << r.output;
    }
  }
  EXPECT_FALSE(fs::exists(root_ / "bench/results"));
}

TEST_F(GpuCheckCli, BadUsageIsOneLine) {
  make_checkout("gpu_check_usage", false, fake_bench_step(), R"([{"name": "x"}])");
  const CommandResult ab = check("--plan");
  EXPECT_EQ(ab.exit_code, 2);
  EXPECT_EQ(ab.output,
            "gpu-check: bench/gpu-ab.json: A/B 1 lacks args, arms, binary, metric, repeats, seconds, "
            "seconds_from, why\n");
  write_file(root_ / "bench/gpu-ab.json", "[]");
  const CommandResult budget = check("--plan --budget 0");
  EXPECT_EQ(budget.exit_code, 2);
  EXPECT_EQ(budget.output, "gpu-check: --budget must be a positive number of seconds\n");
}

// The common fields of every record.
void expect_common(const json& r) {
  EXPECT_EQ(r.value("device", ""), "NVIDIA H100 80GB HBM3") << r.dump();
  EXPECT_EQ(r.value("driver", ""), "535.104.05") << r.dump();
  EXPECT_EQ(r.value("commit", ""), "0123456789ab") << r.dump();
  EXPECT_TRUE(std::regex_match(r.value("date", ""), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00)")))
      << r.dump();
  EXPECT_TRUE(r.contains("command")) << r.dump();
}

TEST_F(GpuCheckCli, EveryStageAppendsItsRecordsAsItFinishes) {
  make_checkout("gpu_check_records", true, fake_bench_step(), kAb);
  const CommandResult r = check("--budget 300");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // shard 3's test failed, shard 5's skipped
  const std::vector<json> all = records();
  std::vector<std::string> kinds;
  std::map<std::string, json> stage;
  for (const json& record : all) {
    expect_common(record);
    kinds.push_back(record["kind"]);
    if (record["kind"] == "stage") stage[record["stage"]] = record;
  }
  // Every stage fits, since each fake takes no time: each A/B run, step case, attention case and
  // profile is recorded as it finished, before its stage's record.
  const std::vector<std::string> want = {
      "check",    "stage", "ab",       "ab",    "ab",        "ab",        "stage", "gpu-step", "stage",
      "gpu-step", "stage", "gpu-step", "stage", "attention", "attention", "stage", "profile",  "stage",
      "check"};
  EXPECT_EQ(kinds, want) << r.output;
  EXPECT_EQ(all.front()["event"], "start");
  EXPECT_EQ(all.front()["budget_s"], 300);
  EXPECT_EQ(all.front()["plan"].size(), 7u);

  const json& tests = stage["tests"];
  EXPECT_EQ(tests["status"], "failed");
  EXPECT_EQ(tests["passed"], 6);
  EXPECT_EQ(tests["skipped"], 1);
  EXPECT_EQ(tests["skipped_tests"], json::array({"Fake.Shard5"}));
  EXPECT_EQ(tests["failed"], 1);
  EXPECT_EQ(tests["failed_tests"], json::array({"Fake.Shard3"}));
  EXPECT_EQ(tests["expected_s"], 180);
  const std::string log = read_text((root_ / tests["log"].get<std::string>()).string());
  EXPECT_NE(log.find("=== shard 7 of 8\n[ RUN      ] Fake.Shard7"), std::string::npos) << log;
  EXPECT_NE(log.find("device: NVIDIA H100 80GB HBM3\ndriver: 535.104.05\n"), std::string::npos) << log;

  EXPECT_EQ(all[2]["arm"], "a");
  EXPECT_EQ(all[3]["arm"], "b");
  EXPECT_EQ(all[4]["repeat"], 2);
  EXPECT_EQ(all[2]["value"], 400000.0);
  EXPECT_EQ(stage["ab:quick"]["status"], "passed");
  EXPECT_EQ(stage["ab:quick"]["over_a"]["b"], 1.0);

  const json& step = all[7];
  EXPECT_EQ(step["config"], "gpt2-124m");
  EXPECT_DOUBLE_EQ(step["vs_pytorch"].get<double>(), 400000.0 / 320000.0);
  EXPECT_EQ(all[9]["config"], "llama-1b");
  EXPECT_EQ(all[11]["config"], "gpt2-1.5b");
  for (const char* name : {"step:gpt2-124m", "step:llama-1b", "step:gpt2-1.5b", "attention", "profile:gpt2-124m"})
    EXPECT_EQ(stage[name]["status"], "passed") << name;
  EXPECT_EQ(all[13]["tflops"], 154.5);
  EXPECT_EQ(all[14]["label"], "cuDNN 9.19.0");
  EXPECT_EQ(stage["attention"]["cases"], 2);
  EXPECT_EQ(all[16]["ops"][0]["op"], "matmul");
  EXPECT_EQ(all.back()["event"], "end");
  EXPECT_EQ(all.back()["status"], "failed");
}

TEST_F(GpuCheckCli, TheBudgetStopsTheStageInFlight) {
  // Nothing but the 1-second A/B fits 10 seconds (the check's start takes a second or two of
  // them on a loaded machine); its second arm sleeps for 60.
  make_checkout("gpu_check_cut", true, fake_bench_step(),
                R"([{"name": "slow", "why": "a test", "binary": "kiln_bench_step", "args": [],
                    "arms": {"a": ["--sleep", "0"], "b": ["--sleep", "60"]}, "repeats": 1,
                    "metric": "tok_per_s", "seconds": 1, "seconds_from": "the test"}])");
  const auto began = std::chrono::steady_clock::now();
  const CommandResult r = check("--budget 10");
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::vector<std::string> seen;
  for (const json& record : records()) {
    expect_common(record);
    std::string text = record["kind"];
    for (const char* key : {"stage", "status", "arm"}) {
      if (!record.contains(key)) continue;
      text += ' ';
      text += record[key].get<std::string>();
    }
    seen.push_back(text);
  }
  const std::vector<std::string> want = {"check",
                                         "stage tests not started",
                                         "ab a",
                                         "stage ab:slow cut",
                                         "stage step:gpt2-124m not started",
                                         "stage step:llama-1b not started",
                                         "stage step:gpt2-1.5b not started",
                                         "stage attention not started",
                                         "stage profile:gpt2-124m not started",
                                         "check failed"};
  EXPECT_EQ(seen, want) << r.output;
}

TEST_F(GpuCheckCli, RunsAQueueCommandAloneInItsEnvironmentAndRecordsIt) {
  make_checkout("gpu_check_run", true, fake_bench_step(), kAb);
  const CommandResult r = check("-- sh -c 'echo \"kiln at $KILN_BINARY\"; exit 3'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string said = "kiln at " + (root_ / "build/kiln").string();
  EXPECT_NE(r.output.find(said), std::string::npos) << r.output;
  const std::vector<json> all = records();
  ASSERT_EQ(all.size(), 3u);
  for (const json& record : all) expect_common(record);
  EXPECT_EQ(all[1]["stage"], "run");
  EXPECT_EQ(all[1]["status"], "failed");
  EXPECT_EQ(all[1]["exit_code"], 3);
  EXPECT_EQ(all[1]["command"], "sh -c 'echo \"kiln at $KILN_BINARY\"; exit 3'");
  const std::string log = read_text((root_ / all[1]["log"].get<std::string>()).string());
  EXPECT_NE(log.find("command: sh -c"), std::string::npos) << log;
  EXPECT_NE(log.find(said), std::string::npos) << log;
}

TEST(GpuCheckCliGpuStep, AppendsEachCaseAsItFinishes) {
  // bench/gpu_step.py itself: the second case's kiln side fails, the first is kept.
  const fs::path dir = fs::path(fresh_dir("gpu_step_records"));
  write_file(dir / "bin/nvidia-smi", fake_nvidia_smi(true), true);
  write_file(dir / "build/kiln", "#!/bin/sh\necho 'kiln 0.1.0 (commit 0123456789ab)'\n", true);
  write_file(dir / "build/kiln_bench_step",
             "#!/bin/sh\ncase \"$*\" in *llama*) echo 'kiln: error: out of memory' >&2; exit 1 ;; esac\n" +
                 fake_bench_step().substr(std::string("#!/bin/sh\n").size()),
             true);
  write_file(dir / "python", "#!/bin/sh\necho '{\"tokens_per_s\": 320000.0, \"torch\": \"fake\"}'\n", true);
  const CommandResult r = run_command("PATH=" + (dir / "bin").string() + ":$PATH python3 " + source_dir() +
                                      "/bench/gpu_step.py --build " + (dir / "build").string() + " --python " +
                                      (dir / "python").string() + " --case gpt2-124m --case llama-1b --records " +
                                      (dir / "step.jsonl").string() + " --min-time 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::istringstream lines(read_text((dir / "step.jsonl").string()));
  std::vector<json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(json::parse(line));
  ASSERT_EQ(records.size(), 2u) << r.output;
  EXPECT_EQ(records[0]["kind"], "gpu-step");
  EXPECT_EQ(records[0]["config"], "gpt2-124m");
  EXPECT_DOUBLE_EQ(records[0]["vs_pytorch"].get<double>(), 400000.0 / 320000.0);
  EXPECT_EQ(records[0]["target"], "vs_pytorch >= 1.2");
  EXPECT_EQ(records[0]["target_met"], true);
  EXPECT_EQ(records[1]["config"], "llama-1b");
  EXPECT_EQ(records[1]["error"], "kiln: error: out of memory");
  for (const json& record : records) expect_common(record);
  EXPECT_NE(read_text((dir / "step.log").string()).find("[exit 1]"), std::string::npos);
}

#ifdef KILN_CUDA_TESTS
TEST(GpuCheckCliRequireGpu, CudaTestsFailInsteadOfSkippingWhenTheCheckRequiresAGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is here: the test would run, not skip";
  const std::string tests = std::string(KILN_CUDA_TESTS) + " --gtest_filter=TrainCuda.*";
  const CommandResult skipped = run_command(tests);
  EXPECT_EQ(skipped.exit_code, 0) << skipped.output;
  EXPECT_NE(skipped.output.find("skipped: no GPU"), std::string::npos) << skipped.output;
  const CommandResult required = run_command("KILN_REQUIRE_GPU=1 " + tests);
  EXPECT_EQ(required.exit_code, 1) << required.output;
  EXPECT_NE(required.output.find("[  FAILED  ] TrainCuda.TinyConfigLossCurveMatchesTheCpu: KILN_REQUIRE_GPU=1 "
                                 "and the test skipped: skipped: no GPU\n"
                                 "KILN_REQUIRE_GPU=1: 1 skipped test, each a failure\n"),
            std::string::npos)
      << required.output;
}
#endif

}  // namespace
}  // namespace kiln::test
