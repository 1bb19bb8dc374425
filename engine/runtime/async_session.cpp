// AsyncSession: one worker, one inference in flight, a one-slot "latest input wins" mailbox.
#include <time.h>

#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "nn/runtime/session.h"

namespace nn {

namespace {

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// A caller's callback (InputWriter, OutputReader) on the worker: an exception becomes a
// failed result instead of ending the process.
template <typename F>
Status guarded(const char* what, F&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("AsyncSession: ") + what + " threw: " + e.what());
  } catch (...) {
    return Status(StatusCode::kInternal, std::string("AsyncSession: ") + what + " threw");
  }
}

}  // namespace

struct AsyncSession::Impl {
  std::unique_ptr<Session> session;
  OutputReader read_outputs;  // null: copy the outputs into the result
  mutable std::mutex mu;
  std::condition_variable cv_work, cv_done;
  // A waiting input: tensors to copy into the session, or a writer that fills it in place.
  struct Pending {
    std::vector<Tensor> inputs;
    InputWriter write_inputs;
    uint64_t tag = 0;
  };
  std::optional<Pending> pending;
  std::optional<AsyncResult> finished;  // newest finished result
  bool running = false;
  bool stop = false;
  Counters counters;
  std::thread worker;

  // Puts a job in the mailbox; true when it replaced a waiting one, which is dropped (its
  // writer never called) after the lock is released.
  bool post(Pending job) {
    std::optional<Pending> dropped;  // declared before the lock: destroyed after its release
    std::lock_guard<std::mutex> lock(mu);
    const bool replaced = pending.has_value();
    if (replaced) {
      ++counters.replaced;
      dropped = std::move(pending);
    }
    ++counters.submitted;
    pending = std::move(job);
    cv_work.notify_one();
    return replaced;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv_work.wait(lock, [&] { return stop || pending.has_value(); });
      if (stop) return;
      Pending job = std::move(*pending);
      pending.reset();
      running = true;
      lock.unlock();
      const double cpu0 = thread_cpu_ms();
      AsyncResult r;
      r.tag = job.tag;
      r.status = Status::ok();
      if (job.write_inputs) {
        r.status = guarded("input writer", [&] { return job.write_inputs(*session); });
      } else {
        const std::vector<Tensor>& inputs = job.inputs;
        if (inputs.size() != session->num_inputs())
          r.status = Status(StatusCode::kInvalidArgument,
                            "AsyncSession: submitted " + std::to_string(inputs.size()) +
                                " inputs, the model takes " + std::to_string(session->num_inputs()));
        for (size_t i = 0; i < inputs.size() && r.status.is_ok(); ++i)
          r.status = session->set_input(i, inputs[i].data(), inputs[i].bytes.size());
      }
      // What the job holds (the writer's image, the tensors) is let go off the lock.
      job = Pending{};
      if (r.status.is_ok()) r.status = session->run();
      if (r.status.is_ok() && read_outputs) {
        r.status = guarded("output reader", [&] { return read_outputs(*session, r); });
      } else if (r.status.is_ok()) {
        for (size_t i = 0; i < session->num_outputs(); ++i) {
          Tensor t = Tensor::like(session->output_desc(i));
          std::memcpy(t.data(), session->output_data(i), t.bytes.size());
          r.outputs.push_back(std::move(t));
        }
      }
      r.run_ms = session->last_run_ms();
      r.cpu_ms = thread_cpu_ms() - cpu0;
      lock.lock();
      running = false;
      if (r.status.is_ok())
        ++counters.completed;
      else
        ++counters.failed;
      finished = std::move(r);
      cv_done.notify_all();
    }
  }
};

AsyncSession::AsyncSession(std::unique_ptr<Session> session) : AsyncSession(std::move(session), nullptr) {}

AsyncSession::AsyncSession(std::unique_ptr<Session> session, OutputReader read_outputs)
    : impl_(std::make_unique<Impl>()) {
  impl_->session = std::move(session);
  impl_->read_outputs = std::move(read_outputs);
  impl_->worker = std::thread([this] { impl_->loop(); });
}

AsyncSession::~AsyncSession() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv_work.notify_all();
  impl_->worker.join();
}

bool AsyncSession::submit(std::vector<Tensor> inputs, uint64_t tag) {
  return impl_->post(Impl::Pending{std::move(inputs), nullptr, tag});
}

bool AsyncSession::submit(InputWriter write_inputs, uint64_t tag) {
  if (!write_inputs) return submit(std::vector<Tensor>{}, tag);  // fails on the worker: no inputs
  return impl_->post(Impl::Pending{{}, std::move(write_inputs), tag});
}

std::optional<AsyncResult> AsyncSession::take_latest() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::optional<AsyncResult> r = std::move(impl_->finished);
  impl_->finished.reset();
  return r;
}

std::optional<AsyncResult> AsyncSession::wait_for(uint64_t min_tag, std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  bool ok = impl_->cv_done.wait_for(
      lock, timeout, [&] { return impl_->finished.has_value() && impl_->finished->tag >= min_tag; });
  if (!ok) return std::nullopt;
  std::optional<AsyncResult> r = std::move(impl_->finished);
  impl_->finished.reset();
  return r;
}

bool AsyncSession::busy() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->running || impl_->pending.has_value();
}

const Session& AsyncSession::session() const {
  return *impl_->session;
}

AsyncSession::Counters AsyncSession::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

}  // namespace nn
