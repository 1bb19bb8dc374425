// Streaming models' post-training quantization (nn/quantize/stream.h): the float stream
// runs over the clips as the element runs it, each stage's inputs are kept every few hops,
// then each stage is quantized on its own samples.
#include "nn/quantize/stream.h"

#include <algorithm>

namespace nn::quantize {

std::string StreamQuantizeReport::to_string() const {
  std::string s;
  for (size_t i = 0; i < stages.size(); ++i) {
    s += "stage " + std::to_string(i + 1) + " (" + std::to_string(stages[i].samples) + " hops of " +
         std::to_string(hops) + "):\n";
    s += stages[i].to_string();
  }
  return s;
}

Result<std::shared_ptr<const audio::StreamModel>> quantize_stream(const std::shared_ptr<const audio::StreamModel>& model,
                                                                  const std::vector<audio::AudioBuffer>& clips,
                                                                  const StreamQuantizeOptions& options,
                                                                  StreamQuantizeReport* report) {
  NN_CHECK_OR_RETURN(model != nullptr, StatusCode::kInvalidArgument, "no stream model");
  NN_CHECK_OR_RETURN(!clips.empty(), StatusCode::kInvalidArgument, "stream quantization needs calibration audio");
  const audio::StreamInfo& info = model->info();
  size_t total_hops = 0;
  for (const audio::AudioBuffer& clip : clips) {
    NN_CHECK_OR_RETURN(clip.sample_rate == info.sample_rate, StatusCode::kInvalidArgument,
                       "calibration audio at " + std::to_string(clip.sample_rate) + " Hz, the model takes " +
                           std::to_string(info.sample_rate) + " Hz");
    total_hops += clip.samples.size() / static_cast<size_t>(info.hop);  // frames x channels / hop
  }
  const size_t max_samples = std::max<size_t>(1, options.max_samples);
  const size_t stride = std::max({options.hop_stride, size_t{1}, (total_hops + max_samples - 1) / max_samples});

  // samples[stage][sample][input]: what the stage's session held when it ran.
  const size_t stages = model->num_stages();
  std::vector<std::vector<std::vector<std::vector<float>>>> samples(stages);
  std::vector<size_t> seen(stages, 0);
  audio::StreamOptions so;
  so.session.delegates = options.stage.delegates;
  so.session.threads = options.stage.threads;
  so.on_stage_inputs = [&](size_t stage, Session& session) {
    if (seen[stage]++ % stride != 0 || samples[stage].size() >= max_samples) return;
    std::vector<std::vector<float>> inputs(session.num_inputs());
    for (size_t k = 0; k < inputs.size(); ++k) {
      const float* v = session.input_f32(k);
      inputs[k].assign(v, v + num_elements(session.input_desc(k).dims));
    }
    samples[stage].push_back(std::move(inputs));
  };
  size_t hops = 0;
  for (size_t c = 0; c < clips.size(); ++c) {
    audio::StreamRunStats stats;
    auto out = audio::process_audio(model, clips[c], so, /*compensate_latency=*/false, &stats);
    if (!out.is_ok()) return out.status().with_context("calibration clip " + std::to_string(c + 1));
    hops += stats.hops;
  }

  StreamQuantizeReport rep;
  rep.hops = hops;
  std::vector<std::shared_ptr<Model>> quantized;
  for (size_t s = 0; s < stages; ++s) {
    const Model& stage = *model->stage(s);
    const auto& mine = samples[s];
    NN_CHECK_OR_RETURN(!mine.empty(), StatusCode::kInvalidArgument,
                       "stage " + std::to_string(s + 1) + " saw no calibration hop (clips shorter than a hop?)");
    auto provider = [&](size_t i, std::vector<Tensor>& inputs) -> Status {
      for (size_t k = 0; k < inputs.size(); ++k)
        std::copy(mine[i][k].begin(), mine[i][k].end(), inputs[k].f32());
      return Status::ok();
    };
    QuantizeReport r;
    auto q = quantize_model(stage, mine.size(), provider, options.stage, &r);
    if (!q.is_ok()) return q.status().with_context("stage " + std::to_string(s + 1));
    quantized.push_back(std::make_shared<Model>(std::move(*q)));
    rep.stages.push_back(std::move(r));
  }
  auto result = audio::make_stream_model(model->description(), std::move(quantized));
  if (result.is_ok() && report) *report = std::move(rep);
  return result;
}

}  // namespace nn::quantize
