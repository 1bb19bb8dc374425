// AsyncSession: one worker, one inference in flight, a one-slot mailbox where the newest
// input wins. A gated fake Session makes "busy" deterministic: run() blocks until the
// test opens the gate, and records which inputs (tags) actually ran.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "runtime_test_util.h"

namespace {

using namespace std::chrono_literals;

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  int running = 0;         // runs entered and not yet left
  std::vector<float> ran;  // input[0] of every run, in order
  bool fail_next = false;

  void set(bool o) {
    std::lock_guard<std::mutex> l(mu);
    open = o;
    cv.notify_all();
  }
  bool wait_running(int n) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, 5s, [&] { return running >= n; });
  }
};

// y = 2 * x over a [1, 4] tensor; run() waits at the gate.
class GatedSession final : public nn::Session {
 public:
  explicit GatedSession(Gate* gate) : gate_(gate) {
    model_ = std::make_shared<nn::Model>();
    uint32_t x = model_->add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 4});
    uint32_t y = model_->add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 4});
    model_->inputs = {x};
    model_->outputs = {y};
    in_.resize(4);
    out_.resize(4);
  }
  const nn::Model& model() const override { return *model_; }
  const nn::PlanReport& report() const override { return report_; }
  void* input_data(size_t) override { return in_.data(); }
  const void* output_data(size_t) const override { return out_.data(); }
  double last_run_ms() const override { return 1.5; }
  nn::Status run() override {
    std::unique_lock<std::mutex> l(gate_->mu);
    gate_->ran.push_back(in_[0]);
    ++gate_->running;
    gate_->cv.notify_all();
    gate_->cv.wait(l, [&] { return gate_->open; });
    --gate_->running;
    if (gate_->fail_next) {
      gate_->fail_next = false;
      return nn::Status(nn::StatusCode::kInternal, "gated failure");
    }
    for (size_t i = 0; i < 4; ++i) out_[i] = 2 * in_[i];
    return nn::Status::ok();
  }

 private:
  Gate* gate_;
  std::shared_ptr<nn::Model> model_;
  nn::PlanReport report_;
  std::vector<float> in_, out_;
};

std::vector<nn::Tensor> input(float v) {
  nn::Tensor t(nn::OperandType::TENSOR_FLOAT32, {1, 4});
  for (size_t i = 0; i < 4; ++i) t.f32()[i] = v + static_cast<float>(i);
  return {t};
}

TEST(AsyncSession, OneSubmitIsNeverLost) {
  Gate gate;
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  EXPECT_FALSE(async.submit(input(3), 7));
  auto r = async.wait_for(7, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->tag, 7u);
  NN_ASSERT_OK(r->status);
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].f32()[0], 6.f);
  EXPECT_EQ(r->outputs[0].f32()[3], 12.f);
  EXPECT_EQ(r->run_ms, 1.5);
  auto c = async.counters();
  EXPECT_EQ(c.submitted, 1u);
  EXPECT_EQ(c.completed, 1u);
  EXPECT_EQ(c.replaced, 0u);
  EXPECT_FALSE(async.take_latest().has_value());  // already taken
  EXPECT_FALSE(async.busy());
}

TEST(AsyncSession, LatestInputWinsWhileBusy) {
  Gate gate;
  gate.set(false);
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  EXPECT_FALSE(async.submit(input(1), 1));
  ASSERT_TRUE(gate.wait_running(1));  // tag 1 is in flight
  EXPECT_TRUE(async.busy());
  EXPECT_FALSE(async.submit(input(2), 2));  // waits in the mailbox
  EXPECT_TRUE(async.submit(input(3), 3));   // replaces 2
  EXPECT_TRUE(async.submit(input(4), 4));   // replaces 3
  EXPECT_FALSE(async.take_latest().has_value());
  gate.set(true);
  auto r = async.wait_for(4, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->tag, 4u);
  EXPECT_EQ(r->outputs[0].f32()[0], 8.f);
  {
    std::lock_guard<std::mutex> l(gate.mu);
    EXPECT_EQ(gate.ran, (std::vector<float>{1, 4}));  // 2 and 3 never ran
  }
  auto c = async.counters();
  EXPECT_EQ(c.submitted, 4u);
  EXPECT_EQ(c.replaced, 2u);
  EXPECT_EQ(c.completed, 2u);
  EXPECT_EQ(c.failed, 0u);
}

TEST(AsyncSession, TakeLatestDropsOlderResults) {
  Gate gate;
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  async.submit(input(1), 1);
  ASSERT_TRUE(async.wait_for(1, 5s).has_value());
  async.submit(input(2), 2);
  // Wait until 2 is done without taking it, then submit 3 and wait for it to finish too.
  for (int i = 0; i < 500 && async.busy(); ++i) std::this_thread::sleep_for(1ms);
  async.submit(input(3), 3);
  for (int i = 0; i < 500 && async.busy(); ++i) std::this_thread::sleep_for(1ms);
  auto r = async.take_latest();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->tag, 3u);
  EXPECT_FALSE(async.take_latest().has_value());
  // wait_for a tag that never comes times out empty-handed.
  EXPECT_FALSE(async.wait_for(9, 20ms).has_value());
}

