// Subcommands of the `rocmforge` CLI. Each cmd_<name>.cpp owns one command
// and registers it with RF_REGISTER_COMMAND; main() adds them in `order`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace rf::cli {

struct CommandEntry {
  int order;  // position in --help
  std::function<void(CLI::App&)> add;
};

std::vector<CommandEntry>& command_table();

struct CommandRegistrar {
  CommandRegistrar(int order, std::function<void(CLI::App&)> add) {
    command_table().push_back({order, std::move(add)});
  }
};

}  // namespace rf::cli

#define RF_REGISTER_COMMAND(order, fn) \
  static ::rf::cli::CommandRegistrar rf_cmd_registrar_##fn(order, fn)
