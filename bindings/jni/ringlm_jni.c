/* libringlm-jni: the native half of the Java API (bindings/java, class dev.ringlm.NativeBridge).
 *
 * C99 over the public C ABI only. The no-allocation rules, and how this file keeps them:
 *  - No native heap: nothing here calls malloc/new; the library imports no allocator symbol
 *    (a CTest inspects the .so with nm). Model storage (rlm_model), session memory and the
 *    UTF-16 text scratch are direct ByteBuffers that Java allocated once; this file only takes
 *    their addresses (GetDirectBufferAddress, which creates nothing).
 *  - No Java objects on the step path except the returned text: step() writes the step's
 *    numbers into a caller-provided int[] (SetIntArrayRegion), decodes the UTF-8 text into the
 *    session's scratch and creates one String (NewString); an empty step returns null (no
 *    object). stepInto() copies the UTF-8 bytes into a caller-provided direct ByteBuffer and
 *    returns the length: no object at all. Objects are created only on error paths
 *    (exceptions), in JNI_OnLoad (cached class/method references), and in the documented
 *    fallback of step() for a text longer than the scratch (which the Java side sizes so that
 *    it cannot happen).
 *  - Calls are short: no JNI critical section is held across a call that could block, and no
 *    global or thread-local native state exists (the session handle is the rlm_session pointer
 *    held by the Java object). */
#include <jni.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ringlm/ringlm.h"

#ifdef RINGLM_JNI_GENERATED_HEADER
/* javac -h output: the compiler checks every definition below against the Java declarations. */
#include "dev_ringlm_NativeBridge.h"
#endif

#define FN(name) JNICALL Java_dev_ringlm_NativeBridge_##name

static jclass g_exception;        /* dev.ringlm.RingLmException (global ref) */
static jmethodID g_exception_ctor; /* (int code, String status, String message) */
static jclass g_string;           /* java.lang.String (global ref) */
static jmethodID g_string_ctor;   /* String(byte[], String charsetName): step() fallback only */
static jstring g_utf8;            /* "UTF-8" (global ref) */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  JNIEnv* env = NULL;
  jclass c;
  jstring utf8;
  (void)reserved;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  c = (*env)->FindClass(env, "dev/ringlm/RingLmException");
  if (!c) return JNI_ERR;
  g_exception = (jclass)(*env)->NewGlobalRef(env, c);
  g_exception_ctor =
      (*env)->GetMethodID(env, c, "<init>", "(ILjava/lang/String;Ljava/lang/String;)V");
  c = (*env)->FindClass(env, "java/lang/String");
  if (!c) return JNI_ERR;
  g_string = (jclass)(*env)->NewGlobalRef(env, c);
  g_string_ctor = (*env)->GetMethodID(env, c, "<init>", "([BLjava/lang/String;)V");
  utf8 = (*env)->NewStringUTF(env, "UTF-8");
  if (!g_exception || !g_exception_ctor || !g_string || !g_string_ctor || !utf8) return JNI_ERR;
  g_utf8 = (jstring)(*env)->NewGlobalRef(env, utf8);
  return JNI_VERSION_1_6;
}

/* NewStringUTF wants modified UTF-8: pass messages through as ASCII ('?' for other bytes). */
static jstring ascii_string(JNIEnv* env, const char* s) {
  char buf[512];
  size_t i = 0;
  for (; s && s[i] && i + 1 < sizeof buf; ++i) {
    const unsigned char ch = (unsigned char)s[i];
    buf[i] = (ch >= 0x20 && ch < 0x7f) || ch == '\n' || ch == '\t' ? (char)ch : '?';
  }
  buf[i] = '\0';
  return (*env)->NewStringUTF(env, buf);
}

static void throw_status(JNIEnv* env, rlm_status st, const char* message) {
  jstring name, msg;
  jobject e;
  if ((*env)->ExceptionCheck(env)) return; /* keep the first exception */
  name = ascii_string(env, rlm_status_string(st));
  msg = ascii_string(env, message ? message : "");
  if (!name || !msg) return; /* OutOfMemoryError pending */
  e = (*env)->NewObject(env, g_exception, g_exception_ctor, (jint)st, name, msg);
  if (e) (*env)->Throw(env, (jthrowable)e);
}

static rlm_session* as_session(jlong h) { return (rlm_session*)(intptr_t)h; }

/* Throws for a failed session call; returns non-zero when it threw. */
static int check_session(JNIEnv* env, rlm_session* s, rlm_status st) {
  if (st == RLM_OK) return 0;
  throw_status(env, st, s ? rlm_session_error(s) : "");
  return 1;
}

