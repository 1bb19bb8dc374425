// Streaming models in a .nnapi file (SPEC.md "Streaming models"): the STREAM section
// (framing and stage table) and the STAGE_MODELS section (each stage a whole model image,
// read by the same reader as a plain file). Every offset, length, count and enum is
// checked before use; errors name the stage and the field.
#include <cmath>
#include <cstring>

#include "format/nnapi_codec.h"
#include "format/nnapi_format.h"
#include "nn/format/nnapi_file.h"
#include "nn/format/stream_file.h"

namespace nn {

using namespace nnapi_format;

namespace {

constexpr uint32_t kMaxStages = 16;
constexpr uint32_t kMaxBlock = 1u << 16;
constexpr uint32_t kMaxSampleRate = 1000000;

std::string stage_label(size_t i, const StreamStage& s) {
  return "stage " + std::to_string(i + 1) + (s.name.empty() ? "" : " '" + s.name + "'");
}

bool known_window(uint32_t v) { return v <= static_cast<uint32_t>(StreamWindow::kSqrtHann); }
bool known_source(uint32_t v) {
  return v >= static_cast<uint32_t>(StageInputSource::kRfftMagnitude) &&
         v <= static_cast<uint32_t>(StageInputSource::kState);
}
bool known_role(uint32_t v) { return v <= static_cast<uint32_t>(StageOutputRole::kState); }

Status check_description(const StreamDescription& d) {
  if (d.sample_rate < 1 || d.sample_rate > kMaxSampleRate)
    return invalid_file("sample_rate " + std::to_string(d.sample_rate) + " out of range [1, " +
                        std::to_string(kMaxSampleRate) + "]");
  if (d.block < 2 || d.block > kMaxBlock || d.block % 2 != 0)
    return invalid_file("block " + std::to_string(d.block) + " must be even and in [2, " +
                        std::to_string(kMaxBlock) + "]");
  if (d.hop < 1 || d.hop > d.block)
    return invalid_file("hop " + std::to_string(d.hop) + " must be in [1, block " + std::to_string(d.block) + "]");
  if (!known_window(static_cast<uint32_t>(d.analysis_window)))
    return invalid_file("unknown analysis_window " + std::to_string(static_cast<uint32_t>(d.analysis_window)));
  if (!known_window(static_cast<uint32_t>(d.synthesis_window)))
    return invalid_file("unknown synthesis_window " + std::to_string(static_cast<uint32_t>(d.synthesis_window)));
  if (!std::isfinite(d.output_gain)) return invalid_file("output_gain is not finite");
  if (d.stages.empty() || d.stages.size() > kMaxStages)
    return invalid_file(std::to_string(d.stages.size()) + " stages, expected 1 to " + std::to_string(kMaxStages));
  bool mask_before = false, has_output = false;
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const StreamStage& s = d.stages[i];
    const std::string where = stage_label(i, s);
    std::vector<int> fed(s.outputs.size(), 0);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const StageInputBinding& b = s.inputs[k];
      if (!known_source(static_cast<uint32_t>(b.source)))
        return invalid_file(where + ": input " + std::to_string(k) + ": unknown source " +
                            std::to_string(static_cast<uint32_t>(b.source)));
      if (b.source == StageInputSource::kMaskedTimeBlock && !mask_before)
        return invalid_file(where + ": input " + std::to_string(k) +
                            " is masked_time_block but no earlier stage has a spectral_mask output");
      if (b.source == StageInputSource::kState) {
        if (b.state_output >= s.outputs.size() || s.outputs[b.state_output] != StageOutputRole::kState)
          return invalid_file(where + ": input " + std::to_string(k) + " takes its state from output " +
                              std::to_string(b.state_output) + ", which is not a state output of this stage");
        if (++fed[b.state_output] > 1)
          return invalid_file(where + ": state output " + std::to_string(b.state_output) +
                              " feeds more than one input");
      }
    }
    for (size_t o = 0; o < s.outputs.size(); ++o) {
      if (!known_role(static_cast<uint32_t>(s.outputs[o])))
        return invalid_file(where + ": output " + std::to_string(o) + ": unknown role " +
                            std::to_string(static_cast<uint32_t>(s.outputs[o])));
      if (s.outputs[o] == StageOutputRole::kState && fed[o] == 0)
        return invalid_file(where + ": state output " + std::to_string(o) + " feeds no input");
      if (s.outputs[o] == StageOutputRole::kSpectralMask || s.outputs[o] == StageOutputRole::kTimeBlock)
        has_output = true;
    }
    for (StageOutputRole r : s.outputs) mask_before |= r == StageOutputRole::kSpectralMask;
  }
  if (!has_output) return invalid_file("no stage has a spectral_mask or time_block output: the stream has no output");
  return Status::ok();
}

