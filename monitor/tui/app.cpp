#include "monitor/tui/app.h"

#include <curses.h>

#include <exception>
#include <vector>

#include "monitor/tui/draw.h"
#include "monitor/tui/help_overlay.h"
#include "monitor/tui/runs_screen.h"
#include "monitor/tui/screen.h"
#include "monitor/tui/store_poller.h"
#include "monitor/tui/terminal.h"

namespace kiln::tui {
namespace {

// getch waits at most this long, so the screen redraws at most 10 times a second.
constexpr int kTickMs = 100;
// A store that changes on every step is re-read at most this often.
constexpr double kMinReloadS = 0.25;
// Ages and durations on screen advance once a second even when the store is quiet.
constexpr double kClockS = 1.0;
// A message wraps over at most this many rows; what is left of a longer one is cut.
constexpr size_t kMaxMessageRows = 3;

class App {
 public:
  App(std::unique_ptr<store::Database> store, const AppOptions& options)
      : terminal_(kTickMs),
        session_(std::move(store), Theme(colour_wanted(options.mono)), options.check_setting),
        poller_(session_.reader()) {
    stack_.push_back(make_runs_screen(options.launch));
  }

  void run() {
    while (!Terminal::interrupted() && !stack_.empty()) {
      const double now = store::unix_now();
      session_.launcher().reap();
      reload_if_due(now);
      if (now - last_clock_ >= kClockS) {
        last_clock_ = now;
        dirty_ = true;
      }
      if (dirty_) draw(now);
      const int ch = getch();
      if (ch == ERR) continue;
      dirty_ = true;
      if (ch == KEY_RESIZE) continue;
      if (help_) {
        help_ = false;
        continue;
      }
      handle(ch);
    }
  }

 private:
  Screen& top() { return *stack_.back(); }

  void reload_if_due(double now) {
    if (!must_load_ && now - last_load_ < kMinReloadS) return;
    if (!poller_.changed() && !must_load_) return;
    last_load_ = now;
    must_load_ = false;
    dirty_ = true;
    guarded([&] { top().load(session_); });
  }

  void draw(double now) {
    erase();
    // The bottom rows: an open question, else a fresh message, else the key bar; the
    // screen draws above them.
    const Prompt* prompt = top().prompt();
    std::vector<std::string> message;
    if (!prompt) message = wrap(session_.message(now), COLS);
    if (message.size() > kMaxMessageRows) message.resize(kMaxMessageRows);
    const int bottom = prompt ? prompt->rows(COLS) : std::max(1, static_cast<int>(message.size()));
    const int body = LINES - bottom;
    top().draw(session_, body);
    if (prompt) {
      prompt->draw(body, session_.theme());
    } else if (!message.empty()) {
      draw_message(body, message, session_.message_tone(), session_.theme());
    } else {
      draw_key_bar(body, top().hints(), session_.theme());
    }
    if (help_) draw_help(top().title(), top().help(), session_.theme());
    // erase + one refresh: curses sends only the cells that changed, so nothing flickers.
    refresh();
    dirty_ = false;
  }

  void handle(int ch) {
    Outcome outcome;
    guarded([&] { outcome = top().key(ch, session_); });
    switch (outcome.kind) {
      case Outcome::Kind::Handled: return;
      case Outcome::Kind::Ignored:
        if (ch == '?') help_ = true;
        else if (ch == 'q' || ch == kEscapeKey) pop();
        return;
      case Outcome::Kind::Back: pop(); return;
      case Outcome::Kind::Quit: stack_.clear(); return;
      case Outcome::Kind::Replace:
      case Outcome::Kind::Push:
        if (outcome.kind == Outcome::Kind::Replace) stack_.pop_back();
        stack_.push_back(std::move(outcome.next));
        must_load_ = true;
        return;
    }
  }

  void pop() {
    stack_.pop_back();
    must_load_ = true;
  }

  // An error while reading or acting (a busy store, a run removed meanwhile, a file that
  // cannot be read) goes to the message line; the UI stays up.
  template <typename F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      session_.flash(e.what(), Tone::Bad);
    }
  }

  Terminal terminal_;
  Session session_;
  StorePoller poller_;
  std::vector<std::unique_ptr<Screen>> stack_;
  bool dirty_ = true, help_ = false, must_load_ = true;
  double last_load_ = 0, last_clock_ = 0;
};

}  // namespace

void run_app(std::unique_ptr<store::Database> store, const AppOptions& options) {
  App(std::move(store), options).run();
}

}  // namespace kiln::tui
