/* LD_PRELOADed into the ThreadSanitizer run (scripts/run-tsan.sh): tells TSan about
 * GLib's locks. GLib implements GMutex, GRecMutex and GCond with futexes, which TSan does
 * not see, so every field guarded by GST_OBJECT_LOCK or a pad's stream lock would look
 * unsynchronised. Each wrapper calls GLib's own function and marks the lock's address as
 * acquired or released (__tsan_acquire / __tsan_release: a happens-before edge). Built
 * without instrumentation; TSan's runtime comes with the instrumented executable. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

/* Weak: a process without TSan (a helper GStreamer spawns) runs the plain functions. */
__attribute__((weak)) void __tsan_acquire(void* addr);
__attribute__((weak)) void __tsan_release(void* addr);
#define ACQUIRE(a) (__tsan_acquire ? __tsan_acquire(a) : (void)0)
#define RELEASE(a) (__tsan_release ? __tsan_release(a) : (void)0)

/* GLib's own `name`, of type ret (*)(args), looked up once. */
#define REAL(name, ret, args)                                         \
  static ret(*real_##name) args;                                      \
  if (!real_##name) {                                                 \
    *(void**)&real_##name = dlsym(RTLD_NEXT, #name);                  \
    if (!real_##name) abort(); /* not GLib: nothing sensible to do */ \
  }

typedef int gboolean;
typedef long gint64;

void g_mutex_lock(void* m) {
  REAL(g_mutex_lock, void, (void*));
  real_g_mutex_lock(m);
  ACQUIRE(m);
}

void g_mutex_unlock(void* m) {
  REAL(g_mutex_unlock, void, (void*));
  RELEASE(m);
  real_g_mutex_unlock(m);
}

gboolean g_mutex_trylock(void* m) {
  REAL(g_mutex_trylock, gboolean, (void*));
  gboolean ok = real_g_mutex_trylock(m);
  if (ok) ACQUIRE(m);
  return ok;
}

void g_rec_mutex_lock(void* m) {
  REAL(g_rec_mutex_lock, void, (void*));
  real_g_rec_mutex_lock(m);
  ACQUIRE(m);
}

void g_rec_mutex_unlock(void* m) {
  REAL(g_rec_mutex_unlock, void, (void*));
  RELEASE(m);
  real_g_rec_mutex_unlock(m);
}

gboolean g_rec_mutex_trylock(void* m) {
  REAL(g_rec_mutex_trylock, gboolean, (void*));
  gboolean ok = real_g_rec_mutex_trylock(m);
  if (ok) ACQUIRE(m);
  return ok;
}

/* Waiting releases the mutex and takes it again. */
void g_cond_wait(void* c, void* m) {
  REAL(g_cond_wait, void, (void*, void*));
  RELEASE(m);
  real_g_cond_wait(c, m);
  ACQUIRE(m);
}

gboolean g_cond_wait_until(void* c, void* m, gint64 end_time) {
  REAL(g_cond_wait_until, gboolean, (void*, void*, gint64));
  RELEASE(m);
  gboolean ok = real_g_cond_wait_until(c, m, end_time);
  ACQUIRE(m);
  return ok;
}

/* GAsyncQueue locks inside GLib (calls TSan cannot see either): what one thread pushes,
 * the popping thread sees (GstHarness hands buffers and events over this way). */
void g_async_queue_push(void* q, void* data) {
  REAL(g_async_queue_push, void, (void*, void*));
  RELEASE(q);
  real_g_async_queue_push(q, data);
}

void* g_async_queue_pop(void* q) {
  REAL(g_async_queue_pop, void*, (void*));
  void* r = real_g_async_queue_pop(q);
  ACQUIRE(q);
  return r;
}

void* g_async_queue_try_pop(void* q) {
  REAL(g_async_queue_try_pop, void*, (void*));
  void* r = real_g_async_queue_try_pop(q);
  ACQUIRE(q);
  return r;
}

void* g_async_queue_timeout_pop(void* q, unsigned long long timeout) {
  REAL(g_async_queue_timeout_pop, void*, (void*, unsigned long long));
  void* r = real_g_async_queue_timeout_pop(q, timeout);
  ACQUIRE(q);
  return r;
}
