#include "monitor/tui/launch_form.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/check.h"
#include "base/run_names.h"
#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/terminal.h"
#include "monitor/tui/run_screen.h"
#include "store/run_queries.h"

namespace kiln::tui {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kLabelWidth = 16;

int positive_int(const std::string& text, const char* field) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    fail(fmt::format("{}: '{}' is not a whole number of 1 or more", field, text));
  return value;
}

void check_positive_number(const std::string& text, const char* field) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value <= 0)
    fail(fmt::format("{}: '{}' is not a number greater than 0", field, text));
}

// The config file's JSON; an empty object while the path typed so far names no file.
json read_config(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return json::object();
  std::ifstream in(path);
  json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return config.is_object() ? config : json::object();
}

// The value at section.key as text, or empty.
std::string config_text(const json& config, const char* section, const char* key) {
  const auto s = config.find(section);
  if (s == config.end() || !s->is_object()) return {};
  const auto k = s->find(key);
  if (k == s->end()) return {};
  if (k->is_string()) return k->get<std::string>();
  if (k->is_number_integer()) return std::to_string(k->get<int64_t>());
  if (k->is_number()) return shortest(k->get<double>());
  return {};
}

std::string text_or(std::string text, std::string fallback) {
  return text.empty() ? fallback : text;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

LaunchPlan plan_launch(const LaunchValues& v, const std::string& kiln_binary,
                       const std::string& store_path) {
  if (v.config.empty()) fail("config: pick one with Left/Right or type a path");
  if (!fs::is_regular_file(v.config)) fail("config: no file " + v.config);
  kiln::check_run_name(v.name);
  LaunchPlan plan;
  plan.processes = positive_int(v.tp, "tp") * positive_int(v.pp, "pp") * positive_int(v.dp, "dp");
  std::vector<std::string> train = {"--config", v.config, "--store", store_path, "--name", v.name};
  const auto set = [&](const std::string& key, const std::string& value) {
    if (!value.empty()) train.insert(train.end(), {"--set", key + "=" + value});
  };
  if (!v.steps.empty()) positive_int(v.steps, "steps");
  if (!v.lr.empty()) check_positive_number(v.lr, "lr");
  set("train.steps", v.steps);
  set("train.lr", v.lr);
  set("parallel.tp", v.tp);
  set("parallel.pp", v.pp);
  set("backend.device", v.device);
  std::string checkpoint_dir = config_text(read_config(v.config), "train", "checkpoint_dir");
  for (const auto& w : words(v.more)) {
    if (w.find('=') == std::string::npos) fail("more: '" + w + "' is not key=value");
    train.insert(train.end(), {"--set", w});
    if (w.starts_with("train.checkpoint_dir=")) checkpoint_dir = w.substr(w.find('=') + 1);
  }
  // The run's folder is where its checkpoints go: <checkpoint_dir>/<name>.
  const fs::path run_dir = fs::path(checkpoint_dir.empty() ? "checkpoints" : checkpoint_dir) / v.name;
  plan.command = {kiln_binary, std::move(train), plan.processes, (run_dir / "train.log").string(), true, std::nullopt};
  return plan;
}

namespace {

class LaunchForm final : public Screen {
 public:
  explicit LaunchForm(LaunchSetup setup) : setup_(std::move(setup)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(setup_.configs_dir, ec))
      if (entry.path().extension() == ".json") configs_.push_back(entry.path().string());
    std::sort(configs_.begin(), configs_.end());
    // The tiny demo first: it trains on any machine in minutes.
    const auto tiny = std::find_if(configs_.begin(), configs_.end(), [](const std::string& c) {
      return fs::path(c).filename() == "tiny.json";
    });
    if (tiny != configs_.end()) choose_config(*tiny);
    else if (!configs_.empty()) choose_config(configs_.front());
  }

  void load(Session&) override {}

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    put(0, 0, " launch a run into " + session.store_path(), COLS, theme.attr(Tone::Title));
    const auto fields = field_list();
    for (size_t i = 0; i < fields.size(); ++i) {
      const int row = 2 + static_cast<int>(i);
      const bool current = i == field_;
      put(row, 2, fields[i].label, kLabelWidth, current ? A_BOLD : theme.attr(Tone::Dim));
      const int width = COLS - kLabelWidth - 4;
      if (current) fill_row(row, kLabelWidth + 2, width, theme.attr(Tone::Selected));
      const std::string shown = *fields[i].value + (current ? "_" : "");
      // A long path shows its end, where the file name is.
      const int over = text_width(shown) - width;
      put(row, kLabelWidth + 2, over > 0 ? shown.substr(static_cast<size_t>(over)) : shown, width,
          current ? theme.attr(Tone::Selected) : 0);
    }
    int row = 3 + static_cast<int>(fields.size());
    put(row++, 2, fields[field_].hint, COLS - 4, theme.attr(Tone::Dim));
    ++row;
    try {
      const LaunchPlan plan = plan_launch(values_, setup_.kiln_binary, session.store_path());
      put(row++, 2, fmt::format("{} process{}; output to {}", plan.processes,
                                plan.processes == 1 ? "" : "es", plan.command.log_path),
          COLS - 4, 0);
      std::string command;
      for (const auto& a : launch::train_child(plan.command).argv) command += (command.empty() ? "" : " ") + a;
      // The command wraps over the rows left, so all of it can be read before it runs.
      for (size_t at = 0; at < command.size() && row < height; at += static_cast<size_t>(COLS - 4))
        put(row++, 2, command.substr(at, static_cast<size_t>(COLS - 4)), COLS - 4, theme.attr(Tone::Info));
    } catch (const Error& e) {
      for (const auto& line : wrap(e.what(), COLS - 4))
        if (row < height) put(row++, 2, line, COLS - 4, theme.attr(Tone::Warn));
    }
  }

  Outcome key(int key, Session& session) override {
    const auto fields = field_list();
    switch (key) {
      case kEscapeKey: return Outcome::back();
      case '?': return Outcome::ignored();
      case KEY_UP: case KEY_BTAB: field_ = (field_ + fields.size() - 1) % fields.size(); return Outcome::handled();
      case KEY_DOWN: case '\t': field_ = (field_ + 1) % fields.size(); return Outcome::handled();
      case KEY_LEFT: case KEY_RIGHT: cycle(key == KEY_RIGHT ? 1 : -1); return Outcome::handled();
      case '\n': case '\r': case KEY_ENTER: {
        const LaunchPlan plan = plan_launch(values_, setup_.kiln_binary, session.store_path());
        // Checked here, not only by kiln train: the run screen finds the new run by its name.
        if (store::find_run_named(session.reader(), values_.name))
          fail("name: a run named '" + values_.name + "' is already in the store");
        fs::create_directories(fs::path(plan.command.log_path).parent_path());
        try {
          session.launcher().start(values_.name, launch::train_child(plan.command));
        } catch (const Error& e) {
          fail(std::string("launch: ") + e.what());
        }
        session.flash("started " + values_.name + "; output in " + plan.command.log_path);
        return Outcome::replace(make_launched_run_screen(values_.name));
      }
      default:
        if (edit_line(*fields[field_].value, key) && field_ == kConfigField) choose_config(values_.config);
        return Outcome::handled();
    }
  }

  std::vector<KeyHint> hints() const override {
    return {{"Enter", "Launch"}, {"Up/Down", "Field"}, {"Left/Right", "Choose"},
            {"Ctrl-U", "Clear"}, {"Esc", "Cancel"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"Up Down Tab", "move between the fields"},
            {"Left Right", "choose a config from configs/ or a device"},
            {"typing", "edits the field; Backspace, Ctrl-U clears it"},
            {"Enter", "launch the run in the background"},
            {"Esc", "cancel"},
            {"", "an empty steps or lr keeps the config's value"}};
  }

  std::string title() const override { return "Launch"; }

 private:
  static constexpr size_t kConfigField = 0;
  static constexpr size_t kDeviceField = 7;

  struct Field {
    std::string label;
    std::string* value;
    std::string hint;
  };

  std::vector<Field> field_list() {
    return {{"config", &values_.config, "a config file: Left/Right cycles through configs/, or type a path"},
            {"name", &values_.name, "the run's name in the store: the config's and the time, as kiln train names it"},
            {"steps", &values_.steps, "train.steps"},
            {"learning rate", &values_.lr, "train.lr (peak)"},
            {"tp", &values_.tp, "tensor-parallel size (parallel.tp)"},
            {"pp", &values_.pp, "pipeline-parallel size (parallel.pp)"},
            {"dp", &values_.dp, "data-parallel size: processes = tp x pp x dp, kiln train --ranks when above 1"},
            {"device", &values_.device, "backend.device: Left/Right for auto, cpu or cuda"},
            {"more --set", &values_.more, "more overrides, key=value separated by spaces"}};
  }

  void cycle(int direction) {
    if (field_ == kDeviceField) {
      static const std::vector<std::string> devices = {"auto", "cpu", "cuda"};
      const auto at = std::find(devices.begin(), devices.end(), values_.device);
      const long index = at == devices.end() ? 0 : ((at - devices.begin()) + direction + 3) % 3;
      values_.device = devices[static_cast<size_t>(index)];
    } else if (field_ == kConfigField && !configs_.empty()) {
      const auto at = std::find(configs_.begin(), configs_.end(), values_.config);
      const long n = static_cast<long>(configs_.size());
      const long index = at == configs_.end() ? 0 : ((at - configs_.begin()) + direction + n) % n;
      choose_config(configs_[static_cast<size_t>(index)]);
    }
  }

  // Takes the config's own values as the starting overrides, and the name kiln train would
  // give the run.
  void choose_config(const std::string& path) {
    values_.config = path;
    const json config = read_config(path);
    if (config.empty()) return;
    values_.steps = config_text(config, "train", "steps");
    values_.lr = config_text(config, "train", "lr");
    values_.tp = text_or(config_text(config, "parallel", "tp"), "1");
    values_.pp = text_or(config_text(config, "parallel", "pp"), "1");
    values_.device = text_or(config_text(config, "backend", "device"), "auto");
    values_.name = setup_.default_run_name(path);
  }

  LaunchSetup setup_;
  std::vector<std::string> configs_;
  LaunchValues values_;
  size_t field_ = 0;
};

}  // namespace

std::unique_ptr<Screen> make_launch_form(LaunchSetup setup) {
  return std::make_unique<LaunchForm>(std::move(setup));
}

}  // namespace kiln::tui
