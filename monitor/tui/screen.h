// One view of the UI. The app keeps a stack of screens (runs -> run -> ...), re-reads the
// top one when the store changes, draws it, and hands it the keys it does not handle itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "monitor/tui/key_bar.h"
#include "monitor/tui/prompt.h"
#include "monitor/tui/session.h"

namespace kiln::tui {

class Screen;

// What a key did: nothing the app must act on (Handled), nothing at all (Ignored: the app
// applies q, Esc and ?), or a move between screens (Replace: the new screen takes this
// one's place, so going back skips it).
struct Outcome {
  enum class Kind { Handled, Ignored, Back, Quit, Push, Replace };
  Kind kind = Kind::Handled;
  std::unique_ptr<Screen> next;  // for Push

  static Outcome handled() { return {}; }
  static Outcome ignored() { return {Kind::Ignored, nullptr}; }
  static Outcome back() { return {Kind::Back, nullptr}; }
  static Outcome push(std::unique_ptr<Screen> screen) { return {Kind::Push, std::move(screen)}; }
  static Outcome replace(std::unique_ptr<Screen> screen) {
    return {Kind::Replace, std::move(screen)};
  }
};

class Screen {
 public:
  virtual ~Screen() = default;
  // Re-reads what the screen shows from the store.
  virtual void load(Session& session) = 0;
  // Draws rows 0 .. height-1 (the app draws the key bar below).
  virtual void draw(Session& session, int height) = 0;
  virtual Outcome key(int key, Session& session) = 0;
  // The key bar's hints, and the help overlay's longer list.
  virtual std::vector<KeyHint> hints() const = 0;
  virtual std::vector<KeyHint> help() const = 0;
  virtual std::string title() const = 0;
  // An open question takes the bottom row and every key.
  virtual const Prompt* prompt() const { return nullptr; }
};

}  // namespace kiln::tui
