// Event bodies as bytes: the field order of every event type, shared by sizing, encoding and
// decoding so that the three cannot drift apart (docs/recording-format.md, "Event bodies").
#pragma once

#include <cstddef>
#include <cstdint>

#include "stackfrag/events/events.hpp"

namespace sf::event_codec {

bool is_known_kind(uint8_t kind);

// Exact size of the body encode_body() writes for `event`.
size_t body_size(const Event& event);

// Writes exactly body_size(event) bytes at `out`; never allocates.
void encode_body(const Event& event, uint8_t* out);

// Parses the body of an event of a known kind into `out`. Bytes after the fields this version
// knows are ignored (fields are only ever appended). Returns nullptr on success, otherwise what
// was wrong. May throw std::bad_alloc: only offline readers decode.
const char* decode_body(EventKind kind, const uint8_t* body, size_t size, Event& out);

// How many members of T its field list visits: a test compares this with the members T has, so
// that a field added to events.hpp cannot silently go unrecorded. Instantiated for every event
// type and every struct nested in one.
template <class T>
size_t field_count();

}  // namespace sf::event_codec
