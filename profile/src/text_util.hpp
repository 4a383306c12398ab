// String escaping shared by the json and html writers.
#pragma once

#include <string>
#include <string_view>

namespace sf::profile {

enum class QuoteFor : uint8_t {
    kJson,     // plain json
    kScript,   // json inside an html <script>: also no "</script", no "//" (so no url-looking text), no U+2028/9
};

// Appends `text` as a double-quoted string; bytes that are not valid UTF-8 become U+FFFD so every
// reader accepts the file.
void append_quoted(std::string& out, std::string_view text, QuoteFor target = QuoteFor::kJson);

// Escapes &, <, >, " for html text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace sf::profile