size_t elements(const Operand& o) { return static_cast<size_t>(num_elements(o.dims)); }

Status check_against_models(const StreamDescription& d, const std::vector<const Model*>& stages) {
  if (stages.size() != d.stages.size())
    return invalid_file("the description has " + std::to_string(d.stages.size()) + " stages, given " +
                        std::to_string(stages.size()) + " models");
  for (size_t i = 0; i < stages.size(); ++i) {
    const StreamStage& s = d.stages[i];
    const Model& m = *stages[i];
    const std::string where = stage_label(i, s);
    if (m.inputs.size() != s.inputs.size())
      return invalid_file(where + ": the model has " + std::to_string(m.inputs.size()) +
                          " inputs, the description binds " + std::to_string(s.inputs.size()));
    if (m.outputs.size() != s.outputs.size())
      return invalid_file(where + ": the model has " + std::to_string(m.outputs.size()) +
                          " outputs, the description gives " + std::to_string(s.outputs.size()) + " roles");
    auto check = [&](const Operand& o, const std::string& what, size_t want) -> Status {
      if (o.type != OperandType::TENSOR_FLOAT32)
        return invalid_file(where + ": " + what + " '" + o.name + "' is " + std::string(operand_type_name(o.type)) +
                            ", streaming stages take and give float32");
      if (want && elements(o) != want)
        return invalid_file(where + ": " + what + " '" + o.name + "' " + dims_to_string(o.dims) + " has " +
                            std::to_string(elements(o)) + " values, expected " + std::to_string(want));
      return Status::ok();
    };
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const Operand& o = m.operands[m.inputs[k]];
      size_t want = 0;
      switch (s.inputs[k].source) {
        case StageInputSource::kRfftMagnitude: want = d.bins(); break;
        case StageInputSource::kTimeBlock:
        case StageInputSource::kMaskedTimeBlock: want = d.block; break;
        case StageInputSource::kState:
          want = elements(m.operands[m.outputs[s.inputs[k].state_output]]);
          break;
      }
      NN_RETURN_IF_ERROR(check(o, "input " + std::to_string(k) + " (" +
                                      stage_input_source_name(s.inputs[k].source) + ")", want));
    }
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      size_t want = 0;
      if (s.outputs[k] == StageOutputRole::kSpectralMask) want = d.bins();
      if (s.outputs[k] == StageOutputRole::kTimeBlock) want = d.block;
      NN_RETURN_IF_ERROR(check(m.operands[m.outputs[k]],
                               "output " + std::to_string(k) + " (" + stage_output_role_name(s.outputs[k]) + ")",
                               want));
    }
  }
  return Status::ok();
}

