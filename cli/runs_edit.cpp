// kiln runs tag | note | rm: the edits a user makes to a run's record.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/runs_command.h"
#include "cli/runs_store.h"
#include "base/check.h"
#include "base/terminal_text.h"
#include "monitor/format/figures.h"
#include "store/run_figures.h"
#include "store/run_queries.h"

namespace kiln {
namespace {

struct TagOptions {
  std::string store;
  std::string run;
  std::vector<std::string> tags;
  bool remove = false;
};

struct NoteOptions {
  std::string store;
  std::string run;
  std::string text;
};

struct RemoveOptions {
  std::string store;
  std::vector<std::string> runs;
  bool force = false;
};

void runs_tag(const TagOptions& options) {
  // Checked before the store is opened for writing, so a bad tag changes nothing.
  if (std::ranges::any_of(options.tags, [](const std::string& t) { return t.empty(); }))
    fail("tag: a tag cannot be empty");
  const auto db = open_store_for_writing(options.store);
  const int64_t id = store::resolve_run(*db, options.run);
  if (options.remove)
    store::remove_tags(*db, id, options.tags);
  else
    store::add_tags(*db, id, options.tags);
  const store::RunRecord run = store::get_run(*db, id);
  fmt::print("run {} ({}) tags: {}\n", run.id, terminal_line(run.name),
             run.tags.empty() ? "(none)" : terminal_line(join(run.tags, ", ")));
}

void runs_note(const NoteOptions& options) {
  const auto db = open_store_for_writing(options.store);
  const int64_t id = store::resolve_run(*db, options.run);
  store::set_notes(*db, id, options.text);
  const store::RunRecord run = store::get_run(*db, id);
  fmt::print("run {} ({}) notes {}\n", run.id, terminal_line(run.name),
             options.text.empty() ? "cleared" : "set");
}

void runs_rm(const RemoveOptions& options) {
  const auto db = open_store_for_writing(options.store);
  // Every run is resolved and checked before the first is removed: `rm a b` with a typo in
  // b, or b still live, removes nothing.
  std::vector<store::RunRecord> runs;
  for (const auto& typed : options.runs) {
    const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, typed));
    if (std::ranges::any_of(runs, [&](const store::RunRecord& r) { return r.id == run.id; }))
      continue;
    if (store::is_live(run.status) && !options.force)
      fail(fmt::format("rm: run {} ({}) is {}; stop it first (kiln runs stop {}), or remove it "
                       "anyway with --force",
                       run.id, run.name, store::to_string(run.status), run.id));
    runs.push_back(run);
  }
  for (const auto& run : runs) {
    store::remove_run(*db, run.id, options.force);
    fmt::print("removed run {} ({})\n", run.id, run.name);
  }
}

}  // namespace

void add_runs_edit_commands(CLI::App& runs) {
  const char* run_help = "Run id, name, or unambiguous name prefix";

  auto tag = std::make_shared<TagOptions>();
  CLI::App* tag_cmd = runs.add_subcommand("tag", "Add tags to a run (or remove them)");
  tag_cmd->add_option("run", tag->run, run_help)->required();
  tag_cmd->add_option("tags", tag->tags, "Tags to add")->required();
  add_store_option(tag_cmd, tag->store);
  tag_cmd->add_flag("--remove", tag->remove, "Remove these tags instead");
  tag_cmd->callback([tag] { runs_tag(*tag); });

  auto note = std::make_shared<NoteOptions>();
  CLI::App* note_cmd = runs.add_subcommand("note", "Set a run's notes (an empty text clears them)");
  note_cmd->add_option("run", note->run, run_help)->required();
  note_cmd->add_option("text", note->text, "The notes, quoted as one argument")->required();
  add_store_option(note_cmd, note->store);
  note_cmd->callback([note] { runs_note(*note); });

  auto rm = std::make_shared<RemoveOptions>();
  CLI::App* rm_cmd =
      runs.add_subcommand("rm", "Delete runs and all their rows from the store");
  rm_cmd->add_option("runs", rm->runs, "Runs to delete (id, name, or name prefix)")->required();
  add_store_option(rm_cmd, rm->store);
  rm_cmd->add_flag("--force", rm->force, "Also delete runs that are still running or paused");
  rm_cmd->callback([rm] { runs_rm(*rm); });
}

}  // namespace kiln
