/* JNI glue for org.edgepack.Session. No libc: every call goes through the JNIEnv function table,
 * copies use ep_memcpy, and all memory (context, plan, arena) is direct ByteBuffers Java allocated.
 * Java is trusted app code, but buffers are still checked (direct, large enough, aligned) so a
 * misuse returns an error instead of corrupting memory. Negative statuses are glue errors. */
#include <jni.h>
#include "edgepack.h"
#include "ep_kernel.h"
#include "ep_edge.h"

#define EP_JNI_E_BUFFER (-1)   /* a buffer is not direct, too small or misaligned */
#define EP_JNI_E_COUNT (-2)    /* wrong number of input/output buffers */
#define FN(name) JNICALL Java_org_edgepack_Session_##name

static uint8_t *buf(JNIEnv *env, jobject b, jlong *cap) {
  *cap = 0;
  if (!b) return 0;
  uint8_t *p = (uint8_t *)(*env)->GetDirectBufferAddress(env, b);
  *cap = (*env)->GetDirectBufferCapacity(env, b);
  return (p && *cap >= 0) ? p : 0;
}

/* The context buffer: big enough for an ep_ctx and aligned for it. */
static ep_ctx *ctx_of(JNIEnv *env, jobject b) {
  jlong cap;
  uint8_t *p = buf(env, b, &cap);
  if (!p || cap < (jlong)sizeof(ep_ctx) || ((uintptr_t)p % 16) != 0) return 0;
  return (ep_ctx *)(void *)p;
}

JNIEXPORT jint FN(nCtxBytes)(JNIEnv *env, jclass cls) { return (jint)sizeof(ep_ctx); }

JNIEXPORT jlong FN(nAddress)(JNIEnv *env, jclass cls, jobject b) {
  jlong cap;
  return (jlong)(uintptr_t)buf(env, b, &cap);
}

JNIEXPORT jint FN(nOpen)(JNIEnv *env, jclass cls, jobject ctxb, jobject planb) {
  ep_ctx *c = ctx_of(env, ctxb);
  jlong cap;
  uint8_t *plan = buf(env, planb, &cap);
  if (!c || !plan || cap > 0xffffffffll) return EP_JNI_E_BUFFER;
  return (jint)ep_open(c, plan, (uint32_t)cap);
}

JNIEXPORT jlong FN(nArenaBytes)(JNIEnv *env, jclass cls, jobject ctxb) {
  ep_ctx *c = ctx_of(env, ctxb);
  return c ? (jlong)ep_arena_bytes(c) : -1;
}

JNIEXPORT jint FN(nBind)(JNIEnv *env, jclass cls, jobject ctxb, jobject arenab) {
  ep_ctx *c = ctx_of(env, ctxb);
  jlong cap = 0;
  uint8_t *a = buf(env, arenab, &cap);
  if (!c || (!a && ep_arena_bytes(c))) return EP_JNI_E_BUFFER;
  return (jint)ep_bind(c, a, cap > 0xffffffffll ? 0xffffffffu : (uint32_t)cap);
}

/* Version 2 (shapes resolved at run time): the plan's version, its state (a direct buffer Java keeps alive),
 * an input's dims for the next run, a dim's bounds, resolve. The arena is bound again with nBind afterwards. */
JNIEXPORT jint FN(nPlanVersion)(JNIEnv *env, jclass cls, jobject ctxb) {
  ep_ctx *c = ctx_of(env, ctxb);
  return c ? (jint)ep_plan_version(c) : 0;
}

JNIEXPORT jlong FN(nStateBytes)(JNIEnv *env, jclass cls, jobject ctxb) {
  ep_ctx *c = ctx_of(env, ctxb);
  return c ? (jlong)ep_state_bytes(c) : -1;
}

JNIEXPORT jint FN(nSetState)(JNIEnv *env, jclass cls, jobject ctxb, jobject stateb) {
  ep_ctx *c = ctx_of(env, ctxb);
  jlong cap = 0;
  uint8_t *p = buf(env, stateb, &cap);
  if (!c || !p || cap > 0xffffffffll) return EP_JNI_E_BUFFER;
  return (jint)ep_set_state(c, p, (uint32_t)cap);
}

JNIEXPORT jint FN(nSetInputShape)(JNIEnv *env, jclass cls, jobject ctxb, jint i, jintArray dims) {
  ep_ctx *c = ctx_of(env, ctxb);
  if (!c || !dims || i < 0) return EP_JNI_E_BUFFER;
  const jsize rank = (*env)->GetArrayLength(env, dims);
  if (rank < 0 || rank > EP_MAX_RANK) return EP_E_INPUT;
  jint d[EP_MAX_RANK];
  int32_t d32[EP_MAX_RANK];
  (*env)->GetIntArrayRegion(env, dims, 0, rank, d);
  for (jsize k = 0; k < rank; k++) d32[k] = (int32_t)d[k];
  return (jint)ep_set_input_shape(c, (uint32_t)i, (uint32_t)rank, d32);
}

/* out[0] = least, out[1] = most extent (0: unbounded) of input i's dim k */
JNIEXPORT jint FN(nInputBound)(JNIEnv *env, jclass cls, jobject ctxb, jint i, jint k, jintArray out) {
  ep_ctx *c = ctx_of(env, ctxb);
  if (!c || !out || i < 0 || k < 0 || (*env)->GetArrayLength(env, out) < 2) return EP_JNI_E_BUFFER;
  int32_t lo = 0, hi = 0;
  ep_status s = ep_input_bound(c, (uint32_t)i, (uint32_t)k, &lo, &hi);
  if (s) return (jint)s;
  jint v[2] = {(jint)lo, (jint)hi};
  (*env)->SetIntArrayRegion(env, out, 0, 2, v);
  return 0;
}

