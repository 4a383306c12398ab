// The agent runtime behind Agent_OnLoad / Agent_OnAttach / Agent_OnUnload: parses the options,
// owns the JVMTI callbacks, registers every Java thread with the sampler (and the oracle), and
// shuts everything down in bounded time at VMDeath.
#pragma once

#include <jni.h>

namespace sf::agent {

// `attach`: loaded into a running VM (live phase) rather than at start-up. JNI_ERR only for
// option errors (printed to stderr); any later failure is logged and the JVM runs on unsampled.
jint agent_load(JavaVM* vm, const char* options, bool attach);
void agent_unload();

}  // namespace sf::agent
