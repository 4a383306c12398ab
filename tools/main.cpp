// stackfrag: offline tools over recordings and profiles.
#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
    CLI::App app{"stackfrag: a safepoint-free sampling profiler for the JVM"};
    app.require_subcommand(1);
    int exit_code = 0;
    sf::cli::add_dump(app, exit_code);
    sf::cli::add_replay(app, exit_code);
    sf::cli::add_report(app, exit_code);
    sf::cli::add_capture(app, exit_code);
    sf::cli::add_diff(app, exit_code);
    sf::cli::add_query(app, exit_code);
    sf::cli::add_run(app, exit_code);
    sf::cli::add_attach(app, exit_code);
    CLI11_PARSE(app, argc, argv);
    return exit_code;
}
