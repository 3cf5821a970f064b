#include "monitor/tui/run_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/check.h"
#include "base/terminal_text.h"
#include "monitor/format/config_text.h"
#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/experts_block.h"
#include "monitor/tui/plan_line.h"
#include "monitor/tui/plot.h"
#include "monitor/tui/ranks_block.h"
#include "monitor/tui/run_layout.h"
#include "monitor/tui/table.h"
#include "store/alert_rows.h"
#include "store/commands.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/rank_places.h"
#include "store/rank_queries.h"
#include "store/run_details.h"
#include "store/run_figures.h"
#include "store/run_overview.h"
#include "store/run_queries.h"

namespace kiln::tui {
namespace {

constexpr size_t kEvents = 50;
constexpr int kLogTailLines = 12;

// Tab goes round them; the samples take the events' place while shown.
enum class Pane { Ranks, Events, Samples };

std::string millis(double ms) { return std::isnan(ms) ? kAbsent : fmt::format("{:.1f}", ms); }

// With `all_to_all` (an expert-parallel run), the A2A column: the part of FWD and BWD the
// tokens' all-to-alls took.
// The ranks table's time columns: the metric list's parts of the step, then those within
// them (expert parallelism's all-to-alls) where a row measured one.
std::vector<const store::MetricField*> time_fields(const std::vector<store::MetricRow>& rows) {
  std::vector<const store::MetricField*> fields;
  for (const store::MetricField& f : store::kMetricFields) {
    const bool within = (f.views & store::kInTimeWithin) != 0;
    if (!(f.views & store::kInTimeSplit) && !within) continue;
    const auto measured = [&](const store::MetricRow& r) { return !std::isnan(store::metric_value(r, f)); };
    if (within && std::none_of(rows.begin(), rows.end(), measured)) continue;
    fields.push_back(&f);
  }
  return fields;
}

// FWD for fwd_ms: the field's name less its unit, in capitals.
std::string column_name(const store::MetricField& field) {
  std::string name(field.name.substr(0, field.name.rfind("_ms")));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::vector<TableColumn> rank_columns(const std::vector<const store::MetricField*>& times) {
  std::vector<TableColumn> c = {
      {"RANK", 4, true, 10}, {"HOST", 10, false, 4}, {"STEP", 7, true, 9},  {"LOSS", 7, true, 8},  {"TOK/S", 7, true, 7},
      {"MFU", 6, true, 6},   {"MEM USED/PEAK", 19, true, 5}, {"STEP MS", 8, true, 6}};
  for (const store::MetricField* f : times) c.push_back({column_name(*f), 6, true, f->column_priority});
  c.push_back({"AGE", 5, true, 6});
  return c;
}

Tone event_tone(const std::string& kind) {
  if (kind == "error" || kind == "nan" || kind == "dropped" || kind == "alert") return Tone::Bad;
  if (kind == "rewind") return Tone::Warn;
  if (kind == "command") return Tone::Accent;
  if (kind == "checkpoint") return Tone::Info;
  if (kind == "start" || kind == "end") return Tone::Good;
  return Tone::Plain;
}

std::string clock_time(double unix_s) {
  const std::string full = local_second(unix_s);
  return full.size() > 8 ? full.substr(full.size() - 8) : full;
}

std::vector<std::string> log_tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  if (all.size() > static_cast<size_t>(lines)) all.erase(all.begin(), all.end() - lines);
  return all;
}

// A metric's curve, and the times of its first and last points (for the step rate).
struct Curve {
  PlotSeries series;
  double first_time = 0, last_time = 0;
};

Curve curve_of(store::Database& db, int64_t run_id, const std::string& key, int width, Tone tone) {
  store::SeriesQuery query;
  query.key = key;
  query.max_points = static_cast<size_t>(std::max(2 * width, 16));
  // Rank 0 draws the curve: every rank logs the run's throughput and the same loss, and only
  // rank 0 keeps every row of a wide run (store/metric_spread.h).
  query.ranks = {0};
  Curve curve;
  curve.series.tone = tone;
  const std::vector<store::RankSeries> ranks = store::metric_series(db, run_id, query);
  if (ranks.empty()) return curve;
  for (const auto& p : ranks.front().points) {
    curve.series.x.push_back(static_cast<double>(p.step));
    curve.series.y.push_back(p.value);
  }
  curve.first_time = ranks.front().points.front().time;
  curve.last_time = ranks.front().points.back().time;
  return curve;
}

// The peak learning rate the run trains at now: its config's train.lr as the last applied
// `set train.lr` (a new peak) or `set train.lr_scale` (a multiple of the config's) left it.
std::optional<double> peak_lr(const std::string& config_json, const std::vector<store::Command>& commands) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return std::nullopt;
  const nlohmann::json lr = config.value("/train/lr"_json_pointer, nlohmann::json());
  if (!lr.is_number()) return std::nullopt;
  const double configured = lr.get<double>();
  double peak = configured;
  for (const store::Command& c : commands) {
    if (c.action != store::CommandAction::Set || c.status != store::CommandStatus::Applied) continue;
    const size_t eq = c.argument.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = c.argument.substr(0, eq), value = c.argument.substr(eq + 1);
    double number = 0;
    if (std::from_chars(value.data(), value.data() + value.size(), number).ec != std::errc()) continue;
    if (key == "train.lr") peak = number;
    if (key == "train.lr_scale") peak = configured * number;
  }
  return peak;
}

class RunScreen final : public Screen {
 public:
  RunScreen(std::optional<int64_t> id, std::string name) : id_(id), name_(std::move(name)) {}