/* The address of [offset, offset + need) of a direct buffer, or NULL (and a pending exception). */
static void* direct_range(JNIEnv* env, jobject buf, jlong offset, jlong need, const char* what) {
  uint8_t* p;
  jlong cap;
  if (!buf) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, what);
    return NULL;
  }
  p = (uint8_t*)(*env)->GetDirectBufferAddress(env, buf);
  cap = (*env)->GetDirectBufferCapacity(env, buf);
  if (!p || cap < 0 || offset < 0 || need < 0 || offset > cap || need > cap - offset) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, what);
    return NULL;
  }
  return p + offset;
}

static const rlm_model* model_of(JNIEnv* env, jobject storage) {
  return (const rlm_model*)direct_range(env, storage, 0, (jlong)sizeof(rlm_model),
                                        "model storage: not a direct buffer of sizeof(rlm_model)");
}

static int read_config(JNIEnv* env, jintArray a, rlm_session_config* cfg) {
  jint v[12];
  if (!a || (*env)->GetArrayLength(env, a) != 12) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "session config: need int[12]");
    return 0;
  }
  (*env)->GetIntArrayRegion(env, a, 0, 12, v);
  rlm_session_config_default(cfg);
  cfg->n_ctx = (uint32_t)v[0];
  cfg->n_sink = (uint32_t)v[1];
  cfg->kv_dtype = v[2] == 2 ? RLM_KV_Q8 : v[2] == 1 ? RLM_KV_F16 : RLM_KV_F32;
  if (v[2] != 0 && v[2] != 1 && v[2] != 2) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT,
                 "session config: kv dtype must be 0 (f32), 1 (f16) or 2 (q8)");
    return 0;
  }
  cfg->n_threads = (uint32_t)v[3];
  cfg->n_batch = (uint32_t)v[4];
  cfg->max_pending = (uint32_t)v[5];
  cfg->max_text_bytes = (uint32_t)v[6];
  cfg->stop_string_bytes = (uint32_t)v[7];
  cfg->max_stop_strings = (uint32_t)v[8];
  cfg->max_stop_tokens = (uint32_t)v[9];
  cfg->penalty_window = (uint32_t)v[10];
  cfg->max_logit_bias = (uint32_t)v[11];
  return 1;
}

JNIEXPORT jstring FN(statusString)(JNIEnv* env, jclass cls, jint code) {
  (void)cls;
  return ascii_string(env, rlm_status_string((rlm_status)code));
}

JNIEXPORT jlong FN(address)(JNIEnv* env, jclass cls, jobject buf) {
  void* p;
  (void)cls;
  if (!buf) return -1;
  p = (*env)->GetDirectBufferAddress(env, buf);
  return p ? (jlong)(intptr_t)p : -1;
}

JNIEXPORT jint FN(modelStorageBytes)(JNIEnv* env, jclass cls) {
  (void)env;
  (void)cls;
  return (jint)sizeof(rlm_model);
}

JNIEXPORT void FN(modelOpen)(JNIEnv* env, jclass cls, jobject bytes, jlong size, jobject storage) {
  const void* p;
  rlm_model* m;
  rlm_status st;
  (void)cls;
  p = direct_range(env, bytes, 0, size, "model bytes: not a direct buffer of that size");
  if (!p) return;
  m = (rlm_model*)direct_range(env, storage, 0, (jlong)sizeof(rlm_model), "model storage");
  if (!m) return;
  st = rlm_model_open(p, (size_t)size, m);
  if (st != RLM_OK) throw_status(env, st, rlm_model_error(m));
}

JNIEXPORT void FN(modelInfo)(JNIEnv* env, jclass cls, jobject storage, jlongArray out) {
  const rlm_model* m = model_of(env, storage);
  rlm_model_info info;
  rlm_status st;
  jlong v[12];
  (void)cls;
  if (!m) return;
  rlm_model_info_default(&info);
  st = rlm_model_get_info(m, &info);
  if (st != RLM_OK) {
    throw_status(env, st, "");
    return;
  }
  v[0] = info.n_layers;
  v[1] = info.dim;
  v[2] = info.n_heads;
  v[3] = info.n_kv_heads;
  v[4] = info.head_dim;
  v[5] = info.ffn_dim;
  v[6] = info.vocab_size;
  v[7] = info.max_context;
  v[8] = info.bos_id;
  v[9] = info.eos_id;
  v[10] = info.n_tensors;
  v[11] = (jlong)info.weight_bytes;
  (*env)->SetLongArrayRegion(env, out, 0, 12, v);
}

