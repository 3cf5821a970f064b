// kiln: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string_view>

#include "cli/data_command.h"
#include "cli/finetune_command.h"
#include "cli/generate_command.h"
#include "cli/interchange_command.h"
#include "cli/openmp_waiting.h"
#include "cli/parse_error.h"
#include "cli/plan_command.h"
#include "cli/runs_command.h"
#include "cli/serve_command.h"
#include "cli/sweep_command.h"
#include "cli/tokenizer_command.h"
#include "cli/train_command.h"
#include "cli/tui_command.h"
#include "cli/version.h"
#include "base/check.h"
#include "base/terminal_text.h"

int main(int argc, char** argv) {
  // kiln plan does no OpenMP work: it answers without the re-exec that tunes OpenMP's waits
  // (each start of the binary costs about 0.4 s of library initialisation here).
  if (argc < 2 || std::string_view(argv[1]) != "plan") kiln::exec_with_short_openmp_spins(argv);
  CLI::App app{"kiln: train transformer language models and watch them train"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln " KILN_VERSION " (commit " KILN_COMMIT ")");
  kiln::add_train_command(app, kiln::shell_command_line(argc, argv));
  kiln::add_data_command(app);
  kiln::add_tokenizer_commands(app);
  kiln::add_generate_commands(app);
  kiln::add_interchange_commands(app);
  kiln::add_finetune_command(app, kiln::shell_command_line(argc, argv));
  kiln::add_runs_command(app);
  kiln::add_plan_command(app);
  kiln::add_sweep_command(app, kiln::shell_command_line(argc, argv));
  kiln::add_serve_command(app);
  kiln::add_tui_command(app);
  // Every error line below may quote what it refused (a name, a setting) as it was given:
  // shown, never obeyed by the terminal.
  try {
    kiln::check_command_words(app, {argv + 1, argv + argc});
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit status (130 after Ctrl-C, ...)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // Every error is one line and exit status 1, the parser's as much as kiln's own.
    std::fprintf(stderr, "kiln: error: %s\n",
                 kiln::terminal_line(kiln::parse_error_line(e, {argv + 1, argv + argc})).c_str());
    return 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: error: %s\n", kiln::terminal_line(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", kiln::terminal_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