  void load(Session& session) override {
    store::Database& db = session.reader();
    if (!id_ && !find_launched(db)) return;
    details_ = store::run_details(db, *id_, kEvents);
    ranks_ = store::latest_rows_of_every_rank(db, *id_);
    commands_ = store::list_commands(db, *id_);
    name_ = details_->run.name;
    const int plot_width = std::max(8, COLS / 2 - 10);
    loss_ = curve_of(db, *id_, "loss", plot_width, Tone::Good);
    rate_ = curve_of(db, *id_, "tokens_per_s", plot_width, Tone::Info);
    places_ = store::list_rank_places(db, *id_);
    // The heat strip: the recent logged steps, one column each.
    store::HeatQuery recent;
    recent.max_columns = static_cast<size_t>(strip_columns(COLS));
    recent.from = store::recent_from(db, *id_, recent.max_columns).value_or(recent.from);
    heat_ = store::rank_heat(db, *id_, recent);
    const auto fired = store::alert_counts(db);
    alerts_ = fired.count(*id_) ? fired.at(*id_) : 0;
  }

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    if (!details_) return draw_waiting(session, height);
    const store::RunRecord& run = details_->run;
    const double now = store::unix_now();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    int col = put(0, 0, fmt::format(" run {} · {} · ", run.id, run.name), COLS, theme.attr(Tone::Title));
    col += put(0, col, std::string(store::to_string(run.status)), COLS - col,
               theme.attr(Tone::Title) | A_UNDERLINE);
    col += put(0, col, fmt::format(" · {} · {} {} · {}", run.layout.empty() ? kAbsent : run.layout,
                                   run.backend, run.device, run.host),
               COLS - col, theme.attr(Tone::Title));
    if (alerts_ > 0)
      col += put(0, col, fmt::format(" · {} alert{} ", alerts_, alerts_ == 1 ? "" : "s"), COLS - col,
                 theme.attr(Tone::Bad) | A_BOLD);
    if (const size_t rewinds = details_->rewinds.size(); rewinds > 0)
      put(0, col, fmt::format("{}· rewound {}x ", alerts_ > 0 ? "" : " ", rewinds), COLS - col,
          theme.attr(Tone::Warn) | A_BOLD);
    std::string summary = config_summary(run.config_json);
    if (!details_->lineage.ancestors.empty())
      summary += fmt::format(" · forked from {} at step {}", details_->lineage.ancestors.front().name,
                             details_->lineage.ancestors.front().step);
    put(1, 1, summary, COLS - 2, theme.attr(Tone::Dim));
    draw_progress(2, session, now);
    draw_plan_line(3, COLS - 1, run, details_->latest, rate_.series.y, theme);

    const int expert_rows = experts_block_rows(details_->latest_experts, COLS);
    const bool tall = LINES >= kTallTerminalRows;
    // The heat strip only where it leaves the ranks table the rows it would have without it.
    int strip_rows = ranks_block_rows(heat_);
    RunLayout layout = run_layout(height, ranks_.size(), tall, expert_rows + strip_rows);
    if (const RunLayout without = run_layout(height, ranks_.size(), tall, expert_rows);
        layout.ranks_rows < without.ranks_rows) {
      layout = without;
      strip_rows = 0;
    }
    draw_ranks(layout.ranks_top + 1, layout.ranks_rows + 1, theme, now);
    const int half = COLS / 2;
    draw_plot(layout.plots_top, 0, layout.plot_height, half - 1, "loss", loss_lines(), theme);
    draw_plot(layout.plots_top, half, layout.plot_height, COLS - half, "tokens/s", {rate_.series}, theme);
    draw_experts_block(layout.experts_top, COLS, details_->latest_experts, theme);
    if (strip_rows > 0) draw_ranks_block(layout.experts_top + expert_rows, COLS, heat_, places_, slowest_rank(), theme);
    if (pane_ == Pane::Samples) {
      draw_samples(layout.events_top, height - layout.events_top, theme);
    } else {
      draw_events(layout.events_top, height - layout.events_top, theme);
    }
  }

