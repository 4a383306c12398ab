// The stackfrag subcommands: each registers itself on the CLI11 app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

namespace sf::cli {

// Each returns the process exit code through `exit_code` once the subcommand has run.
void add_dump(CLI::App& app, int& exit_code);
void add_replay(CLI::App& app, int& exit_code);
void add_report(CLI::App& app, int& exit_code);
void add_capture(CLI::App& app, int& exit_code);
void add_diff(CLI::App& app, int& exit_code);
void add_query(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_attach(CLI::App& app, int& exit_code);

}  // namespace sf::cli
