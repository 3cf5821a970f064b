// End-to-end: kiln tui driven in a real terminal (tmux): the runs table shows finished runs,
// marked runs compare (config differences, a log scale), a tall terminal puts the plots
// first, long messages wrap, only a slowdown that lasts is marked slower than planned, a run
// launched from the form appears under the name kiln train would give it and advances, p
// pauses and resumes it, l shows and sets its learning rate, s stops it, K kills a launched
// one, an 80x24 terminal keeps every view readable, and bad stores get one clear line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

using namespace std::chrono_literals;

// One tmux server of its own (its own socket) running one command in a detached window,
// in the folder `dir`.
class Tmux {
 public:
  Tmux(const std::string& name, const std::string& command, int width, int height,
       const std::string& dir = ".")
      : socket_("kiln-tui-test-" + name + "-" + std::to_string(::getpid())) {
    // The pane outlives the command, so what it printed before exiting can be read.
    const CommandResult r = run_command(
        tmux() + " new-session -d -s main -c " + dir + " -x " + std::to_string(width) + " -y " +
        std::to_string(height) + " \"env LC_ALL=C.UTF-8 " + command + "; sleep 600\"");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  ~Tmux() { run_command(tmux() + " kill-server"); }

  // tmux send-keys arguments: key names ("Enter", "Escape", "C-u") or a literal with -l.
  void keys(const std::string& keys) { run_command(tmux() + " send-keys -t main " + keys); }
  void type(const std::string& text) { keys("-l '" + text + "'"); }
  void resize(int width, int height) {
    run_command(tmux() + " resize-window -t main -x " + std::to_string(width) + " -y " +
                std::to_string(height));
  }
  std::string screen() { return run_command(tmux() + " capture-pane -p -t main").output; }
  // The screen with its colours and attributes as escape sequences.
  std::string styled_screen() { return run_command(tmux() + " capture-pane -e -p -t main").output; }
  // A tmux format about the pane, e.g. #{alternate_on}.
  std::string pane(const std::string& format) {
    std::string out = run_command(tmux() + " display-message -p -t main '" + format + "'").output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  // Polls the screen until it shows every one of the texts; the last screen either way.
  std::string wait_for(const std::vector<std::string>& texts, std::chrono::seconds timeout = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string shown;
    while (std::chrono::steady_clock::now() < deadline) {
      shown = screen();
      bool all = true;
      for (const auto& t : texts) all = all && shown.find(t) != std::string::npos;
      if (all) return shown;
      std::this_thread::sleep_for(100ms);
    }
    return shown;
  }

 private:
  std::string tmux() const { return "tmux -L " + socket_ + " -f /dev/null"; }
  std::string socket_;
};

bool shows(const std::string& screen, const std::string& text) {
  return screen.find(text) != std::string::npos;
}

// Every line of a captured screen fits the width.
void expect_fits(const std::string& screen, size_t width) {
  std::istringstream lines(screen);
  for (std::string line; std::getline(lines, line);) {
    size_t columns = 0;
    for (char c : line) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    EXPECT_LE(columns, width) << line;
  }
}

// The row of the first line that holds `text`, or -1.
int row_of(const std::string& screen, const std::string& text) {
  std::istringstream lines(screen);
  int row = 0;
  for (std::string line; std::getline(lines, line); ++row)
    if (line.find(text) != std::string::npos) return row;
  return -1;
}

// The step the run screen's progress line shows, "step N/M".
std::optional<long> shown_step(const std::string& screen) {
  static const std::regex step(R"(step (\d+)/)");
  std::smatch m;
  if (!std::regex_search(screen, m, step)) return std::nullopt;
  return std::stol(m[1]);
}

std::optional<int64_t> tui_last_step(const std::string& store_path, const std::string& run) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  return store::get_run(*db, store::resolve_run(*db, run)).last_step;
}

store::RunStatus status_of(const std::string& store_path, const std::string& run) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  return store::get_run(*db, store::resolve_run(*db, run)).status;
}