  // The loss, after the losses rewinds abandoned, dimmed beneath it. Those held a spike: they
  // are drawn within the loss's own range (a spike at its top), which it would otherwise flatten.
  std::vector<PlotSeries> loss_lines() const {
    std::vector<PlotSeries> lines;
    const std::vector<double>& live = loss_.series.y;
    const double top = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
    for (const store::Rewind& r : details_->rewinds) {
      PlotSeries abandoned;
      abandoned.tone = Tone::Dim;
      for (const store::RewoundLoss& point : r.losses) {
        abandoned.x.push_back(static_cast<double>(point.step));
        abandoned.y.push_back(live.empty() ? point.loss : std::min(point.loss, top));
      }
      lines.push_back(std::move(abandoned));
    }
    lines.push_back(loss_.series);
    return lines;
  }

  Outcome key(int key, Session& session) override {
    if (prompt_) return prompt_key(key, session);
    if (key == '\t') {
      const bool samples = details_ && !details_->latest_samples.empty();
      pane_ = pane_ == Pane::Ranks ? Pane::Events : pane_ == Pane::Events && samples ? Pane::Samples : Pane::Ranks;
      return Outcome::handled();
    }
    if (!details_) return Outcome::ignored();
    // In the samples, the selection is the first line shown.
    const size_t count = pane_ == Pane::Ranks    ? ranks_.size()
                         : pane_ == Pane::Events ? details_->events.size()
                                                 : sample_scroll_lines_;
    size_t& selected = pane_ == Pane::Ranks ? rank_selected_ : pane_ == Pane::Events ? event_selected_ : sample_first_;
    if (move_selection(key, count, 5, selected)) return Outcome::handled();
    using A = store::CommandAction;
    switch (key) {
      case 'p':
        steer(session, details_->run.status == store::RunStatus::Paused ? A::Resume : A::Pause);
        return Outcome::handled();
      case 'c': steer(session, A::Checkpoint); return Outcome::handled();
      case 'l':
        open(Question::LearningRate, Prompt::Kind::Text, learning_rate_question());
        return Outcome::handled();
      case 's':
        open(Question::Stop, Prompt::Kind::Confirm,
             "stop run " + name_ + " (it checkpoints if configured, then ends as stopped)?");
        return Outcome::handled();
      case 'R':
        open(Question::Release, Prompt::Kind::Confirm,
             "release run " + name_ + " (it checkpoints, ends and frees its devices; kiln runs resume starts it again)?");
        return Outcome::handled();
      case 'K':
        if (!session.launcher().running(name_)) {
          session.flash("K kills only a run launched from this kiln tui and still running; "
                        "s stops any live run", Tone::Warn);
          return Outcome::handled();
        }
        open(Question::Kill, Prompt::Kind::Confirm, "kill the processes of " + name_ + "?");
        return Outcome::handled();
      default: return Outcome::ignored();
    }
  }

  std::vector<KeyHint> hints() const override {
    return {{"p", "Pause/Resume"}, {"c", "Ckpt"}, {"l", "LR"}, {"s", "Stop"}, {"R", "Release"}, {"K", "Kill"},
            {"Tab", "Pane"}, {"?", "Help"}, {"q", "Back"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"p", "pause a running run / resume a paused one"},
            {"c", "write a checkpoint at the next step"},
            {"l", "set the peak learning rate (train.lr); it shows the current one"},
            {"s", "stop gracefully (asks first)"},
            {"R", "release: checkpoint, end and free the devices, to resume later (asks first)"},
            {"K", "kill the processes this UI launched (asks first)"},
            {"Tab", "switch the ranks, events and samples panes (arrows scroll)"},
            {"", "commands go through the store's queue; the run acts"},
            {"", "at its next step boundary and records an event"}};
  }