// STREAM section record, minus the per-stage model offsets (written beside it).
void encode_stream(ByteWriter& w, const StreamDescription& d, const std::vector<std::pair<uint64_t, uint64_t>>& images) {
  w.string(d.description);
  w.u32(d.sample_rate);
  w.u32(d.block);
  w.u32(d.hop);
  w.u32(static_cast<uint32_t>(d.analysis_window));
  w.u32(static_cast<uint32_t>(d.synthesis_window));
  w.f32(d.output_gain);
  w.u32(static_cast<uint32_t>(d.stages.size()));
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const StreamStage& s = d.stages[i];
    w.string(s.name);
    w.u64(images[i].first);
    w.u64(images[i].second);
    w.u32(static_cast<uint32_t>(s.inputs.size()));
    for (const StageInputBinding& b : s.inputs) {
      w.u32(static_cast<uint32_t>(b.source));
      w.u32(b.state_output);
    }
    w.u32(static_cast<uint32_t>(s.outputs.size()));
    for (StageOutputRole r : s.outputs) w.u32(static_cast<uint32_t>(r));
  }
}

// name (4) + offset (8) + length (8) + input count (4) + output count (4)
constexpr size_t kMinStageBytes = 28;

Result<StreamFile> parse_stream(std::span<const uint8_t> bytes, std::shared_ptr<const void> keepalive) {
  NN_ASSIGN_OR_RETURN(NnapiFileInfo info, parse_file_info(bytes, /*require_checksum=*/true));
  std::span<const uint8_t> stream, images;
  bool has_stream = false, has_images = false;
  for (size_t i = 0; i < info.sections.size(); ++i) {
    const NnapiSectionInfo& s = info.sections[i];
    if (s.type == kSectionStream) {
      stream = bytes.subspan(s.offset, s.length);
      has_stream = true;
    } else if (s.type == kSectionStageModels) {
      if (s.offset % kConstantAlignment != 0)
        return invalid_file("section " + std::to_string(i) + " (STAGE_MODELS): offset " + std::to_string(s.offset) +
                            " is not " + std::to_string(kConstantAlignment) + "-byte aligned");
      images = bytes.subspan(s.offset, s.length);
      has_images = true;
    } else if (s.type == kSectionOperands) {
      return invalid_file("not a streaming model: it is a single model (an OPERANDS section, no STREAM section)");
    } else if (s.type > kSectionStageModels && (s.flags & kSectionRequired)) {
      return invalid_file("section " + std::to_string(i) + ": unknown section type " + std::to_string(s.type) +
                          " is marked required (written by a newer nnpipe?)");
    }
  }
  if (!has_stream) return invalid_file("not a streaming model: it has no STREAM section");
  if (!has_images) return invalid_file("missing STAGE_MODELS section");
  const bool newer_minor = info.version_minor > kVersionMinor;

  Cursor c(stream, "stream");
  StreamFile out;
  StreamDescription& d = out.stream;
  uint32_t analysis = 0, synthesis = 0, n = 0;
  NN_RETURN_IF_ERROR(c.string(d.description, "description"));
  NN_RETURN_IF_ERROR(c.u32(d.sample_rate, "sample_rate"));
  NN_RETURN_IF_ERROR(c.u32(d.block, "block"));
  NN_RETURN_IF_ERROR(c.u32(d.hop, "hop"));
  NN_RETURN_IF_ERROR(c.u32(analysis, "analysis_window"));
  NN_RETURN_IF_ERROR(c.u32(synthesis, "synthesis_window"));
  NN_RETURN_IF_ERROR(c.f32(d.output_gain, "output_gain"));
  if (!known_window(analysis)) return c.error("unknown analysis_window " + std::to_string(analysis));
  if (!known_window(synthesis)) return c.error("unknown synthesis_window " + std::to_string(synthesis));
  d.analysis_window = static_cast<StreamWindow>(analysis);
  d.synthesis_window = static_cast<StreamWindow>(synthesis);
  NN_RETURN_IF_ERROR(c.count(n, kMinStageBytes, "stage count"));
  if (n > kMaxStages) return c.error(std::to_string(n) + " stages, at most " + std::to_string(kMaxStages));
  std::vector<std::pair<uint64_t, uint64_t>> ranges(n);
  d.stages.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    StreamStage& s = d.stages[i];
    c.set_record("stage " + std::to_string(i + 1));
    NN_RETURN_IF_ERROR(c.string(s.name, "name"));
    NN_RETURN_IF_ERROR(c.u64(ranges[i].first, "model offset"));
    NN_RETURN_IF_ERROR(c.u64(ranges[i].second, "model length"));
    if (!fits(ranges[i].first, ranges[i].second, images.size()))
      return c.error("model offset " + std::to_string(ranges[i].first) + " + length " +
                     std::to_string(ranges[i].second) + " past end of the STAGE_MODELS section (size " +
                     std::to_string(images.size()) + ")");
    if (ranges[i].first % kConstantAlignment != 0)
      return c.error("model offset " + std::to_string(ranges[i].first) + " is not " +
                     std::to_string(kConstantAlignment) + "-byte aligned");
    uint32_t ni = 0, no = 0;
    NN_RETURN_IF_ERROR(c.count(ni, 8, "input count"));
    s.inputs.resize(ni);
    for (uint32_t k = 0; k < ni; ++k) {
      uint32_t source = 0;
      NN_RETURN_IF_ERROR(c.u32(source, "input source"));
      if (!known_source(source))
        return c.error("input " + std::to_string(k) + ": unknown source " + std::to_string(source));
      s.inputs[k].source = static_cast<StageInputSource>(source);
      NN_RETURN_IF_ERROR(c.u32(s.inputs[k].state_output, "input state_output"));
    }
    NN_RETURN_IF_ERROR(c.count(no, 4, "output count"));
    s.outputs.resize(no);
    for (uint32_t k = 0; k < no; ++k) {
      uint32_t role = 0;
      NN_RETURN_IF_ERROR(c.u32(role, "output role"));
      if (!known_role(role)) return c.error("output " + std::to_string(k) + ": unknown role " + std::to_string(role));
      s.outputs[k] = static_cast<StageOutputRole>(role);
    }
  }
  c.set_record("");
  NN_RETURN_IF_ERROR(c.finish(newer_minor));
  NN_RETURN_IF_ERROR(check_description(d).with_context("stream section"));

  std::vector<const Model*> models;
  for (uint32_t i = 0; i < n; ++i) {
    auto model = parse_model(images.subspan(ranges[i].first, ranges[i].second), keepalive);
    if (!model.is_ok()) return model.status().with_context(stage_label(i, d.stages[i]) + " model");
    out.stages.push_back(std::move(model).value());
    models.push_back(out.stages.back().get());
  }
  NN_RETURN_IF_ERROR(check_against_models(d, models));
  return out;
}

}  // namespace