JNIEXPORT void FN(configDefaults)(JNIEnv* env, jclass cls, jintArray out) {
  rlm_session_config c;
  jint v[12];
  (void)cls;
  rlm_session_config_default(&c);
  v[0] = (jint)c.n_ctx;
  v[1] = (jint)c.n_sink;
  v[2] = (jint)c.kv_dtype;
  v[3] = (jint)c.n_threads;
  v[4] = (jint)c.n_batch;
  v[5] = (jint)c.max_pending;
  v[6] = (jint)c.max_text_bytes;
  v[7] = (jint)c.stop_string_bytes;
  v[8] = (jint)c.max_stop_strings;
  v[9] = (jint)c.max_stop_tokens;
  v[10] = (jint)c.penalty_window;
  v[11] = (jint)c.max_logit_bias;
  (*env)->SetIntArrayRegion(env, out, 0, 12, v);
}

JNIEXPORT void FN(samplingDefaults)(JNIEnv* env, jclass cls, jfloatArray f, jintArray i,
                                    jlongArray seed) {
  rlm_sampling s;
  jfloat fv[6];
  jint iv[2];
  jlong sv;
  (void)cls;
  rlm_sampling_default(&s);
  fv[0] = s.temperature;
  fv[1] = s.top_p;
  fv[2] = s.min_p;
  fv[3] = s.repeat_penalty;
  fv[4] = s.frequency_penalty;
  fv[5] = s.presence_penalty;
  iv[0] = s.top_k;
  iv[1] = s.penalty_last_n;
  sv = (jlong)s.seed;
  (*env)->SetFloatArrayRegion(env, f, 0, 6, fv);
  (*env)->SetIntArrayRegion(env, i, 0, 2, iv);
  (*env)->SetLongArrayRegion(env, seed, 0, 1, &sv);
}

JNIEXPORT jlong FN(sessionMemory)(JNIEnv* env, jclass cls, jobject storage, jintArray config,
                                  jlongArray alignment) {
  const rlm_model* m = model_of(env, storage);
  rlm_session_config cfg;
  size_t bytes = 0, align = 0;
  rlm_status st;
  jlong a;
  (void)cls;
  if (!m || !read_config(env, config, &cfg)) return 0;
  st = rlm_session_memory(m, &cfg, &bytes, &align);
  if (st != RLM_OK) {
    throw_status(env, st, "rlm_session_memory");
    return 0;
  }
  a = (jlong)align;
  (*env)->SetLongArrayRegion(env, alignment, 0, 1, &a);
  return (jlong)bytes;
}

JNIEXPORT jlong FN(sessionInit)(JNIEnv* env, jclass cls, jobject storage, jintArray config,
                                jobject memory, jlong size) {
  const rlm_model* m = model_of(env, storage);
  rlm_session_config cfg;
  rlm_session* s = NULL;
  void* mem;
  rlm_status st;
  (void)cls;
  if (!m || !read_config(env, config, &cfg)) return 0;
  mem = direct_range(env, memory, 0, size, "session memory: not a direct buffer of that size");
  if (!mem) return 0;
  st = rlm_session_init(m, &cfg, mem, (size_t)size, &s);
  if (st != RLM_OK) {
    throw_status(env, st, "rlm_session_init");
    return 0;
  }
  return (jlong)(intptr_t)s;
}

JNIEXPORT void FN(sessionRelease)(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  check_session(env, NULL, rlm_session_release(as_session(h)));
}

JNIEXPORT void FN(sessionReset)(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  check_session(env, as_session(h), rlm_session_reset(as_session(h)));
}

/* rlm_session_cancel: the one call that may come from another thread while this session runs. */
JNIEXPORT void FN(cancel)(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  check_session(env, as_session(h), rlm_session_cancel(as_session(h)));
}

/* Feeding copies/tokenizes the text inside the runtime; the array is pinned (not copied on
 * HotSpot/ART for primitive arrays) only for the duration of the call. */
JNIEXPORT void FN(feedText)(JNIEnv* env, jclass cls, jlong h, jbyteArray utf8, jint off,
                            jint len, jint flags) {
  rlm_session* s = as_session(h);
  jbyte* p;
  rlm_status st;
  (void)cls;
  if (!utf8 || off < 0 || len < 0 || off > (*env)->GetArrayLength(env, utf8) - len) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "feed: bad array range");
    return;
  }
  p = (jbyte*)(*env)->GetPrimitiveArrayCritical(env, utf8, NULL);
  if (!p) return;
  st = rlm_session_feed_text_ex(s, (const char*)p + off, (size_t)len, (uint32_t)flags);
  (*env)->ReleasePrimitiveArrayCritical(env, utf8, p, JNI_ABORT);
  check_session(env, s, st);
}