TEST(AsyncSession, FailureIsReportedAndCounted) {
  Gate gate;
  gate.fail_next = true;
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  async.submit(input(1), 1);
  auto r = async.wait_for(1, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->status.is_ok());
  EXPECT_NE(r->status.message().find("gated failure"), std::string::npos);
  EXPECT_EQ(async.counters().failed, 1u);
  // Wrong input count is refused by the worker with a clear status, not a crash.
  async.submit(std::vector<nn::Tensor>{}, 2);
  r = async.wait_for(2, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), nn::StatusCode::kInvalidArgument);
}

TEST(AsyncSession, DestructorWhileBusyFinishesRunningDropsWaiting) {
  Gate gate;
  gate.set(false);
  auto async = std::make_unique<nn::AsyncSession>(std::make_unique<GatedSession>(&gate));
  async->submit(input(1), 1);
  ASSERT_TRUE(gate.wait_running(1));
  async->submit(input(2), 2);
  std::thread destroyer([&] { async.reset(); });
  std::this_thread::sleep_for(20ms);
  gate.set(true);  // let the running inference finish; the destructor then joins
  destroyer.join();
  std::lock_guard<std::mutex> l(gate.mu);
  EXPECT_EQ(gate.ran, std::vector<float>{1});
}

// Caller-written inputs: the writer fills the session's input buffer on the worker, once
// for each input that runs (never for one replaced while waiting), and the outputs are
// computed from what it wrote.
TEST(AsyncSession, InputWriterRunsOnTheWorkerOncePerRun) {
  Gate gate;
  gate.set(false);
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  std::mutex mu;
  std::vector<std::pair<float, std::thread::id>> calls;  // (value written, thread)
  const auto writer = [&](float v) {
    return [&, v](nn::Session& session) {
      {
        std::lock_guard<std::mutex> l(mu);
        calls.emplace_back(v, std::this_thread::get_id());
      }
      float* in = session.input_f32(0);
      for (size_t i = 0; i < 4; ++i) in[i] = v + static_cast<float>(i);
      return nn::Status::ok();
    };
  };
  EXPECT_FALSE(async.submit(writer(1), 1));
  ASSERT_TRUE(gate.wait_running(1));
  EXPECT_FALSE(async.submit(writer(2), 2));  // waits
  EXPECT_TRUE(async.submit(writer(3), 3));   // replaces 2: its writer is never called
  gate.set(true);
  auto r = async.wait_for(3, 5s);
  ASSERT_TRUE(r.has_value());
  NN_ASSERT_OK(r->status);
  EXPECT_EQ(r->tag, 3u);
  ASSERT_EQ(r->outputs.size(), 1u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r->outputs[0].f32()[i], 2.f * (3.f + i));
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_EQ(calls[0].first, 1.f);
    EXPECT_EQ(calls[1].first, 3.f);
    for (const auto& c : calls) EXPECT_NE(c.second, std::this_thread::get_id()) << "the writer ran on the caller";
    EXPECT_EQ(calls[0].second, calls[1].second) << "every writer runs on the one worker";
  }
  {
    std::lock_guard<std::mutex> l(gate.mu);
    EXPECT_EQ(gate.ran, (std::vector<float>{1, 3}));
  }
  // Tensors and writers share the mailbox: a tensor submitted after a writer runs as itself.
  async.submit(input(5), 5);
  r = async.wait_for(5, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outputs[0].f32()[0], 10.f);
  const auto c = async.counters();
  EXPECT_EQ(c.submitted, 4u);
  EXPECT_EQ(c.replaced, 1u);
  EXPECT_EQ(c.completed, 3u);
}

// A writer's error (or exception) is the result's status, counted as a failure: the
// session does not run and the caller gets an answer, not a wait that never ends.
TEST(AsyncSession, InputWriterErrorFailsTheResult) {
  Gate gate;
  nn::AsyncSession async(std::make_unique<GatedSession>(&gate));
  async.submit([](nn::Session&) { return nn::Status(nn::StatusCode::kInvalidArgument, "writer refused"); }, 1);
  auto r = async.wait_for(1, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), nn::StatusCode::kInvalidArgument);
  EXPECT_NE(r->status.message().find("writer refused"), std::string::npos) << r->status.to_string();
  EXPECT_TRUE(r->outputs.empty());

  async.submit([](nn::Session&) -> nn::Status { throw std::runtime_error("writer exploded"); }, 2);
  r = async.wait_for(2, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->status.is_ok());
  EXPECT_NE(r->status.message().find("writer exploded"), std::string::npos) << r->status.to_string();

  async.submit(nn::InputWriter{}, 3);  // an empty writer writes nothing: refused like no inputs
  r = async.wait_for(3, 5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), nn::StatusCode::kInvalidArgument);
  {
    std::lock_guard<std::mutex> l(gate.mu);
    EXPECT_TRUE(gate.ran.empty()) << "the session ran on inputs no writer finished";
  }
  EXPECT_EQ(async.counters().failed, 3u);
  // The worker carries on.
  async.submit(input(4), 4);
  r = async.wait_for(4, 5s);
  ASSERT_TRUE(r.has_value());
  NN_ASSERT_OK(r->status);
  EXPECT_EQ(async.counters().completed, 1u);
}