  std::string title() const override { return "Run"; }
  const Prompt* prompt() const override { return prompt_ ? &*prompt_ : nullptr; }

 private:
  enum class Question { LearningRate, Stop, Release, Kill };

  bool find_launched(store::Database& db) {
    id_ = store::find_run_named(db, name_);
    return id_.has_value();
  }

  // Says what the learning rate is before asking for a new one: the peak that `set
  // train.lr` replaces, and where the schedule has taken it at the latest step.
  std::string learning_rate_question() const {
    std::vector<std::string> now;
    if (const auto peak = peak_lr(details_->run.config_json, commands_))
      now.push_back("peak (train.lr) " + shortest(*peak));
    if (!details_->latest.empty() && !std::isnan(details_->latest.front().lr))
      now.push_back(fmt::format("{:.3g} at step {}", details_->latest.front().lr, details_->latest.front().step));
    if (now.empty()) return "new peak learning rate (train.lr):";
    return "learning rate: " + join(now, ", ") + "; new peak:";
  }

  void draw_waiting(Session& session, int height) {
    const Theme& theme = session.theme();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    put(0, 0, " launching " + name_, COLS, theme.attr(Tone::Title));
    const Launcher& launcher = session.launcher();
    const std::string log = launcher.log_path(name_);
    if (const auto code = launcher.exit_code(name_)) {
      put(2, 2, fmt::format("The launch ended (exit code {}) before the run reached the store.", *code),
          COLS - 4, theme.attr(Tone::Bad));
    } else {
      put(2, 2, "Starting; the run opens here as soon as it is recorded in the store.", COLS - 4, 0);
    }
    put(3, 2, "log: " + log, COLS - 4, theme.attr(Tone::Dim));
    int row = 5;
    for (const auto& line : log_tail(log, kLogTailLines))
      if (row < height) put(row++, 2, line, COLS - 4, 0);
  }

  void draw_progress(int row, Session& session, double now) {
    const Theme& theme = session.theme();
    const store::RunRecord& run = details_->run;
    const std::optional<int64_t> planned = store::planned_steps(run.config_json);
    const int64_t step = run.last_step.value_or(0);
    std::string right = fmt::format(" step {}", step);
    double fraction = 0;
    if (planned && *planned > 0) {
      fraction = std::clamp(static_cast<double>(step) / static_cast<double>(*planned), 0.0, 1.0);
      right = fmt::format(" step {}/{} {:.1f}%", step, *planned, 100 * fraction);
    }
    right += " · " + eta_text(planned) + " · elapsed " + duration_or_absent(store::run_duration_s(run, now));
    if (!details_->latest.empty()) {
      const double lr = details_->latest.front().lr;
      if (!std::isnan(lr)) right += fmt::format(" · lr {:.3g}", lr);
    }
    const int bar = std::clamp(COLS - text_width(right) - 3, 10, 60);
    const int filled = static_cast<int>(std::lround(fraction * bar));
    std::string cells;
    for (int i = 0; i < bar; ++i)
      cells += i < filled ? (theme.unicode() ? "█" : "#") : (theme.unicode() ? "░" : ".");
    put(row, 1, "[", 1, 0);
    put(row, 2, cells, bar, theme.attr(status_tone(run.status)));
    put(row, 2 + bar, "]", 1, 0);
    put(row, 3 + bar, right, COLS - bar - 3, 0);
  }

  // Remaining steps at the rate of the logged steps so far, first to last.
  std::string eta_text(const std::optional<int64_t>& planned) const {
    const store::RunRecord& run = details_->run;
    if (run.ended_at) return std::string(store::to_string(run.status));
    if (run.status == store::RunStatus::Paused) return "paused";
    const std::vector<double>& steps = rate_.series.x;
    if (!planned || steps.size() < 2) return "ETA -";
    const double step_rate = (steps.back() - steps.front()) / (rate_.last_time - rate_.first_time);
    if (!(step_rate > 0)) return "ETA -";
    return "ETA " + duration_or_absent((static_cast<double>(*planned) - steps.back()) / step_rate);
  }

  // The slowest by working time at the latest step (store::slowest_of, as the dashboard's):
  // the others' exposed communication is their wait for it.
  std::optional<int> slowest_rank() const {
    const auto at = store::slowest_of(ranks_);
    return at ? std::optional<int>(ranks_[*at].rank) : std::nullopt;
  }

