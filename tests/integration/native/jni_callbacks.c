// The native side of JniCallbacks.java: qsort_r with a comparator that calls the Java one.
#define _GNU_SOURCE
#include <jni.h>
#include <stdlib.h>

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
