#include "commands.hpp"

namespace sf::cli {

void add_dump(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("dump", "Print a recording's header and event counts");
    auto* path = new std::string;
    cmd->add_option("recording", *path, "recording file")->required();
    cmd->callback([&exit_code] { exit_code = 2; });
}

}  // namespace sf::cli
