#include "store/commands.h"

#include <string>

#include "store/error.h"
#include "store/rows.h"

namespace kiln::store {
namespace {

std::vector<Command> select_commands(Database& db, int64_t run_id, bool pending_only) {
  static const std::string all =
      std::string("SELECT ") + kCommandColumns + " FROM commands WHERE run_id = ? ORDER BY id";
  static const std::string pending = std::string("SELECT ") + kCommandColumns +
                                     " FROM commands WHERE run_id = ? AND status = 'pending' "
                                     "ORDER BY id";
  Statement& st = db.cached(pending_only ? pending : all);
  st.bind(1, run_id);
  std::vector<Command> commands;
  while (st.step()) commands.push_back(read_command(st));
  return commands;
}

std::string describe(const Command& c) {
  std::string text(to_string(c.action));
  if (!c.argument.empty()) text += " " + c.argument;
  return text;
}

}  // namespace

int64_t insert_command(Database& db, int64_t run_id, CommandAction action,
                       const std::string& argument, double stale_after_s) {
  if (action == CommandAction::Set && argument.find('=') == std::string::npos)
    fail("store: set needs key=value, e.g. train.lr=1e-4 (got '" + argument + "')");
  if (action != CommandAction::Set && !argument.empty())
    fail("store: " + std::string(to_string(action)) + " takes no argument (got '" + argument +
         "')");
  const RunRecord run = get_run(db, run_id, stale_after_s);
  if (run.status != RunStatus::Running && run.status != RunStatus::Paused)
    fail("store: run '" + run.name + "' is " + std::string(to_string(run.status)) +
         "; commands only reach a running or paused run");
  Statement& st =
      db.cached("INSERT INTO commands (run_id, created_at, action, argument) VALUES (?,?,?,?)");
  st.bind_all(run_id, unix_now(), to_string(action), argument);
  st.run();
  return db.last_insert_rowid();
}

std::vector<Command> pending_commands(Database& db, int64_t run_id) {
  return select_commands(db, run_id, true);
}

std::vector<Command> list_commands(Database& db, int64_t run_id) {
  return select_commands(db, run_id, false);
}

void mark_command(Database& db, int64_t command_id, CommandStatus status, int64_t step,
                  const std::string& reason) {
  if (status == CommandStatus::Pending)
    fail("store: a command is marked applied or rejected, not pending");
  Transaction tx(db);
  static const std::string select =
      std::string("SELECT ") + kCommandColumns + " FROM commands WHERE id = ?";
  Statement& find = db.cached(select);
  find.bind(1, command_id);
  if (!find.step()) fail("store: no command with id " + std::to_string(command_id));
  const Command command = read_command(find);
  find.reset();
  if (command.status != CommandStatus::Pending)
    fail("store: command " + std::to_string(command_id) + " (" + describe(command) +
         ") is already " + std::string(to_string(command.status)));

  const double now = unix_now();
  Statement& update = db.cached(
      "UPDATE commands SET status = ?, applied_step = ?, applied_at = ?, reason = ? WHERE id = ?");
  update.bind_all(to_string(status), step, now, reason, command_id);
  update.run();
  std::string message = describe(command) + " " + std::string(to_string(status)) + " at step " +
                        std::to_string(step);
  if (!reason.empty()) message += ": " + reason;
  insert_event(db, command.run_id,
               Event{0, now, step, std::string(event_kind::kCommand), message});
  tx.commit();
}

}  // namespace kiln::store
