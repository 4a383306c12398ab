#include "auto_stack.hpp"

#include <variant>

#include "log.hpp"
#include "sampler.hpp"

namespace sf::agent {

AutoStack::AutoStack(StackControllerSettings settings, Sampler& sampler) : controller_(settings), sampler_(sampler) {}

void AutoStack::on_trace(const Event& event, const CallTrace& trace) {
    const auto* sample = std::get_if<Sample>(&event);
    if (sample == nullptr || sample->source == SampleSource::kSignal) return;
    const std::optional<StackChange> change = controller_.on_sample(sample->tid, trace.status, sample->stack.size());
    if (!change) return;
    (change->new_bytes > change->old_bytes ? grown_ : shrunk_)++;
    sampler_.request_stack(static_cast<pid_t>(change->tid), change->new_bytes);
    SF_LOG_DEBUG("stack=auto: thread %u fragment %u -> %u bytes (%s)", change->tid, change->old_bytes,
                 change->new_bytes, change->why);
}

}  // namespace sf::agent