JNIEXPORT jint FN(nResolve)(JNIEnv *env, jclass cls, jobject ctxb) {
  ep_ctx *c = ctx_of(env, ctxb);
  return c ? (jint)ep_resolve(c) : EP_JNI_E_BUFFER;
}

/* A direct buffer over value input i's place in the values region (written before ep_resolve); NULL for any other
 * input. Valid while the state is. */
JNIEXPORT jobject FN(nInputValues)(JNIEnv *env, jclass cls, jobject ctxb, jint i) {
  ep_ctx *c = ctx_of(env, ctxb);
  uint8_t *v = c && i >= 0 ? ep_input_values(c, (uint32_t)i) : 0;
  ep_tensor_info info;
  if (!v || ep_tensor_describe(c, (uint32_t)ep_input_id(c, (uint32_t)i), &info) != EP_OK) return 0;
  return (*env)->NewDirectByteBuffer(env, v, (jlong)info.nbytes);
}

JNIEXPORT jint FN(nNumIO)(JNIEnv *env, jclass cls, jobject ctxb, jboolean inputs) {
  ep_ctx *c = ctx_of(env, ctxb);
  if (!c) return 0;
  return (jint)(inputs ? ep_num_inputs(c) : ep_num_outputs(c));
}

/* out[0..12): tensor id, dtype, rank, nbytes, dims[8] */
JNIEXPORT jint FN(nDescribe)(JNIEnv *env, jclass cls, jobject ctxb, jboolean input, jint i, jintArray out) {
  ep_ctx *c = ctx_of(env, ctxb);
  if (!c || !out || (*env)->GetArrayLength(env, out) < 4 + EP_MAX_RANK || i < 0) return EP_JNI_E_BUFFER;
  int32_t id = input ? ep_input_id(c, (uint32_t)i) : ep_output_id(c, (uint32_t)i);
  if (id < 0) return EP_E_BOUNDS;
  ep_tensor_info info;
  ep_status s = ep_tensor_describe(c, (uint32_t)id, &info);
  if (s) return (jint)s;
  jint v[4 + EP_MAX_RANK];
  v[0] = id; v[1] = (jint)info.dtype; v[2] = (jint)info.rank; v[3] = (jint)info.nbytes;
  for (int k = 0; k < EP_MAX_RANK; k++) v[4 + k] = info.dims[k];
  (*env)->SetIntArrayRegion(env, out, 0, 4 + EP_MAX_RANK, v);
  return 0;
}

/* Copy tensor bytes between a direct buffer and the arena. to_arena: input; else output. */
static jint xfer(JNIEnv *env, ep_ctx *c, jobjectArray arr, uint32_t n, int to_arena) {
  for (uint32_t i = 0; i < n; i++) {
    int32_t id = to_arena ? ep_input_id(c, i) : ep_output_id(c, i);
    ep_tensor_info info;
    if (id < 0 || ep_tensor_describe(c, (uint32_t)id, &info) != EP_OK) return EP_E_BOUNDS;
    jobject b = (*env)->GetObjectArrayElement(env, arr, (jsize)i);
    jlong cap;
    uint8_t *p = buf(env, b, &cap);
    uint8_t *t = ep_tensor_data(c, (uint32_t)id);
    if (b) (*env)->DeleteLocalRef(env, b);
    if (!p || !t || cap < (jlong)info.nbytes) return EP_JNI_E_BUFFER;
    if (to_arena) ep_memcpy(t, p, info.nbytes);
    else ep_memcpy(p, t, info.nbytes);
  }
  return 0;
}

JNIEXPORT jint FN(nRun)(JNIEnv *env, jclass cls, jobject ctxb, jobjectArray ins, jobjectArray outs) {
  ep_ctx *c = ctx_of(env, ctxb);
  if (!c || !ins || !outs) return EP_JNI_E_BUFFER;
  if ((uint32_t)(*env)->GetArrayLength(env, ins) != ep_num_inputs(c) ||
      (uint32_t)(*env)->GetArrayLength(env, outs) != ep_num_outputs(c)) return EP_JNI_E_COUNT;
  jint s = xfer(env, c, ins, ep_num_inputs(c), 1);
  if (s) return s;
  s = (jint)ep_run(c);
  if (s) return s;
  return xfer(env, c, outs, ep_num_outputs(c), 0);
}

JNIEXPORT jstring FN(nStatusStr)(JNIEnv *env, jclass cls, jint s) {
  const char *m = s == EP_JNI_E_BUFFER ? "buffer not direct, too small or misaligned"
                : s == EP_JNI_E_COUNT ? "wrong number of input/output buffers"
                : ep_status_str((ep_status)s);
  return (*env)->NewStringUTF(env, m);
}

JNIEXPORT jstring FN(nVecName)(JNIEnv *env, jclass cls) { return (*env)->NewStringUTF(env, ep_vec_name()); }

JNIEXPORT jint FN(nCpuFeatures)(JNIEnv *env, jclass cls) { return (jint)ep_edge_cpu_features(); }

/* Threads: Java starts the workers (this library links no libc, so no pthreads); each enters the core's pool
 * and stays there, asleep between jobs. ep_worker_main ignores a bad or already running index. */
JNIEXPORT void FN(nWorkerMain)(JNIEnv *env, jclass cls, jint index) {
  if (index > 0) ep_worker_main((uint32_t)index);
}

JNIEXPORT jint FN(nSetThreads)(JNIEnv *env, jclass cls, jint n) { return (jint)ep_set_threads(n < 1 ? 1u : (uint32_t)n); }

JNIEXPORT jint FN(nThreadTasks)(JNIEnv *env, jclass cls, jint index) {
  return index < 0 ? 0 : (jint)ep_thread_tasks((uint32_t)index);
}
