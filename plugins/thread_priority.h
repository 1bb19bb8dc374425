// Scheduling of the threads that carry frames through nnsegment and nnbackground.
//
// Why: on a loaded machine a thread that needs 2 ms of CPU per frame can wait tens of ms
// for a core behind busy processes of the same priority; no amount of work saved inside
// the element fixes that. A camera pipeline keeps its frame path ahead of batch work the
// way audio servers do: the streaming thread gets a real-time round-robin priority when the
// process may have one (root, CAP_SYS_NICE or RLIMIT_RTPRIO), otherwise a short EEVDF slice
// (Linux >= 6.12; unprivileged; the same CPU share, but it runs soon after it wakes). The
// inference worker stays at normal priority: under contention inference is what gives way.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace nn::plugins {

enum class ThreadPriority {
  kNormal,      // leave the thread alone
  kLowLatency,  // a short scheduling slice
  kRealtime,    // SCHED_RR at kRealtimePriority, else kLowLatency
};

const char* to_string(ThreadPriority p);
// Whether the calling thread runs on a real-time policy (SCHED_RR / SCHED_FIFO): one
// syscall, cheap enough per frame.
bool current_thread_is_realtime();
// (GstNnThreadPriority's values are these, in this order: gstnnsegment.h.)

class FrameThreadPriority {
 public:
  static constexpr int kRealtimePriority = 10;      // below audio servers' (PipeWire: 88)
  static constexpr uint64_t kShortSliceNs = 300000;  // 0.3 ms (the default is ~1.4 ms here)

  // Applies `wanted` to the calling thread the first time this thread runs a frame (cheap
  // after that) and returns what the thread has. Threads already on a real-time policy
  // are left as they are.
  ThreadPriority apply(ThreadPriority wanted);
  // Puts every thread changed back as it was (stop(): GstTaskPool reuses its threads).
  void restore();
  ~FrameThreadPriority() { restore(); }

 private:
  struct Changed {
    pid_t tid;
    int nice;  // SCHED_OTHER at this nice before
    ThreadPriority got;
  };
  std::mutex mutex_;
  std::vector<Changed> changed_;
  pid_t last_tid_ = 0;
  ThreadPriority last_ = ThreadPriority::kNormal;
};

}  // namespace nn::plugins
