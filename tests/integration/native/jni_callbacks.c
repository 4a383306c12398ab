// The native side of JniCallbacks.java: qsort_r with a comparator that calls the Java one, and a
// native thread, attached to the VM, that calls Java in a loop (a library's callback thread).
#define _GNU_SOURCE
#include <jni.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct Callback {
    JNIEnv* env;
    jobject comparator;
    jmethodID compare;
};

static int compare(const void* a, const void* b, void* arg) {
    const struct Callback* c = arg;
    return (*c->env)->CallIntMethod(c->env, c->comparator, c->compare, *(const jint*)a, *(const jint*)b);
}

JNIEXPORT jlong JNICALL Java_JniCallbacks_sortWith(JNIEnv* env, jclass cls, jintArray values, jobject comparator) {
    (void)cls;
    const jsize n = (*env)->GetArrayLength(env, values);
    jint* copy = malloc(sizeof(jint) * (size_t)(n > 0 ? n : 1));
    if (copy == NULL) return 0;
    (*env)->GetIntArrayRegion(env, values, 0, n, copy);
    struct Callback c = {env, comparator,
                         (*env)->GetMethodID(env, (*env)->GetObjectClass(env, comparator), "compare", "(II)I")};
    qsort_r(copy, (size_t)n, sizeof(jint), compare, &c);
    (*env)->SetIntArrayRegion(env, values, 0, n, copy);
    const jlong first = n > 0 ? copy[0] : 0;
    free(copy);
    return first;
}

static JavaVM* callback_vm;
static jclass callback_class;
static jint callback_seconds;

__attribute__((noinline)) static void callback_loop(JNIEnv* env, jmethodID tick) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    jint round = 0;
    do {
        (*env)->CallStaticVoidMethod(env, callback_class, tick, round++);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < callback_seconds);
}

static void* callback_thread(void* arg) {
    (void)arg;
    JNIEnv* env = NULL;
    JavaVMAttachArgs attach = {JNI_VERSION_1_8, "native-callbacks", NULL};
    if ((*callback_vm)->AttachCurrentThread(callback_vm, (void**)&env, &attach) != JNI_OK) return NULL;
    callback_loop(env, (*env)->GetStaticMethodID(env, callback_class, "tick", "(I)V"));
    (*callback_vm)->DetachCurrentThread(callback_vm);
    return NULL;
}

JNIEXPORT void JNICALL Java_JniCallbacks_startCallbackThread(JNIEnv* env, jclass cls, jint seconds) {
    (*env)->GetJavaVM(env, &callback_vm);
    callback_class = (*env)->NewGlobalRef(env, cls);
    callback_seconds = seconds;
    pthread_t thread;
    if (pthread_create(&thread, NULL, callback_thread, NULL) == 0) pthread_detach(thread);
}