JNIEXPORT void FN(feedDirect)(JNIEnv* env, jclass cls, jlong h, jobject utf8, jint off,
                              jint len, jint flags) {
  rlm_session* s = as_session(h);
  const char* p;
  (void)cls;
  p = (const char*)direct_range(env, utf8, off, len, "feed: not a direct buffer range");
  if (!p) return;
  check_session(env, s, rlm_session_feed_text_ex(s, p, (size_t)len, (uint32_t)flags));
}

JNIEXPORT void FN(feedTokens)(JNIEnv* env, jclass cls, jlong h, jintArray tokens, jint off,
                              jint len) {
  rlm_session* s = as_session(h);
  jint* p;
  rlm_status st;
  (void)cls;
  if (!tokens || off < 0 || len < 0 || off > (*env)->GetArrayLength(env, tokens) - len) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "feedTokens: bad array range");
    return;
  }
  p = (jint*)(*env)->GetPrimitiveArrayCritical(env, tokens, NULL);
  if (!p) return;
  st = rlm_session_feed_tokens(s, (const int32_t*)p + off, (size_t)len);
  (*env)->ReleasePrimitiveArrayCritical(env, tokens, p, JNI_ABORT);
  check_session(env, s, st);
}

JNIEXPORT void FN(setSampling)(JNIEnv* env, jclass cls, jlong h, jfloatArray f, jintArray i,
                               jlong seed) {
  rlm_session* s = as_session(h);
  rlm_sampling sp;
  jfloat fv[6];
  jint iv[2];
  (void)cls;
  if (!f || !i || (*env)->GetArrayLength(env, f) != 6 || (*env)->GetArrayLength(env, i) != 2) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "sampling: need float[6], int[2]");
    return;
  }
  (*env)->GetFloatArrayRegion(env, f, 0, 6, fv);
  (*env)->GetIntArrayRegion(env, i, 0, 2, iv);
  rlm_sampling_default(&sp);
  sp.temperature = fv[0];
  sp.top_p = fv[1];
  sp.min_p = fv[2];
  sp.repeat_penalty = fv[3];
  sp.frequency_penalty = fv[4];
  sp.presence_penalty = fv[5];
  sp.top_k = iv[0];
  sp.penalty_last_n = iv[1];
  sp.seed = (uint64_t)seed;
  check_session(env, s, rlm_session_set_sampling(s, &sp));
}

JNIEXPORT void FN(addStopString)(JNIEnv* env, jclass cls, jlong h, jbyteArray utf8, jint off,
                                 jint len) {
  rlm_session* s = as_session(h);
  jbyte* p;
  rlm_status st;
  (void)cls;
  if (!utf8 || off < 0 || len < 0 || off > (*env)->GetArrayLength(env, utf8) - len) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "stop string: bad array range");
    return;
  }
  p = (jbyte*)(*env)->GetPrimitiveArrayCritical(env, utf8, NULL);
  if (!p) return;
  st = rlm_session_add_stop_string(s, (const char*)p + off, (size_t)len);
  (*env)->ReleasePrimitiveArrayCritical(env, utf8, p, JNI_ABORT);
  check_session(env, s, st);
}

JNIEXPORT void FN(addStopToken)(JNIEnv* env, jclass cls, jlong h, jint token) {
  (void)cls;
  check_session(env, as_session(h), rlm_session_add_stop_token(as_session(h), token));
}

JNIEXPORT void FN(clearStops)(JNIEnv* env, jclass cls, jlong h) {
  (void)cls;
  check_session(env, as_session(h), rlm_session_clear_stops(as_session(h)));
}

JNIEXPORT void FN(setMaxTokens)(JNIEnv* env, jclass cls, jlong h, jint n) {
  (void)cls;
  if (n < 0) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "maxTokens < 0");
    return;
  }
  check_session(env, as_session(h), rlm_session_set_max_tokens(as_session(h), (uint32_t)n));
}

JNIEXPORT void FN(setIgnoreEos)(JNIEnv* env, jclass cls, jlong h, jboolean ignore) {
  (void)cls;
  check_session(env, as_session(h), rlm_session_set_ignore_eos(as_session(h), ignore ? 1 : 0));
}