const char* stream_window_name(StreamWindow w) {
  switch (w) {
    case StreamWindow::kNone: return "none";
    case StreamWindow::kHann: return "hann";
    case StreamWindow::kSqrtHann: return "sqrt_hann";
  }
  return "unknown";
}

const char* stage_input_source_name(StageInputSource s) {
  switch (s) {
    case StageInputSource::kRfftMagnitude: return "rfft_magnitude";
    case StageInputSource::kTimeBlock: return "time_block";
    case StageInputSource::kMaskedTimeBlock: return "masked_time_block";
    case StageInputSource::kState: return "state";
  }
  return "unknown";
}

const char* stage_output_role_name(StageOutputRole r) {
  switch (r) {
    case StageOutputRole::kUnused: return "unused";
    case StageOutputRole::kSpectralMask: return "spectral_mask";
    case StageOutputRole::kTimeBlock: return "time_block";
    case StageOutputRole::kState: return "state";
  }
  return "unknown";
}

Status validate_stream(const StreamDescription& d, const std::vector<const Model*>& stages) {
  NN_RETURN_IF_ERROR(check_description(d));
  return check_against_models(d, stages);
}

std::string stream_summary(const StreamDescription& d) {
  std::string s = std::to_string(d.sample_rate) + " Hz, block " + std::to_string(d.block) + ", hop " +
                  std::to_string(d.hop) + " (latency " + std::to_string(d.latency_samples()) + " samples), windows " +
                  stream_window_name(d.analysis_window) + "/" + stream_window_name(d.synthesis_window);
  if (d.output_gain != 1.f) s += ", gain " + std::to_string(d.output_gain);
  s += ", " + std::to_string(d.stages.size()) + (d.stages.size() == 1 ? " stage" : " stages");
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const StreamStage& st = d.stages[i];
    s += i == 0 ? ": " : "; ";
    s += std::to_string(i + 1) + (st.name.empty() ? "" : " " + st.name) + " (";
    for (size_t k = 0; k < st.inputs.size(); ++k) {
      s += k ? ", " : "";
      s += stage_input_source_name(st.inputs[k].source);
      if (st.inputs[k].source == StageInputSource::kState)
        s += "<-out" + std::to_string(st.inputs[k].state_output);
    }
    s += " -> ";
    for (size_t k = 0; k < st.outputs.size(); ++k) {
      s += k ? ", " : "";
      s += stage_output_role_name(st.outputs[k]);
    }
    s += ")";
  }
  return s;
}

