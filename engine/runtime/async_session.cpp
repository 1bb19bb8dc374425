// AsyncSession: one worker, one inference in flight, a one-slot "latest input wins" mailbox.
#include <time.h>

#include <condition_variable>
#include <cstring>
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

}  // namespace

struct AsyncSession::Impl {
  std::unique_ptr<Session> session;
  OutputReader read_outputs;  // null: copy the outputs into the result
  mutable std::mutex mu;
  std::condition_variable cv_work, cv_done;
  std::optional<std::pair<std::vector<Tensor>, uint64_t>> pending;  // waiting input
  std::optional<AsyncResult> finished;                              // newest finished result
  bool running = false;
  bool stop = false;
  Counters counters;
  std::thread worker;

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv_work.wait(lock, [&] { return stop || pending.has_value(); });
      if (stop) return;
      auto [inputs, tag] = std::move(*pending);
      pending.reset();
      running = true;
      lock.unlock();
      const double cpu0 = thread_cpu_ms();
      AsyncResult r;
      r.tag = tag;
      r.status = Status::ok();
      if (inputs.size() != session->num_inputs())
        r.status = Status(StatusCode::kInvalidArgument,
                          "AsyncSession: submitted " + std::to_string(inputs.size()) +
                              " inputs, the model takes " + std::to_string(session->num_inputs()));
      for (size_t i = 0; i < inputs.size() && r.status.is_ok(); ++i)
        r.status = session->set_input(i, inputs[i].data(), inputs[i].bytes.size());
      if (r.status.is_ok()) r.status = session->run();
      if (r.status.is_ok() && read_outputs) {
        r.status = read_outputs(*session, r);
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
  std::lock_guard<std::mutex> lock(impl_->mu);
  bool replaced = impl_->pending.has_value();
  if (replaced) ++impl_->counters.replaced;
  ++impl_->counters.submitted;
  impl_->pending.emplace(std::move(inputs), tag);
  impl_->cv_work.notify_one();
  return replaced;
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
