#include "stream_writer.hpp"

#include "log.hpp"

namespace sf::agent {

std::string StreamCounts::describe() const {
    std::string out;
    for (size_t kind = 0; kind < by_kind.size(); ++kind) {
        if (by_kind[kind] == 0) continue;
        if (!out.empty()) out += ' ';
        out += kind_name(static_cast<EventKind>(kind));
        out += '=';
        out += std::to_string(by_kind[kind]);
    }
    return out.empty() ? std::string("none") : out;
}

StreamWriter::StreamWriter(std::unique_ptr<RecordingWriter> recording)
    : recording_(std::move(recording)) {}

void StreamWriter::write(Event&& event) {
    count_and_store(event);
    if (tap_ != nullptr) tap_->observe(std::move(event));
}

void StreamWriter::write_owned(std::unique_ptr<Event> event) {
    count_and_store(*event);
    if (tap_ != nullptr) tap_->observe_owned(std::move(event));
}

void StreamWriter::count_and_store(const Event& event) {
    const EventKind kind = kind_of(event);
    ++counts_.by_kind[static_cast<size_t>(kind)];
    if (const Lost* lost = std::get_if<Lost>(&event)) counts_.lost_samples += lost->count;
    if (const Oracle* oracle = std::get_if<Oracle>(&event); oracle && oracle->agct_status > 0) {
        ++counts_.oracle_traces_ok;
    }
    if (recording_ && !finished_) {
        if (failed_) {
            ++counts_.write_errors;
        } else if (Status written = recording_->write(event); !written.ok()) {
            // A full disk must not stop sampling or the JVM; the recording simply ends here.
            failed_ = true;
            ++counts_.write_errors;
            SF_LOG_ERROR("recording stopped: %s", written.error().describe().c_str());
        }
    }
}

void StreamWriter::finish() {
    if (!recording_ || finished_) return;
    finished_ = true;
    Status closed = recording_->close();
    if (!closed.ok()) SF_LOG_ERROR("closing the recording failed: %s", closed.error().describe().c_str());
}

}  // namespace sf::agent
