// JVMTI entry points of libstackfrag.so.
#include <jvmti.h>

#include "agent_runtime.hpp"

extern "C" {

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM* vm, char* options, void*) {
    return sf::agent::agent_load(vm, options, false);
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM* vm, char* options, void*) {
    return sf::agent::agent_load(vm, options, true);
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM*) { sf::agent::agent_unload(); }

}
