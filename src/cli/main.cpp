// Entry point of `rocmforge`: checks the environment switches (core/env.h),
// adds the registered subcommands, dispatches, and turns errors into a
// one-line message and a non-zero exit code.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/env.h"
#include "core/error.h"

namespace rf::cli {
std::vector<CommandEntry>& command_table() {
  static std::vector<CommandEntry> table;
  return table;
}
}  // namespace rf::cli

int main(int argc, char** argv) {
  CLI::App app{"ROCmForge: LLM inference engine and OpenAI-compatible server"};
  app.require_subcommand(1);
  auto& table = rf::cli::command_table();
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  for (const auto& c : table) c.add(app);
  try {
    (void)rf::env();  // the environment switches, checked before anything runs
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
