// The agent's side of `stackfrag attach`: jcmd shows nothing an agent prints, so the answer to an
// attach command goes to a reply file the CLI created beforehand (docs/usage.md, "Attach protocol").
#pragma once

#include <string>
#include <string_view>

namespace sf::agent {

// The value of the first "reply=" item of an option text, found without parsing the rest, so that
// even an option error can be answered. Empty when there is none.
std::string find_reply_path(std::string_view options_text);

// Appends `text` (lines) and the final line "ok" or "error: <error>" to the reply file. The file
// must exist, be a regular file of this user and not a symlink: the agent never creates one.
// Returns false (and logs why) when it cannot be written. An empty path only logs.
bool write_reply(const std::string& path, const std::string& text, bool ok, const std::string& error = {});

// Keeps the library mapped for the life of the process: a later attach whose Agent_OnAttach fails
// makes the JVM dlclose it, and our threads still run its code.
void pin_library();

}  // namespace sf::agent