JNIEXPORT jint FN(position)(JNIEnv* env, jclass cls, jlong h) {
  (void)env;
  (void)cls;
  return (jint)rlm_session_position(as_session(h));
}

JNIEXPORT void FN(rewind)(JNIEnv* env, jclass cls, jlong h, jint position) {
  (void)cls;
  if (position < 0) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "rewind: position < 0");
    return;
  }
  check_session(env, as_session(h), rlm_session_rewind(as_session(h), (uint32_t)position));
}

/* One rlm_step; the numbers go to info[] (no objects). Returns RLM_OK or throws. */
static rlm_status do_step(JNIEnv* env, jlong h, jintArray info, rlm_step_result* r) {
  rlm_session* s = as_session(h);
  rlm_status st;
  jint v[5];
  if (!info || (*env)->GetArrayLength(env, info) < 5) {
    throw_status(env, RLM_ERR_INVALID_ARGUMENT, "step: need int[5]");
    return RLM_ERR_INVALID_ARGUMENT;
  }
  rlm_step_result_default(r);
  st = rlm_step(s, r);
  if (check_session(env, s, st)) return st;
  v[0] = r->token;
  v[1] = (jint)r->position;
  v[2] = (jint)r->stop;
  v[3] = (jint)r->n_evaluated;
  v[4] = (jint)r->text_len;
  (*env)->SetIntArrayRegion(env, info, 0, 5, v);
  return RLM_OK;
}

/* Well-formed UTF-8 (the runtime releases nothing else; anything ill-formed becomes U+FFFD) to
 * UTF-16. Writes at most len units: every input byte yields at most one unit. */
static size_t utf8_to_utf16(const unsigned char* s, size_t len, jchar* out) {
  size_t i = 0, n = 0;
  while (i < len) {
    const unsigned c = s[i];
    uint32_t cp = 0xFFFD;
    size_t k = 1, need = 0, j;
    if (c < 0x80) {
      cp = c;
    } else if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      cp = c & 0x07;
    }
    if (need) {
      for (j = 1; j <= need; ++j) {
        if (i + j >= len || (s[i + j] & 0xC0) != 0x80) break;
        cp = (cp << 6) | (s[i + j] & 0x3Fu);
      }
      if (j <= need || (need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
          (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
        cp = 0xFFFD;
        k = 1; /* resynchronise on the next byte */
      } else {
        k = need + 1;
      }
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out[n++] = (jchar)(0xD800 + (cp >> 10));
      out[n++] = (jchar)(0xDC00 + (cp & 0x3FF));
    } else {
      out[n++] = (jchar)cp;
    }
    i += k;
  }
  return n;
}

JNIEXPORT jstring FN(step)(JNIEnv* env, jclass cls, jlong h, jintArray info, jlong scratch,
                           jint scratch_chars) {
  rlm_step_result r;
  jchar* u16 = (jchar*)(intptr_t)scratch;
  (void)cls;
  if (do_step(env, h, info, &r) != RLM_OK) return NULL;
  if (r.text_len == 0) return NULL; /* no object for an empty step */
  if (u16 && scratch_chars >= 0 && r.text_len <= (size_t)scratch_chars) {
    const size_t n = utf8_to_utf16((const unsigned char*)r.text, r.text_len, u16);
    return (*env)->NewString(env, u16, (jsize)n); /* the one object of a step */
  }
  /* Fallback (a text longer than the scratch, which the Java side sizes to the runtime's bound):
   * String(byte[], "UTF-8"), one extra array. */
  {
    jbyteArray a = (*env)->NewByteArray(env, (jsize)r.text_len);
    if (!a) return NULL;
    (*env)->SetByteArrayRegion(env, a, 0, (jsize)r.text_len, (const jbyte*)r.text);
    return (jstring)(*env)->NewObject(env, g_string, g_string_ctor, a, g_utf8);
  }
}

JNIEXPORT jint FN(stepInto)(JNIEnv* env, jclass cls, jlong h, jintArray info, jobject out,
                            jint offset, jint capacity) {
  rlm_step_result r;
  char* dst;
  (void)cls;
  dst = (char*)direct_range(env, out, offset, capacity, "stepInto: not a direct buffer range");
  if (!dst) return -1;
  if (do_step(env, h, info, &r) != RLM_OK) return -1;
  if (r.text_len > (size_t)capacity) {
    throw_status(env, RLM_ERR_CAPACITY, "stepInto: the step's text does not fit the buffer");
    return -1;
  }
  if (r.text_len) memcpy(dst, r.text, r.text_len);
  return (jint)r.text_len;
}