Status save_stream_file(const StreamDescription& d, const std::vector<const Model*>& stages, const std::string& path) {
  // Each stage as a validated plain image (normalized lifetimes, inferred dims).
  std::vector<Model> checked;
  checked.reserve(stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    checked.push_back(*stages[i]);
    Status v = checked.back().validate_and_infer_shapes();
    if (!v.is_ok()) return v.with_context("cannot save " + path + ": stage " + std::to_string(i + 1));
  }
  std::vector<const Model*> views;
  for (const Model& m : checked) views.push_back(&m);
  NN_RETURN_IF_ERROR(validate_stream(d, views).with_context("cannot save " + path));

  ByteWriter images;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Model& m : checked) {
    images.align(kConstantAlignment);
    std::vector<uint8_t> image = encode_model(m);
    ranges.emplace_back(images.size(), image.size());
    images.bytes().insert(images.bytes().end(), image.begin(), image.end());
  }
  ByteWriter stream;
  encode_stream(stream, d, ranges);

  ByteWriter file;
  file.bytes().resize(kHeaderSize + 2 * kSectionEntrySize, 0);
  file.align(8);
  const uint64_t stream_offset = file.size();
  file.bytes().insert(file.bytes().end(), stream.bytes().begin(), stream.bytes().end());
  file.align(kConstantAlignment);
  const uint64_t images_offset = file.size();
  file.bytes().insert(file.bytes().end(), images.bytes().begin(), images.bytes().end());
  // Both sections are required: a 1.0 reader refuses the file by name instead of
  // finding no OPERANDS section.
  finish_file(file.bytes(), kVersionMinorStream,
              {{kSectionStream, kSectionRequired, stream_offset, stream.size()},
               {kSectionStageModels, kSectionRequired, images_offset, images.size()}});
  return write_file_atomically(path, file.bytes());
}

Result<StreamFile> load_stream_buffer(std::span<const uint8_t> bytes) {
  const size_t padded = (bytes.size() + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
  void* buffer = std::aligned_alloc(kConstantAlignment, padded ? padded : kConstantAlignment);
  if (!buffer) return Status(StatusCode::kOutOfMemory, "cannot allocate " + std::to_string(bytes.size()) + " bytes");
  std::shared_ptr<const void> keepalive(buffer, [](const void* p) { std::free(const_cast<void*>(p)); });
  if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  return parse_stream({static_cast<const uint8_t*>(buffer), bytes.size()}, std::move(keepalive));
}

Result<StreamFile> load_stream_file(const std::string& path) {
  auto file = map_file(path);
  if (!file.is_ok()) return file.status();
  auto result = parse_stream(file->bytes, file->keepalive);
  if (!result.is_ok()) return result.status().with_context(path);
  return result;
}

bool is_stream_file(std::span<const uint8_t> bytes) {
  auto info = parse_file_info(bytes, /*require_checksum=*/false);
  if (!info.is_ok()) return false;
  for (const NnapiSectionInfo& s : info->sections)
    if (s.type == kSectionStream) return true;
  return false;
}

}  // namespace nn
