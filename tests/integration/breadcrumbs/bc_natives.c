// JNI natives for agent_breadcrumbs_test: many arguments of every class, several passed on the
// stack, and a spin loop that neither libunwind nor the rbp chain can leave (built without unwind
// tables, and rbp holds the loop counter), so samples taken in it need breadcrumbs or a rescan.
// Built by the test with -fomit-frame-pointer -fno-asynchronous-unwind-tables -mno-red-zone
// -ffp-contract=off (the checksums must equal Java's bit for bit).
#include <jni.h>
#include <stdint.h>

volatile uint64_t bc_sink;

__attribute__((noinline)) static void spin(jint n) {
    uint64_t acc = 0;
    uint64_t count = (uint64_t)(n > 0 ? n : 1);
    __asm__ volatile(
        "push %%rbp\n\t"
        "mov %1, %%rbp\n\t"
        "1:\n\t"
        "add %%rbp, %0\n\t"
        "rol $7, %0\n\t"
        "dec %%rbp\n\t"
        "jnz 1b\n\t"
        "pop %%rbp\n\t"
        : "+r"(acc)
        : "r"(count)
        : "cc");
    bc_sink = acc;
}

JNIEXPORT jdouble JNICALL Java_BcNatives_mix(JNIEnv* env, jclass cls, jint i0, jdouble d0, jint i1, jdouble d1, jint i2,
                                             jdouble d2, jint i3, jdouble d3, jint i4, jdouble d4, jint i5, jdouble d5,
                                             jint i6, jdouble d6, jint i7, jdouble d7, jdouble d8, jlong l0, jdouble d9,
                                             jlong l1, jlong l2, jlong l3, jint work) {
    (void)env;
    (void)cls;
    spin(work);
    double s = 0;
    s = s * 3 + i0; s = s * 3 + d0; s = s * 3 + i1; s = s * 3 + d1; s = s * 3 + i2; s = s * 3 + d2;
    s = s * 3 + i3; s = s * 3 + d3; s = s * 3 + i4; s = s * 3 + d4; s = s * 3 + i5; s = s * 3 + d5;
    s = s * 3 + i6; s = s * 3 + d6; s = s * 3 + i7; s = s * 3 + d7; s = s * 3 + d8; s = s * 3 + (double)l0;
    s = s * 3 + d9; s = s * 3 + (double)l1; s = s * 3 + (double)l2; s = s * 3 + (double)l3;
    return s;
}

JNIEXPORT jlong JNICALL Java_BcNatives_many(JNIEnv* env, jobject self, jlong a0, jlong a1, jlong a2, jlong a3,
                                            jlong a4, jlong a5, jlong a6, jlong a7, jlong a8, jlong a9, jlong a10,
                                            jlong a11, jfloat f0, jfloat f1, jfloat f2, jfloat f3, jfloat f4,
                                            jfloat f5, jfloat f6, jfloat f7, jfloat f8, jfloat f9, jint work) {
    (void)env;
    (void)self;
    spin(work);
    const jlong a[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};
    const jfloat f[10] = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f9};
    jlong s = 0;
    for (int k = 0; k < 12; ++k) s = s * 31 + a[k];
    for (int k = 0; k < 10; ++k) s = s * 31 + (jlong)(f[k] * 4.0f);
    return s;
}

JNIEXPORT jfloat JNICALL Java_BcNatives_fsum(JNIEnv* env, jclass cls, jfloat f0, jfloat f1, jfloat f2, jfloat f3,
                                             jfloat f4, jfloat f5, jfloat f6, jfloat f7, jfloat f8, jfloat f9,
                                             jfloat f10, jint work) {
    (void)env;
    (void)cls;
    spin(work);
    float s = 0;
    s = s * 2 + f0; s = s * 2 + f1; s = s * 2 + f2; s = s * 2 + f3; s = s * 2 + f4; s = s * 2 + f5;
    s = s * 2 + f6; s = s * 2 + f7; s = s * 2 + f8; s = s * 2 + f9; s = s * 2 + f10;
    return s;
}

// Bound by RegisterNatives (JNI_OnLoad), not by name lookup: NativeMethodBind covers both.
static jint registered(JNIEnv* env, jclass cls, jint a, jint b, jint c, jint d, jint e, jint f, jint g, jint work) {
    (void)env;
    (void)cls;
    spin(work);
    return a - 2 * b + 3 * c - 4 * d + 5 * e - 6 * f + 7 * g;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
    (void)reserved;
    JNIEnv* env = NULL;
    if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    jclass cls = (*env)->FindClass(env, "BcNatives");
    if (cls == NULL) return JNI_ERR;
    JNINativeMethod methods[] = {{"registered", "(IIIIIIII)I", (void*)registered}};
    if ((*env)->RegisterNatives(env, cls, methods, 1) != 0) return JNI_ERR;
    return JNI_VERSION_1_8;
}
