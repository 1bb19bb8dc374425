/* Preloaded with glib_sync.c (scripts/run-tsan.sh): OpenCV's parallel_for_ hands work to
 * TBB threads that synchronise with atomics TSan cannot see (TBB is not instrumented), so
 * every cv::parallel_for_ would look like a race. One OpenCV thread runs each call on the
 * thread that made it, which TSan follows. (OPENCV_FOR_THREADS_NUM does not reach the
 * TBB backend.) */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((constructor)) static void opencv_one_thread(void) {
  void (*set_num_threads)(int);
  *(void**)&set_num_threads = dlsym(RTLD_DEFAULT, "_ZN2cv13setNumThreadsEi"); /* cv::setNumThreads */
  if (set_num_threads) set_num_threads(1);
}