// A real session behind the async wrapper: the reference delegate on a small model.
TEST(AsyncSession, RealSessionRoundTrip) {
  auto m = std::make_shared<nn::Model>();
  uint32_t x = m->add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 3, 3, 2});
  m->inputs.push_back(x);
  uint32_t y = m->add_tensor(nn::OperandType::TENSOR_FLOAT32, {});
  m->add_operation(nn::OperationType::RELU, {x}, {y});
  m->outputs.push_back(y);
  ASSERT_TRUE(m->validate_and_infer_shapes().is_ok());
  auto s = nn::Session::open(m, {});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  nn::AsyncSession async(std::move(s).value());
  nn::Tensor t(nn::OperandType::TENSOR_FLOAT32, {1, 3, 3, 2});
  for (size_t i = 0; i < t.size(); ++i) t.f32()[i] = static_cast<float>(i) - 9.f;
  async.submit({t}, 11);
  auto r = async.wait_for(11, 5s);
  ASSERT_TRUE(r.has_value());
  NN_ASSERT_OK(r->status);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(r->outputs[0].f32()[i], std::max(0.f, t.f32()[i]));
  EXPECT_EQ(async.session().num_inputs(), 1u);
}

// Caller-owned outputs: an OutputReader reads the selfie model's output where the session
// wrote it, into the caller's own buffer. The values must equal the copying path's (same
// input, two sessions), no Tensor is made for the caller, and a reader's error fails the
// result and is counted.
TEST(AsyncSession, OutputReaderEqualsTheCopyingPath) {
  const std::string rel = "models/selfie_segmentation.tflite";
  if (!nn_test::require_asset(rel)) return;
  auto loaded = nn::load_model(nn_test::asset(rel));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  std::shared_ptr<const nn::Model> model = std::move(loaded).value();
  nn::SessionOptions options;
  options.delegates = {"cpu"};
  auto a = nn::Session::open(model, options);
  auto b = nn::Session::open(model, options);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const nn::Operand& out_desc = a.value()->output_desc(0);
  const size_t out_bytes = out_desc.byte_size();

  nn::AsyncSession copying(std::move(a).value());
  std::vector<uint8_t> mine(out_bytes, 0xAB);  // the caller's memory
  std::atomic<bool> fail{false};
  nn::AsyncSession reading(std::move(b).value(), [&](const nn::Session& session, nn::AsyncResult& r) {
    if (fail) return nn::Status(nn::StatusCode::kInternal, "reader refused tag " + std::to_string(r.tag));
    std::memcpy(mine.data(), session.output_data(0), mine.size());
    return nn::Status::ok();
  });

  nn::Tensor input = nn::Tensor::like(model->operands[model->inputs[0]]);
  const std::vector<float> values = nn_test::random_floats(input.size(), 3, 0.f, 1.f);
  std::memcpy(input.data(), values.data(), input.bytes.size());
  copying.submit({input}, 1);
  reading.submit({input}, 1);
  auto want = copying.wait_for(1, 30s);
  auto got = reading.wait_for(1, 30s);
  ASSERT_TRUE(want.has_value() && got.has_value());
  NN_ASSERT_OK(want->status);
  NN_ASSERT_OK(got->status);
  EXPECT_TRUE(got->outputs.empty()) << "the reader's result carries no copy";
  ASSERT_EQ(want->outputs.at(0).bytes.size(), out_bytes);
  EXPECT_EQ(std::memcmp(want->outputs[0].data(), mine.data(), out_bytes), 0)
      << "the caller-owned output differs from the copied one";

  fail = true;
  reading.submit({input}, 2);
  auto failed = reading.wait_for(2, 30s);
  ASSERT_TRUE(failed.has_value());
  EXPECT_FALSE(failed->status.is_ok());
  EXPECT_NE(failed->status.message().find("tag 2"), std::string::npos) << failed->status.to_string();
  EXPECT_EQ(reading.counters().failed, 1u);
  EXPECT_EQ(reading.counters().completed, 1u);
}

}  // namespace
