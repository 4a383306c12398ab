// JVMTI entry points of libstackfrag.so.
#include <jvmti.h>

extern "C" {

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM*, char*, void*) { return JNI_OK; }
JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM*, char*, void*) { return JNI_OK; }
JNIEXPORT void JNICALL Agent_OnUnload(JavaVM*) {}

}
