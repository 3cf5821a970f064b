#include "store/types.h"

#include <array>
#include <chrono>
#include <string>
#include <utility>

#include "store/error.h"

namespace kiln::store {
namespace {

constexpr std::array<std::pair<RunStatus, std::string_view>, 8> kRunStatuses{{
    {RunStatus::Created, "created"},
    {RunStatus::Running, "running"},
    {RunStatus::Paused, "paused"},
    {RunStatus::Completed, "completed"},
    {RunStatus::Stopped, "stopped"},
    {RunStatus::Failed, "failed"},
    {RunStatus::Lost, "lost"},
    {RunStatus::Released, "released"},
}};

constexpr std::array<std::pair<CommandAction, std::string_view>, 6> kActions{{
    {CommandAction::Pause, "pause"},
    {CommandAction::Resume, "resume"},
    {CommandAction::Stop, "stop"},
    {CommandAction::Checkpoint, "checkpoint"},
    {CommandAction::Set, "set"},
    {CommandAction::Release, "release"},
}};

constexpr std::array<std::pair<CommandStatus, std::string_view>, 3> kCommandStatuses{{
    {CommandStatus::Pending, "pending"},
    {CommandStatus::Applied, "applied"},
    {CommandStatus::Rejected, "rejected"},
}};

template <typename Enum, size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& table,
                         Enum value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  return "?";
}

template <typename Enum, size_t N>
Enum parse(const std::array<std::pair<Enum, std::string_view>, N>& table, std::string_view text,
           std::string_view what) {
  std::string valid;
  for (const auto& [e, name] : table) {
    if (name == text) return e;
    valid += valid.empty() ? "" : ", ";
    valid += name;
  }
  fail("store: unknown " + std::string(what) + " '" + std::string(text) + "' (valid: " + valid +
       ")");
}

}  // namespace

double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string_view to_string(RunStatus status) { return name_of(kRunStatuses, status); }
RunStatus parse_run_status(std::string_view text) {
  return parse(kRunStatuses, text, "run status");
}
bool is_terminal(RunStatus status) {
  return status == RunStatus::Completed || status == RunStatus::Stopped ||
         status == RunStatus::Failed || status == RunStatus::Released;
}

std::string_view to_string(CommandAction action) { return name_of(kActions, action); }
CommandAction parse_command_action(std::string_view text) {
  return parse(kActions, text, "command");
}

std::string_view to_string(CommandStatus status) { return name_of(kCommandStatuses, status); }
CommandStatus parse_command_status(std::string_view text) {
  return parse(kCommandStatuses, text, "command status");
}

}  // namespace kiln::store