TEST(Tui, ShowsFinishedRunsOpensComparesAndFitsEightyByTwentyFour) {
  const std::string dir = fresh_dir("tui_history");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  // beta differs from alpha in one config key.
  for (const std::string run : {"alpha", "beta --set train.lr=0.002"}) {
    const CommandResult r = run_command(kiln + " train --store " + path + " --name " + run +
                                        " --tag smoke" + small_run(prefix));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  Tmux tmux("history", kiln + " tui --store " + path, 132, 40);
  std::string screen = tmux.wait_for({"alpha", "beta", "completed", "6/6", "smoke", "tp1.pp1.dp1"});
  ASSERT_TRUE(shows(screen, "alpha") && shows(screen, "6/6") && shows(screen, "smoke")) << screen;
  EXPECT_TRUE(shows(screen, "2 runs")) << screen;

  // Newest first: beta is selected; Enter opens it with its events.
  tmux.keys("Enter");
  screen = tmux.wait_for({"run 2 · beta", "completed", "ranks", "loss", "tokens/s", "end"});
  ASSERT_TRUE(shows(screen, "run 2 · beta")) << screen;
  EXPECT_TRUE(shows(screen, "step 6/6 100.0%")) << screen;
  EXPECT_TRUE(shows(screen, "gpt2, 1 layer, d_model 32")) << screen;
  // The plan the run recorded (kiln plan's, for its layout on this CPU) beside what it measured.
  {
    auto db = store::open_store(path, store::Access::ReadOnly);
    const store::RunRecord beta = store::get_run(*db, store::resolve_run(*db, "beta"));
    ASSERT_GT(beta.planned_step_s, 0);
    ASSERT_TRUE(beta.planned_memory_bytes.has_value());
    const std::string planned = fmt::format("planned {:.1f} ms/step · measured ", beta.planned_step_s * 1e3);
    EXPECT_EQ(row_of(screen, planned), 3) << planned << "\n" << screen;
    EXPECT_TRUE(shows(screen, "planned memory " + human_bytes(static_cast<uint64_t>(*beta.planned_memory_bytes)) +
                                  " · measured ")) << screen;
  }
  // 40 rows: the plots come first, 19 rows tall, and the ranks table follows them.
  EXPECT_EQ(row_of(screen, "loss"), 5) << screen;
  EXPECT_EQ(row_of(screen, "RANK"), 5 + 19 + 2) << screen;

  tmux.resize(80, 24);
  screen = tmux.wait_for({"run 2 · beta", "p Pause/Resume", "q Back", "RANK", "LOSS"});
  EXPECT_TRUE(shows(screen, "q Back") && shows(screen, "RANK")) << screen;
  expect_fits(screen, 80);
  // 24 rows: the ranks table first, the plots below it.
  EXPECT_EQ(row_of(screen, "RANK"), 5) << screen;
  EXPECT_GT(row_of(screen, "loss"), row_of(screen, "RANK")) << screen;

  // A message longer than the terminal is wide wraps over the bottom rows.
  tmux.keys("K");
  screen = tmux.wait_for({"K kills only a run launched from this kiln tui", "\nlive run"});
  EXPECT_TRUE(shows(screen, "still running; s stops any\nlive run\n")) << screen;
  expect_fits(screen, 80);

  // The help overlay, then back to the runs, still readable at 80x24.
  tmux.keys("?");
  screen = tmux.wait_for({"Run keys", "pause a running run"});
  EXPECT_TRUE(shows(screen, "Run keys")) << screen;
  tmux.keys("Escape");
  tmux.keys("q");
  screen = tmux.wait_for({"STATUS", "NAME", "alpha", "beta", "q Quit"});
  EXPECT_TRUE(shows(screen, "STATUS") && shows(screen, "alpha") && shows(screen, "q Quit")) << screen;
  expect_fits(screen, 80);

  // Mark both with Space (the key bar says Mark: tags are the store's) and compare them.
  EXPECT_TRUE(shows(screen, "Space Mark")) << screen;
  tmux.keys("Space Space");
  screen = tmux.wait_for({"2 marked"});
  EXPECT_TRUE(shows(screen, "· 2 marked")) << screen;
  tmux.keys("c");
  screen = tmux.wait_for({"compare 2 runs", "alpha", "beta", "loss by step", "train.lr"});
  EXPECT_TRUE(shows(screen, "compare 2 runs") && shows(screen, "FINAL")) << screen;
  // The one config key that differs, each run's value under its name.
  EXPECT_TRUE(shows(screen, "config differences (1 key)")) << screen;
  static const std::regex lr_row(R"(train\.lr +0\.002 +0\.003\n)");
  EXPECT_TRUE(std::regex_search(screen, lr_row)) << screen;
  // The x axis under the plot: from the first logged step to the last, named.
  static const std::regex x_axis(R"(\n +2 +step +6\n)");
  EXPECT_TRUE(std::regex_search(screen, x_axis)) << screen;
  EXPECT_TRUE(shows(screen, "l Log scale")) << screen;
  expect_fits(screen, 80);
  tmux.keys("l");
  screen = tmux.wait_for({"loss by step, log scale", "l Linear"});
  EXPECT_TRUE(shows(screen, "loss by step, log scale")) << screen;
  tmux.keys("l");
  screen = tmux.wait_for({"l Log scale"});
  EXPECT_FALSE(shows(screen, "log scale (")) << screen;

  // A regex filter keeps the runs it matches.
  tmux.keys("q / C-u");
  tmux.type("^alp");
  tmux.keys("Enter");
  screen = tmux.wait_for({"filter /^alp/", "(1 shown)"});
  EXPECT_TRUE(shows(screen, "(1 shown)") && shows(screen, "alpha")) << screen;
  EXPECT_FALSE(shows(screen, "beta")) << screen;
  // A KEY=VALUE word matches a config value, through the store; a regex may come with it.
  tmux.keys("/ C-u");
  tmux.type("train.lr=2e-3");
  tmux.keys("Enter");
  screen = tmux.wait_for({"filter /train.lr=2e-3/", "beta"});
  EXPECT_TRUE(shows(screen, "kiln · 1 runs")) << screen;
  EXPECT_FALSE(shows(screen, "alpha")) << screen;
  tmux.keys("/ C-u");
  tmux.type("^alp train.lr=0.002");
  tmux.keys("Enter");
  screen = tmux.wait_for({"No run matches"});
  EXPECT_TRUE(shows(screen, "No run matches /^alp train.lr=0.002/")) << screen;
  // Grouped by a config key: a header per value, in order, each before its runs.
  tmux.keys("/ C-u Enter b");
  tmux.type("train.lr");
  tmux.keys("Enter");
  screen = tmux.wait_for({"by train.lr", "0.002 · 1 run", "0.003 · 1 run"});
  EXPECT_LT(row_of(screen, "0.002 · 1 run"), row_of(screen, "beta")) << screen;
  EXPECT_LT(row_of(screen, "beta"), row_of(screen, "0.003 · 1 run")) << screen;
  EXPECT_LT(row_of(screen, "0.003 · 1 run"), row_of(screen, "alpha")) << screen;
  tmux.keys("b C-u Enter");
  screen = tmux.wait_for({"kiln · 2 runs · sort"});
  EXPECT_FALSE(shows(screen, "· 1 run")) << screen;

  // Ctrl-C ends the UI and gives the terminal back: the alternate screen is off again.
  ASSERT_EQ(tmux.pane("#{alternate_on}"), "1");
  tmux.keys("C-c");
  for (int i = 0; i < 50 && tmux.pane("#{pane_current_command}") != "sleep"; ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(tmux.pane("#{pane_current_command}"), "sleep");
  EXPECT_EQ(tmux.pane("#{alternate_on}"), "0");
}

// True when the screen uses a foreground or background colour.
bool coloured(const std::string& styled) {
  static const std::regex colour("\x1b\\[[0-9;]*(3[0-7]|4[0-7])m");
  return std::regex_search(styled, colour);
}

TEST(Tui, NoColorAndMonoDrawWithoutColours) {
  const std::string dir = fresh_dir("tui_mono");
  const std::string path = dir + "/runs.db";
  store::open_store(path, store::Access::ReadWrite);
  Tmux colour("colour", kiln + " tui --store " + path, 80, 24);
  Tmux no_color("no-color", "NO_COLOR=1 " + kiln + " tui --store " + path, 80, 24);
  Tmux mono("mono", kiln + " tui --mono --store " + path, 80, 24);
  for (Tmux* t : {&colour, &no_color, &mono})
    ASSERT_TRUE(shows(t->wait_for({"No runs in", "q Quit"}), "q Quit"));
  EXPECT_TRUE(coloured(colour.styled_screen())) << colour.styled_screen();
  EXPECT_FALSE(coloured(no_color.styled_screen())) << no_color.styled_screen();
  EXPECT_FALSE(coloured(mono.styled_screen())) << mono.styled_screen();
}

// A run is marked slower than planned only when its recent steps are: one with fewer logged
// steps than a slowdown must last is not, however slow (both here far slower than a plan of
// 0.1 microseconds a step).
TEST(Tui, MarksOnlyASlowdownThatLasts) {
  const std::string dir = fresh_dir("tui_slower");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  // brief logs steps 2, 4 and 6; steady every step.
  for (const std::string run : {"brief", "steady"}) {
    const CommandResult r = run_command(kiln + " train --store " + path + " --name " + run + small_run(prefix) +
                                        (run == "steady" ? " --set train.log_interval=1" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  store::open_store(path, store::Access::ReadWrite)->exec("UPDATE runs SET planned_step_s = 1e-7");
  Tmux tmux("slower", kiln + " tui --store " + path, 132, 40);
  ASSERT_TRUE(shows(tmux.wait_for({"brief", "steady"}), "steady"));
  // Newest first: steady is selected.
  tmux.keys("Enter");
  std::string screen = tmux.wait_for({"run 2 · steady", "(slower than planned)"});
  EXPECT_TRUE(shows(screen, "planned 0.0 ms/step · measured ") && shows(screen, "(slower than planned)")) << screen;
  tmux.keys("q");
  ASSERT_TRUE(shows(tmux.wait_for({"2 runs"}), "2 runs"));
  tmux.keys("Down Enter");
  screen = tmux.wait_for({"run 1 · brief", "planned 0.0 ms/step · measured "});
  ASSERT_TRUE(shows(screen, "run 1 · brief")) << screen;
  EXPECT_TRUE(shows(screen, "planned 0.0 ms/step · measured ")) << screen;
  EXPECT_FALSE(shows(screen, "(slower than planned)")) << screen;
}

TEST(Tui, LaunchesRunsThenPausesResumesStopsAndKills) {
  const std::string dir = fresh_dir("tui_launch");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db";
  store::open_store(path, store::Access::ReadWrite);  // an empty store
  // A tiny run that would train for a long time, logging every step.
  const std::string config = dir + "/live.json";
  std::ofstream(config) << R"({"model": {"arch": "gpt2", "n_layer": 1, "n_head": 2, "d_model": 32,
      "vocab_size": 257, "seq_len": 16},
    "train": {"steps": 1000000, "global_batch": 4, "micro_batch": 2, "lr": 0.001, "warmup": 0,
      "decay": "constant", "log_interval": 1, "eval_interval": 0,
      "checkpoint_dir": ")" << dir << R"(/checkpoints"},
    "data": {"paths": [")" << prefix << R"("], "split": "90,10,0", "tokenizer": "byte"},
    "backend": {"device": "cpu", "threads": 1}})";

  Tmux tmux("launch", kiln + " tui --store " + path, 120, 40, dir);
  std::string screen = tmux.wait_for({"No runs in", "Press n to launch one"});
  EXPECT_TRUE(shows(screen, "No runs in " + path)) << screen;

  tmux.keys("n");
  ASSERT_TRUE(shows(tmux.wait_for({"launch a run into"}), "launch a run into"));
  tmux.keys("C-u");
  tmux.type(config);
  // The form proposes the name kiln train gives a run of live.json: the config's and the time.
  static const std::regex default_name(R"(\n  name +(live-\d{8}-\d{6})\n)");
  screen = tmux.wait_for({"name            live-"});
  EXPECT_TRUE(std::regex_search(screen, default_name)) << screen;
  tmux.keys("Down C-u");
  tmux.type("live");
  screen = tmux.wait_for({"1 process; output to " + dir + "/checkpoints/live/train.log", "1000000"});
  ASSERT_TRUE(shows(screen, "output to " + dir + "/checkpoints/live/train.log")) << screen;
  tmux.keys("Enter");

  screen = tmux.wait_for({"run 1 · live", "running", "step "}, 60s);
  ASSERT_TRUE(shows(screen, "run 1 · live")) << screen << read_text(dir + "/checkpoints/live/train.log");
  const std::optional<long> first = shown_step(screen);
  ASSERT_TRUE(first.has_value()) << screen;
  // The step counter advances on screen.
  std::optional<long> later;
  for (int i = 0; i < 100 && !(later && *later > *first); ++i) {
    std::this_thread::sleep_for(100ms);
    later = shown_step(tmux.screen());
  }
  EXPECT_GT(later.value_or(0), *first);

  // p pauses: the status says so, the step stops, and the command is an event.
  tmux.keys("p");
  screen = tmux.wait_for({"live · paused", "command"});
  ASSERT_TRUE(shows(screen, "live · paused")) << screen;
  EXPECT_TRUE(shows(screen, "paused")) << screen;
  const std::optional<int64_t> paused_at = tui_last_step(path, "live");
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(tui_last_step(path, "live"), paused_at);
  EXPECT_EQ(status_of(path, "live"), store::RunStatus::Paused);

  // l asks for a learning rate, saying what it is; the run applies the new one (while
  // paused, too) and says so, and the next question starts from it.
  tmux.keys("l");
  screen = tmux.wait_for({"learning rate: peak (train.lr) 0.001, 0.001 at step", "; new peak:"});
  EXPECT_TRUE(shows(screen, "learning rate: peak (train.lr) 0.001, 0.001 at step")) << screen;
  tmux.type("0.0005");
  tmux.keys("Enter");
  screen = tmux.wait_for({"set train.lr=0.0005 applied"});
  EXPECT_TRUE(shows(screen, "set train.lr=0.0005 applied")) << screen;
  tmux.keys("l");
  screen = tmux.wait_for({"learning rate: peak (train.lr) 0.0005"});
  EXPECT_TRUE(shows(screen, "learning rate: peak (train.lr) 0.0005")) << screen;
  // A rate that would kill the run is refused here as kiln runs set refuses it, and nothing
  // is queued.
  tmux.type("0.05");
  tmux.keys("Enter");
  // (The line wraps at the terminal's width: its words are looked for one by one.)
  screen = tmux.wait_for({"train.lr=0.05", "outside", "0.01", "--force"});
  for (const char* word : {"train.lr=0.05", "outside", "0.01", "(10x", "--force"})
    EXPECT_TRUE(shows(screen, word)) << word << "\n" << screen;
  EXPECT_FALSE(shows(screen, "queued")) << screen;

  // p resumes, and the step moves on.
  tmux.keys("p");
  screen = tmux.wait_for({"live · running"});
  EXPECT_TRUE(shows(screen, "live · running")) << screen;
  bool advanced = false;
  for (int i = 0; i < 100 && !advanced; ++i) {
    std::this_thread::sleep_for(100ms);
    advanced = tui_last_step(path, "live") > paused_at;
  }
  EXPECT_TRUE(advanced);

  // s asks first, then stops the run.
  tmux.keys("s");
  EXPECT_TRUE(shows(tmux.wait_for({"(y/n)"}), "(y/n)"));
  tmux.keys("y");
  screen = tmux.wait_for({"live · stopped"}, 30s);
  EXPECT_TRUE(shows(screen, "live · stopped")) << screen;
  EXPECT_EQ(status_of(path, "live"), store::RunStatus::Stopped);
  EXPECT_TRUE(shows(read_text(dir + "/checkpoints/live/train.log"), "kiln: stopped by command"));

  // A second launch under a taken name is refused on the form.
  tmux.keys("q n C-u");
  tmux.type(config);
  tmux.keys("Down C-u");
  tmux.type("live");
  tmux.keys("Enter");
  screen = tmux.wait_for({"name: a run named 'live' is already in the store"});
  EXPECT_TRUE(shows(screen, "already in the store")) << screen;
  EXPECT_TRUE(shows(screen, "launch a run into")) << screen;

  // Under the name the form proposes it starts, and is recorded under it; K asks, then
  // signals the processes this UI launched.
  tmux.keys("Escape");
  ASSERT_TRUE(shows(tmux.wait_for({"q Quit"}), "q Quit"));
  tmux.keys("n C-u");
  tmux.type(config);
  screen = tmux.wait_for({"name            live-"});
  std::smatch proposed;
  ASSERT_TRUE(std::regex_search(screen, proposed, default_name)) << screen;
  const std::string doomed = proposed[1].str();
  tmux.keys("Enter");
  screen = tmux.wait_for({doomed + " · running", "step "}, 60s);
  ASSERT_TRUE(shows(screen, doomed + " · running")) << screen;
  tmux.keys("K");
  EXPECT_TRUE(shows(tmux.wait_for({"kill the processes of " + doomed + "? (y/n)"}), "(y/n)"));
  tmux.keys("y");
  screen = tmux.wait_for({doomed + " · stopped", "interrupted (SIGINT or SIGTERM)"}, 30s);
  EXPECT_TRUE(shows(screen, "interrupted (SIGINT or SIGTERM)")) << screen;
  EXPECT_EQ(status_of(path, doomed), store::RunStatus::Stopped);
}

// R asks, then releases a live run: it checkpoints, ends as released; a fork of it names its
// parent and the step on its run screen.
TEST(Tui, ReleasesALiveRunAndShowsAForksParent) {
  const std::string dir = fresh_dir("tui_release");
  const std::string prefix = prepare_corpus(dir), path = dir + "/runs.db", log = dir + "/live.log";
  const int pid = start_background(kiln + " train --store " + path + " --name live" + small_run(prefix) +
                                       " --set train.steps=1000000 --set train.log_interval=1 --set train.eval_interval=0"
                                       " --set train.sample_tokens=0 --set train.checkpoint_dir=" + dir + "/checkpoints",
                                   log);
  ASSERT_TRUE(wait_for_step_after(path, "live", 0)) << read_text(log);

  Tmux tmux("release", kiln + " tui --store " + path, 120, 40, dir);
  ASSERT_TRUE(shows(tmux.wait_for({"live", "running"}), "live")) << tmux.screen();
  tmux.keys("Enter");
  ASSERT_TRUE(shows(tmux.wait_for({"run 1 · live", "R Release"}), "R Release")) << tmux.screen();
  tmux.keys("R");
  EXPECT_TRUE(shows(tmux.wait_for({"release run live", "(y/n)"}), "(y/n)")) << tmux.screen();
  tmux.keys("y");
  std::string screen = tmux.wait_for({"live · released"}, 30s);
  EXPECT_TRUE(shows(screen, "live · released")) << screen;
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  EXPECT_EQ(status_of(path, "live"), store::RunStatus::Released);

  const int64_t at = *tui_last_step(path, "live");
  const CommandResult fork = run_command(kiln + " runs fork live --step " + std::to_string(at) + " --name branch --store " +
                                         path + " --set train.steps=" + std::to_string(at + 2));
  ASSERT_EQ(fork.exit_code, 0) << fork.output;
  tmux.keys("q");
  ASSERT_TRUE(shows(tmux.wait_for({"branch"}), "branch")) << tmux.screen();
  tmux.keys("g Enter");  // the newest run is the first row
  screen = tmux.wait_for({"run 2 · branch", "forked from live at step " + std::to_string(at)});
  EXPECT_TRUE(shows(screen, "forked from live at step " + std::to_string(at))) << screen;
}

TEST(Tui, BadStoresGetOneClearLine) {
  const std::string dir = fresh_dir("tui_bad");
  const CommandResult missing = run_command(kiln + " tui --store " + dir + "/nothing.db");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.output, "kiln: error: store: no store at " + dir +
                                "/nothing.db (give --store PATH or set KILN_STORE; `kiln train` "
                                "creates the store)\n");

  const std::string notes = dir + "/notes.txt";
  std::ofstream(notes) << "my notes, not a database\n";
  const CommandResult not_store = run_command(kiln + " tui --store " + notes);
  EXPECT_EQ(not_store.exit_code, 1);
  EXPECT_EQ(not_store.output.rfind("kiln: error: store: ", 0), 0u) << not_store.output;
  EXPECT_EQ(read_text(notes), "my notes, not a database\n");

  // In a terminal the error is the same line, and the terminal is left as it was.
  Tmux tmux("bad", kiln + " tui --store " + notes, 80, 24);
  EXPECT_TRUE(shows(tmux.wait_for({"kiln: error: store: "}), "kiln: error: store: "));

  // A good store without a terminal to draw on is refused in one line, too.
  const std::string path = dir + "/runs.db";
  store::open_store(path, store::Access::ReadWrite);
  const CommandResult piped = run_command(kiln + " tui --store " + path + " </dev/null");
  EXPECT_EQ(piped.exit_code, 1);
  EXPECT_NE(piped.output.find("kiln: error: tui: needs a terminal"), std::string::npos) << piped.output;
}

// A tag holding an OSC that would retitle the terminal and a colour: the runs table shows it
// as escapes and the terminal obeys neither.
TEST(Tui, ControlCharactersInATagAreShownNotObeyed) {
  const std::string dir = fresh_dir("tui_control");
  const std::string path = dir + "/runs.db";
  {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = "tagged";
    info.tags = {"\x1b]2;owned\x07\x1b[31mred"};
    writer.create_run(info);
    writer.flush();
  }
  Tmux tmux("control", kiln + " tui --store " + path, 132, 30);
  // The tags column shows the tag's first ten columns.
  const std::string screen = tmux.wait_for({"tagged", "\\x1b]2;own"});
  EXPECT_TRUE(shows(screen, "\\x1b]2;own")) << screen;
  EXPECT_NE(tmux.pane("#{pane_title}"), "owned");
}

// The run screen's samples pane: Tab goes from the ranks to the events, whose title says the
// samples are next, then to the latest validation step's samples, one per prompt, a prompt's
// text before the model's; a long text wraps to the screen and a control character in it is
// shown, not obeyed.
TEST(Tui, TabShowsTheLatestSamplesOnePerPrompt) {
  const std::string dir = fresh_dir("tui_samples");
  const std::string path = dir + "/runs.db";
  {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = "sampled";
    writer.create_run(info);
    const auto at = [](int64_t step, int slot, std::string prompt, std::string text) {
      store::Sample s;
      s.step = step;
      s.slot = slot;
      s.prompt = std::move(prompt);
      s.text = std::move(text);
      s.temperature = 0.8;
      return s;
    };
    writer.log_samples({at(10, 0, "In the beginning", " old text")});
    writer.log_samples({at(20, 0, "In the beginning", " was the word" + std::string(30, '!') + " and more words"),
                        at(20, 1, "And God said", " let there be\x1b]2;owned\x07 light")});
    writer.finish(store::RunStatus::Completed);
    writer.flush();
  }
  Tmux tmux("samples", kiln + " tui --store " + path, 60, 30);
  std::string screen = tmux.wait_for({"sampled"});
  tmux.keys("Enter");
  screen = tmux.wait_for({"run 1 · sampled", "events (newest last) · Tab: samples at step 20"});
  ASSERT_TRUE(shows(screen, "Tab: samples at step 20")) << screen;
  tmux.keys("Tab");
  tmux.keys("Tab");
  screen = tmux.wait_for({"samples at step 20 (2 prompts, temperature 0.8)", "And God said"});
  ASSERT_TRUE(shows(screen, "samples at step 20 (2 prompts, temperature 0.8)")) << screen;
  EXPECT_TRUE(shows(screen, "In the beginning\n")) << screen;
  EXPECT_TRUE(shows(screen, " was the word" + std::string(30, '!') + " and more\n")) << "wrapped at 56 columns\n" << screen;
  EXPECT_TRUE(shows(screen, "let there be\\x1b]2;owned\\x07 light")) << screen;
  EXPECT_FALSE(shows(screen, "old text")) << "only the latest step's";
  EXPECT_LT(row_of(screen, "In the beginning"), row_of(screen, "And God said")) << screen;
  EXPECT_NE(tmux.pane("#{pane_title}"), "owned");
  expect_fits(screen, 60);
  // Tab once more: back to the ranks, the events in their place again.
  tmux.keys("Tab");
  screen = tmux.wait_for({"events (newest last)"});
  EXPECT_FALSE(shows(screen, "And God said")) << screen;
}

// The runs table's columns are as wide as their content: at 160 columns a run's tags and its
// device show whole beside a short name (the name no longer takes the row's spare width from
// them); at 100 the least useful columns drop out or are cut with an ellipsis, and every line
// fits.
TEST(Tui, RunsTableColumnsFollowTheirContent) {
  const std::string dir = fresh_dir("tui_widths");
  const std::string path = dir + "/runs.db";
  const std::string tags = "baseline,lr-sweep,2026-q4", device = "cpu AMD EPYC 7763 64-Core Processor";
  for (const std::string name : {"lr-0", "lr-1"}) {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = name;
    info.config_json = R"({"train": {"steps": 100}})";
    info.layout = "tp1.pp1.dp1";
    info.backend = "cpu";
    info.device = "AMD EPYC 7763 64-Core Processor";
    info.tags = {"baseline", "lr-sweep", "2026-q4"};
    writer.create_run(info);
    for (int64_t step = 1; step <= 3; ++step) {
      store::MetricRow row;
      row.step = step;
      row.loss = 5.0 / static_cast<double>(step);
      row.tokens_per_s = 1000;
      writer.log_metrics({row});
    }
    writer.finish(store::RunStatus::Completed);
    writer.flush();
  }
  Tmux tmux("widths", kiln + " tui --store " + path, 160, 20);
  std::string screen = tmux.wait_for({"lr-0", "lr-1", "DURATION"});
  for (const std::string name : {"lr-0", "lr-1"}) {
    const int row = row_of(screen, name + " ");
    ASSERT_GE(row, 0) << screen;
    std::istringstream lines(screen);
    std::string line;
    for (int i = 0; i <= row; ++i) std::getline(lines, line);
    EXPECT_TRUE(shows(line, tags)) << line;
    EXPECT_TRUE(shows(line, device)) << line;
    // The name's column is as wide as the longest name: one space before the tags.
    EXPECT_TRUE(shows(line, name + " " + tags)) << line;
  }
  expect_fits(screen, 160);

  tmux.resize(100, 20);
  screen = tmux.wait_for({"STATUS", "NAME", "STEP", "LOSS", "DURATION", "…"});
  EXPECT_TRUE(shows(screen, "lr-0 ") && shows(screen, "3/100") && shows(screen, "DURATION")) << screen;
  EXPECT_FALSE(shows(screen, device)) << screen;
  EXPECT_TRUE(shows(screen, "…")) << screen;
  expect_fits(screen, 100);
}

// The straggler strip marks (in red) the rank the ranks table highlights, the store's slowest:
// here rank 1, whose working time is 2% over the others', within the strip's even shade.
TEST(Tui, TheStragglerStripMarksTheRankTheRanksTableHighlights) {
  const std::string dir = fresh_dir("tui_slowest");
  const std::string path = dir + "/runs.db";
  {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = "four-ranks";
    info.config_json = R"({"train": {"steps": 10}})";
    info.layout = "tp1.pp1.dp4";
    info.backend = "cpu";
    writer.create_run(info);
    writer.record_ranks({{0, "node-a", "cpu", {}}, {1, "node-a", "cpu", {}}, {2, "node-b", "cpu", {}}, {3, "node-b", "cpu", {}}});
    for (int64_t step = 1; step <= 10; ++step) {
      std::vector<store::MetricRow> rows;
      for (int rank = 0; rank < 4; ++rank) {
        store::MetricRow row;
        row.step = step;
        row.rank = rank;
        row.loss = 5.0 / static_cast<double>(step);
        row.tokens_per_s = 1000;
        row.fwd_ms = rank == 1 ? 10.2 : 10;
        rows.push_back(row);
      }
      writer.log_metrics(rows);
    }
    writer.finish(store::RunStatus::Completed);
    writer.flush();
  }
  Tmux tmux("slowest", kiln + " tui --store " + path, 120, 36);
  ASSERT_TRUE(shows(tmux.wait_for({"four-ranks", "completed"}), "four-ranks"));
  tmux.keys("Enter");
  const std::string screen = tmux.wait_for({"run 1 · four-ranks", "1.02x", "1.00x"});
  ASSERT_TRUE(shows(screen, "1.02x")) << screen;
  // The strip's lines, styled: a line per rank, " rN    node-x ... ratio"; red (SGR 31) on rank 1's alone.
  static const std::regex strip_line(R"(r(\d)\s.*node-[ab].*1\.0\dx)");
  std::istringstream lines(tmux.styled_screen());
  int strip_lines = 0;
  std::smatch found;
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, found, strip_line)) continue;
    ++strip_lines;
    EXPECT_EQ(shows(line, "31m") || shows(line, ";31"), found[1] == "1") << line;
  }
  EXPECT_EQ(strip_lines, 4) << tmux.styled_screen();
}