  void draw_ranks(int row, int height, const Theme& theme, double now) {
    const auto& rows = ranks_;
    const size_t slowest = store::slowest_of(rows).value_or(rows.size());
    const auto times = time_fields(rows);
    std::vector<std::vector<TableCell>> cells;
    for (size_t i = 0; i < rows.size(); ++i) {
      const store::MetricRow& r = rows[i];
      const Tone tone = i == slowest ? Tone::Warn : Tone::Plain;
      const double age = now - r.time;
      const auto place = std::find_if(places_.begin(), places_.end(), [&](const store::RankPlace& p) { return p.rank == r.rank; });
      cells.push_back({{std::to_string(r.rank), tone}, {place == places_.end() ? kAbsent : place->host, tone},
                       {std::to_string(r.step), tone},
                       {fixed4(r.loss), tone}, {compact_rate(r.tokens_per_s), tone},
                       {percent(r.mfu), mfu_tone(r.mfu)},
                       {bytes_or_absent(r.mem_used) + "/" + bytes_or_absent(r.mem_peak), tone},
                       {millis(store::step_ms(r)), i == slowest ? Tone::Bad : tone}});
      for (const store::MetricField* f : times) cells.back().push_back({millis(store::metric_value(r, *f)), tone});
      cells.back().push_back({store::is_live(details_->run.status) ? fmt::format("{:.0f}s", age) : kAbsent,
                              store::is_live(details_->run.status) ? age_tone(age) : Tone::Dim});
    }
    put(row - 1, 1,
        rows.size() > 1 ? fmt::format("ranks ({}; the slowest, by forward+backward+optimizer time, highlighted)", rows.size()) : "ranks",
        COLS - 2, pane_ == Pane::Ranks ? A_BOLD : theme.attr(Tone::Dim));
    rank_first_ = scroll_to_show(rank_first_, rank_selected_, static_cast<size_t>(height - 1));
    TableView view{row, 0, COLS, height, rank_first_, static_cast<long>(rank_selected_),
                   pane_ == Pane::Ranks};
    draw_table(view, rank_columns(times), cells, {}, theme);
    if (rows.empty()) put(row + 1, 2, "no step logged yet", COLS - 4, theme.attr(Tone::Dim));
  }

  void draw_events(int row, int height, const Theme& theme) {
    if (height < 2) return;
    const auto& events = details_->events;
    const auto& samples = details_->latest_samples;
    put(row, 1,
        samples.empty() ? std::string("events (newest last)")
                        : fmt::format("events (newest last) · Tab: samples at step {}", samples.front().step),
        COLS - 2, pane_ == Pane::Events ? A_BOLD : theme.attr(Tone::Dim));
    const size_t visible = static_cast<size_t>(height - 1);
    // Unless the user scrolls, the newest events show, as many as fit.
    if (pane_ != Pane::Events) {
      event_selected_ = events.empty() ? 0 : events.size() - 1;
      event_first_ = events.size() > visible ? events.size() - visible : 0;
    }
    event_first_ = scroll_to_show(event_first_, event_selected_, visible);
    for (size_t k = 0; k < visible && event_first_ + k < events.size(); ++k) {
      const store::Event& e = events[event_first_ + k];
      const int y = row + 1 + static_cast<int>(k);
      const bool selected = pane_ == Pane::Events && event_first_ + k == event_selected_;
      if (selected) fill_row(y, 0, COLS, theme.attr(Tone::Selected));
      const int sel = selected ? theme.attr(Tone::Selected) : 0;
      int col = put(y, 2, clock_time(e.time) + " ", COLS - 2, sel | theme.attr(Tone::Dim));
      col += put(y, 2 + col, pad_right_aligned(e.step ? "step " + std::to_string(*e.step) : "", 11) + " ",
                 COLS - 2 - col, sel);
      col += put(y, 2 + col, pad_left_aligned(e.kind, 10) + " ", COLS - 2 - col,
                 sel ? sel : theme.attr(event_tone(e.kind)));
      put(y, 2 + col, e.message, COLS - 2 - col, sel);
    }
  }

