// `rocmforge env [--markdown]`: the ROCMFORGE_* environment switches
// (core/env.h) with their values in this environment, checked as at
// start-up; with --markdown the docs table (docs/ENVIRONMENT.md holds it).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/env.h"
#include "core/error.h"

namespace rf::cli {
namespace {

void run_env(bool markdown) {
  if (markdown) {
    std::fputs(env_markdown().c_str(), stdout);
    return;
  }
  (void)env();  // a bad value is an error here, as at every start-up
  for (const EnvSwitch& s : env_switches()) {
    const char* v = env_raw(s);
    std::printf("%-22s %s\n", s.name, v && *v ? v : str("(unset: ", s.fallback, ")").c_str());
  }
}

void add_env_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("env", "The ROCMFORGE_* environment switches and their values here");
  auto markdown = std::make_shared<bool>(false);
  cmd->add_flag("--markdown", *markdown, "Print the switch table as markdown (docs/ENVIRONMENT.md)");
  cmd->callback([markdown] { run_env(*markdown); });
}

RF_REGISTER_COMMAND(90, add_env_command);

}  // namespace
}  // namespace rf::cli