TEST(Tui, ARewoundRunSaysSoAndListsItsRewinds) {
  const std::string dir = fresh_dir("tui_rewind");
  const std::string path = dir + "/runs.db";
  {
    store::RunWriter writer(path);
    store::RunInfo info;
    info.name = "spiky";
    info.config_json = R"({"train": {"steps": 20}})";
    info.backend = "cpu";
    writer.create_run(info);
    const auto log = [&](int64_t step, double loss) {
      store::MetricRow row;
      row.step = step;
      row.loss = loss;
      row.tokens_per_s = 1000;
      writer.log_metrics({row});
    };
    for (int64_t step = 1; step <= 13; ++step) log(step, step == 12 ? 40 : 5.0 / static_cast<double>(step));
    store::Rewind back;
    back.number = 1;
    back.spike_step = 12;
    back.from_step = 13;
    back.to_step = 10;
    back.first_skipped_batch = 11;
    back.skipped_batches = 3;
    back.message = "from step 13 back to step 10 past the loss spike at step 12, skipping batches 11-13 of the data; "
                   "rewind 1 of 3";
    writer.log_rewind(back);
    for (int64_t step = 11; step <= 20; ++step) log(step, 4.0 / static_cast<double>(step));
    writer.finish(store::RunStatus::Completed);
    writer.flush();
  }
  Tmux tmux("rewind", kiln + " tui --store " + path, 140, 40);
  ASSERT_TRUE(shows(tmux.wait_for({"spiky", "completed"}), "spiky"));
  tmux.keys("Enter");
  const std::string screen = tmux.wait_for({"run 1 · spiky", "rewound 1x", "from step 13 back to step 10"});
  EXPECT_TRUE(shows(screen, "rewound 1x")) << screen;
  EXPECT_TRUE(shows(screen, "from step 13 back to step 10 past the loss spike at step 12")) << screen;
}

}  // namespace
}  // namespace kiln::test