  // What the model wrote at the latest validation step, after each prompt: the prompt's lines
  // dim, the model's plain, wrapped to the screen; arrows scroll when they pass the rows.
  void draw_samples(int row, int height, const Theme& theme) {
    if (height < 2) return;
    const auto& samples = details_->latest_samples;
    if (samples.empty()) {
      pane_ = Pane::Ranks;
      return draw_events(row, height, theme);
    }
    put(row, 1,
        fmt::format("samples at step {} ({} prompt{}, temperature {:g}) · Tab: ranks", samples.front().step,
                    samples.size(), samples.size() == 1 ? "" : "s", samples.front().temperature),
        COLS - 2, A_BOLD);
    std::vector<std::pair<std::string, Tone>> lines;
    const auto add = [&](const std::string& text, Tone tone) {
      for (size_t start = 0; start <= text.size();) {
        const size_t end = std::min(text.find('\n', start), text.size());
        // Escaped before wrapping, so a line is as wide as it is drawn.
        const auto wrapped = wrap(terminal_line(std::string_view(text).substr(start, end - start)), COLS - 4);
        if (wrapped.empty()) lines.emplace_back("", tone);
        for (const std::string& line : wrapped) lines.emplace_back(line, tone);
        start = end + 1;
      }
    };
    for (const store::Sample& s : samples) {
      if (s.slot > 0) lines.emplace_back("", Tone::Plain);
      add(s.prompt, Tone::Dim);
      add(s.text, Tone::Plain);
    }
    const size_t visible = static_cast<size_t>(height - 1);
    sample_scroll_lines_ = lines.size() > visible ? lines.size() - visible + 1 : 1;
    sample_first_ = std::min(sample_first_, sample_scroll_lines_ - 1);
    for (size_t k = 0; k < visible && sample_first_ + k < lines.size(); ++k) {
      const auto& [text, tone] = lines[sample_first_ + k];
      put(row + 1 + static_cast<int>(k), 2, text, COLS - 4, theme.attr(tone));
    }
  }

  void open(Question question, Prompt::Kind kind, std::string text) {
    question_ = question;
    prompt_.emplace(kind, std::move(text));
  }

  Outcome prompt_key(int key, Session& session) {
    const Prompt::Result result = prompt_->key(key);
    if (result == Prompt::Result::Open) return Outcome::handled();
    const std::string answer = prompt_->text();
    prompt_.reset();
    if (result == Prompt::Result::Cancelled) return Outcome::handled();
    switch (question_) {
      case Question::LearningRate: {
        double lr = 0;
        const auto [end, ec] = std::from_chars(answer.data(), answer.data() + answer.size(), lr);
        if (ec != std::errc() || end != answer.data() + answer.size() || !std::isfinite(lr) || lr <= 0) {
          session.flash("learning rate: '" + answer + "' is not a number greater than 0", Tone::Bad);
          break;
        }
        std::string setting = fmt::format("train.lr={}", lr);
        if (session.check_setting() && details_) {
          try {
            setting = session.check_setting()(setting, details_->run.config_json);
          } catch (const Error& e) {
            session.flash(e.what(), Tone::Bad);
            break;
          }
        }
        steer(session, store::CommandAction::Set, setting);
        break;
      }
      case Question::Stop: steer(session, store::CommandAction::Stop); break;
      case Question::Release: steer(session, store::CommandAction::Release); break;
      case Question::Kill:
        if (session.launcher().kill(name_)) session.flash("sent the processes of " + name_ + " SIGTERM (K again: SIGKILL)", Tone::Warn);
        break;
    }
    return Outcome::handled();
  }

  void steer(Session& session, store::CommandAction action, const std::string& argument = {}) {
    const int64_t command = store::insert_command(session.writer(), *id_, action, argument);
    session.flash(fmt::format("queued {}{} as command {}; it applies at the run's next step",
                              store::to_string(action), argument.empty() ? "" : " " + argument,
                              command));
  }

  std::optional<int64_t> id_;
  std::string name_;
  std::optional<store::RunDetails> details_;
  std::vector<store::MetricRow> ranks_;  // every rank's row at the latest step (the details hold rank 0's of a wide step)
  std::vector<store::Command> commands_;
  std::vector<store::RankPlace> places_;
  store::RankHeat heat_;
  int64_t alerts_ = 0;
  Curve loss_, rate_;
  Pane pane_ = Pane::Ranks;
  size_t rank_selected_ = 0, rank_first_ = 0, event_selected_ = 0, event_first_ = 0;
  size_t sample_first_ = 0, sample_scroll_lines_ = 1;  // the samples' first line shown, of how many firsts
  std::optional<Prompt> prompt_;
  Question question_ = Question::Stop;
};

}  // namespace

std::unique_ptr<Screen> make_run_screen(int64_t run_id) {
  return std::make_unique<RunScreen>(run_id, "");
}

std::unique_ptr<Screen> make_launched_run_screen(std::string run_name) {
  return std::make_unique<RunScreen>(std::nullopt, std::move(run_name));
}

}  // namespace kiln::tui
