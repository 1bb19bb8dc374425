#include "thread_priority.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace nn::plugins {

namespace {

// struct sched_attr (SCHED_ATTR_SIZE_VER1): linux/sched/types.h clashes with <sched.h>.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // SCHED_OTHER: the slice (Linux >= 6.12; older kernels ignore it), 0 = default
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

bool get_attr(pid_t tid, SchedAttr* a) {
  *a = {};
  return syscall(SYS_sched_getattr, tid, a, sizeof(*a), 0) == 0;
}

bool set_other(pid_t tid, int nice, uint64_t slice_ns) {
  SchedAttr a{};
  a.size = sizeof(a);
  a.sched_policy = SCHED_OTHER;
  a.sched_nice = nice;  // sched_setattr sets nice too: keep the thread's own
  a.sched_runtime = slice_ns;
  return syscall(SYS_sched_setattr, tid, &a, 0) == 0;
}

}  // namespace

bool current_thread_is_realtime() {
  const int policy = sched_getscheduler(0);  // 0: the calling thread
  return policy == SCHED_RR || policy == SCHED_FIFO;
}

const char* to_string(ThreadPriority p) {
  switch (p) {
    case ThreadPriority::kNormal:
      return "normal";
    case ThreadPriority::kLowLatency:
      return "low-latency";
    case ThreadPriority::kRealtime:
      return "realtime";
  }
  return "normal";
}

ThreadPriority FrameThreadPriority::apply(ThreadPriority wanted) {
  thread_local const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));  // once per thread, not per frame
  std::lock_guard<std::mutex> lock(mutex_);
  if (tid == last_tid_) return last_;
  last_tid_ = tid;
  for (const Changed& c : changed_)
    if (c.tid == tid) return last_ = c.got;  // changed before, between other threads' frames
  last_ = ThreadPriority::kNormal;
  SchedAttr cur;
  if (wanted == ThreadPriority::kNormal || !get_attr(tid, &cur)) return last_;
  if (cur.sched_policy == SCHED_FIFO || cur.sched_policy == SCHED_RR) return last_ = ThreadPriority::kRealtime;
  if (cur.sched_policy != SCHED_OTHER) return last_;  // batch, idle, deadline: the application's choice
  if (wanted == ThreadPriority::kRealtime) {
    sched_param p{};
    p.sched_priority = kRealtimePriority;
    if (sched_setscheduler(tid, SCHED_RR, &p) == 0) {
      changed_.push_back({tid, cur.sched_nice, ThreadPriority::kRealtime});
      return last_ = ThreadPriority::kRealtime;
    }
  }
  if (set_other(tid, cur.sched_nice, kShortSliceNs)) {
    changed_.push_back({tid, cur.sched_nice, ThreadPriority::kLowLatency});
    return last_ = ThreadPriority::kLowLatency;
  }
  return last_;
}

void FrameThreadPriority::restore() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Changed& c : changed_) set_other(c.tid, c.nice, 0);  // a thread gone since: ESRCH, fine
  changed_.clear();
  last_tid_ = 0;
  last_ = ThreadPriority::kNormal;
}

}  // namespace nn::plugins
