// nninspect: what a model file holds — the .nnapi header and sections, metadata, inputs
// and outputs, every operand and every operation with its scalar parameters — as text or
// JSON. A .tflite or .onnx file is converted in memory and shown the same way (no header).
// A streaming .nnapi file shows its framing, then each stage as a model.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "nn/format/nnapi_file.h"
#include "nn/format/stream_file.h"
#include "nn/import/import.h"

namespace {

using nlohmann::ordered_json;

const char* lifetime_name(nn::Lifetime l) {
  switch (l) {
    case nn::Lifetime::TEMPORARY:
      return "TEMPORARY";
    case nn::Lifetime::MODEL_INPUT:
      return "MODEL_INPUT";
    case nn::Lifetime::MODEL_OUTPUT:
      return "MODEL_OUTPUT";
    case nn::Lifetime::CONSTANT:
      return "CONSTANT";
    case nn::Lifetime::NO_VALUE:
      return "NO_VALUE";
  }
  return "?";
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

bool is_quantized(nn::OperandType t) {
  using T = nn::OperandType;
  return t == T::TENSOR_QUANT8_ASYMM || t == T::TENSOR_QUANT8_SYMM || t == T::TENSOR_QUANT8_ASYMM_SIGNED ||
         t == T::TENSOR_QUANT16_SYMM || t == T::TENSOR_QUANT16_ASYMM ||
         t == T::TENSOR_QUANT8_SYMM_PER_CHANNEL;
}

// The value of a constant scalar, or of a small INT32 tensor (shapes, axes, paddings):
// what a reader of the graph wants to see next to the op. Null when there is nothing short to show.
ordered_json constant_value(const nn::Operand& o) {
  if (!o.is_constant() || !o.data || o.length != o.byte_size()) return nullptr;
  using T = nn::OperandType;
  switch (o.type) {
    case T::INT32:
      return *o.as<int32_t>();
    case T::UINT32:
      return *o.as<uint32_t>();
    case T::FLOAT32:
      return *o.as<float>();
    case T::BOOL:
      return o.data[0] != 0;
    case T::TENSOR_INT32: {
      size_t n = o.length / 4;
      if (n > 16) return nullptr;
      ordered_json v = ordered_json::array();
      for (size_t i = 0; i < n; ++i) v.push_back(o.as<int32_t>()[i]);
      return v;
    }
    default:
      return nullptr;
  }
}

std::string layout_at(const std::vector<std::string>& layouts, size_t i) {
  return i < layouts.size() ? layouts[i] : std::string();
}

ordered_json io_json(const nn::Model& m, const std::vector<uint32_t>& ids,
                     const std::vector<std::string>& layouts) {
  ordered_json list = ordered_json::array();
  for (size_t k = 0; k < ids.size(); ++k) {
    const nn::Operand& o = m.operands[ids[k]];
    list.push_back({{"index", k},
                    {"operand", ids[k]},
                    {"name", o.name},
                    {"type", nn::operand_type_name(o.type)},
                    {"dims", o.dims},
                    {"source_layout", layout_at(layouts, k)}});
  }
  return list;
}

ordered_json to_json(const std::string& path, const nn::NnapiFileInfo* info, const nn::Model& m) {
  ordered_json j;
  j["file"] = path;
  if (info) {
    ordered_json f;
    f["version"] = std::to_string(info->version_major) + "." + std::to_string(info->version_minor);
    f["file_size"] = info->file_size;
    f["header_size"] = info->header_size;
    f["flags"] = hex32(info->flags);
    f["checksum"] = hex32(info->stored_checksum);
    f["checksum_ok"] = info->checksum_ok;
    ordered_json sections = ordered_json::array();
    for (const auto& s : info->sections)
      sections.push_back({{"type", s.type},
                          {"name", s.type_name},
                          {"flags", s.flags},
                          {"offset", s.offset},
                          {"length", s.length}});
    f["sections"] = sections;
    j["format"] = f;
  }
  const nn::Metadata& md = m.metadata;
  j["metadata"] = {{"task", md.task},
                   {"input_color", md.input_color},
                   {"input_mean", md.input_mean},
                   {"input_std", md.input_std},
                   {"output_meaning", md.output_meaning},
                   {"source_file", md.source_file},
                   {"source_sha256", md.source_sha256},
                   {"converter_version", md.converter_version},
                   {"input_source_layouts", md.input_source_layouts},
                   {"output_source_layouts", md.output_source_layouts},
                   {"extra", md.extra}};
  j["inputs"] = io_json(m, m.inputs, md.input_source_layouts);
  j["outputs"] = io_json(m, m.outputs, md.output_source_layouts);
  ordered_json operands = ordered_json::array();
  size_t constant_bytes = 0;
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const nn::Operand& o = m.operands[i];
    ordered_json e = {{"index", i},
                      {"type", nn::operand_type_name(o.type)},
                      {"dims", o.dims},
                      {"lifetime", lifetime_name(o.lifetime)},
                      {"name", o.name}};
    if (is_quantized(o.type)) {
      e["scale"] = o.scale;
      e["zero_point"] = o.zero_point;
    }
    if (!o.channel_quant.scales.empty()) {
      e["channel_dim"] = o.channel_quant.channel_dim;
      e["channel_scales"] = o.channel_quant.scales;
    }
    if (o.is_constant()) {
      e["bytes"] = o.length;
      constant_bytes += o.length;
      ordered_json v = constant_value(o);
      if (!v.is_null()) e["value"] = v;
    }
    operands.push_back(e);
  }
  j["operands"] = operands;
  ordered_json ops = ordered_json::array();
  for (size_t k = 0; k < m.operations.size(); ++k) {
    const nn::Operation& op = m.operations[k];
    ordered_json params = ordered_json::object();
    for (size_t p = 0; p < op.inputs.size(); ++p) {
      if (op.inputs[p] >= m.operands.size()) continue;
      ordered_json v = constant_value(m.operands[op.inputs[p]]);
      if (!v.is_null()) params[std::to_string(p)] = v;
    }
    ops.push_back({{"index", k},
                   {"type", nn::operation_type_name(op.type)},
                   {"inputs", op.inputs},
                   {"outputs", op.outputs},
                   {"params", params}});
  }
  j["operations"] = ops;
  j["summary"] = {{"operations", m.operations.size()},
                  {"operands", m.operands.size()},
                  {"constant_bytes", constant_bytes},
                  {"ops", m.op_summary()}};
  return j;
}

std::string join_floats(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

std::string join_strings(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
  return s + "]";
}

void print_format(const ordered_json& j) {
  std::printf("file: %s\n", j["file"].get<std::string>().c_str());
  if (j.contains("format")) {
    const auto& f = j["format"];
    std::printf("format: .nnapi %s, %" PRIu64 " bytes, flags %s, checksum %s %s\n",
                f["version"].get<std::string>().c_str(), f["file_size"].get<uint64_t>(),
                f["flags"].get<std::string>().c_str(), f["checksum"].get<std::string>().c_str(),
                f["checksum_ok"].get<bool>() ? "ok" : "MISMATCH");
    for (const auto& s : f["sections"])
      std::printf("  section %-10s offset %8" PRIu64 "  length %9" PRIu64 "\n",
                  s["name"].get<std::string>().c_str(), s["offset"].get<uint64_t>(),
                  s["length"].get<uint64_t>());
  }
}

void print_model(const ordered_json& j) {
  const auto& md = j["metadata"];
  std::printf("metadata:\n");
  for (const char* key :
       {"task", "input_color", "output_meaning", "source_file", "source_sha256", "converter_version"})
    std::printf("  %-22s %s\n", key, md[key].get<std::string>().c_str());
  std::printf("  %-22s %s\n", "input_mean", join_floats(md["input_mean"].get<std::vector<float>>()).c_str());
  std::printf("  %-22s %s\n", "input_std", join_floats(md["input_std"].get<std::vector<float>>()).c_str());
  std::printf("  %-22s %s\n", "input_source_layouts",
              join_strings(md["input_source_layouts"].get<std::vector<std::string>>()).c_str());
  std::printf("  %-22s %s\n", "output_source_layouts",
              join_strings(md["output_source_layouts"].get<std::vector<std::string>>()).c_str());
  for (const auto& [key, value] : md["extra"].items())
    std::printf("  extra.%-16s %s\n", key.c_str(), value.get<std::string>().c_str());
  for (const char* which : {"inputs", "outputs"}) {
    std::printf("%s:\n", which);
    for (const auto& io : j[which]) {
      std::string layout = io["source_layout"].get<std::string>();
      std::printf("  %zu: operand %u '%s' %s %s%s\n", io["index"].get<size_t>(),
                  io["operand"].get<uint32_t>(), io["name"].get<std::string>().c_str(),
                  io["type"].get<std::string>().c_str(), io["dims"].dump().c_str(),
                  layout.empty() ? "" : (" source layout " + layout).c_str());
    }
  }
  std::printf("operands (%zu):\n", j["operands"].size());
  for (const auto& o : j["operands"]) {
    std::string extra;
    if (o.contains("scale"))
      extra += " scale " + std::to_string(o["scale"].get<float>()) + " zero_point " +
               std::to_string(o["zero_point"].get<int32_t>());
    if (o.contains("channel_scales"))
      extra += " per-channel dim " + std::to_string(o["channel_dim"].get<uint32_t>()) + " x" +
               std::to_string(o["channel_scales"].size());
    if (o.contains("bytes")) extra += " " + std::to_string(o["bytes"].get<size_t>()) + " bytes";
    if (o.contains("value")) extra += " = " + o["value"].dump();
    std::string name = o["name"].get<std::string>();
    if (!name.empty()) extra = " '" + name + "'" + extra;
    std::printf("  #%-4zu %-30s %-12s%s\n", o["index"].get<size_t>(),
                (o["type"].get<std::string>() + " " + o["dims"].dump()).c_str(),
                o["lifetime"].get<std::string>().c_str(), extra.c_str());
  }
  std::printf("operations (%zu):\n", j["operations"].size());
  for (const auto& op : j["operations"]) {
    std::string ins;
    for (size_t p = 0; p < op["inputs"].size(); ++p) {
      if (p) ins += ", ";
      ins += std::to_string(op["inputs"][p].get<uint32_t>());
      std::string key = std::to_string(p);
      if (op["params"].contains(key)) ins += "=" + op["params"][key].dump();
    }
    std::printf("  #%-4zu %-22s in [%s] out %s\n", op["index"].get<size_t>(),
                op["type"].get<std::string>().c_str(), ins.c_str(), op["outputs"].dump().c_str());
  }
  const auto& s = j["summary"];
  std::printf("summary: %zu operations, %zu operands, %zu constant bytes\n  %s\n",
              s["operations"].get<size_t>(), s["operands"].get<size_t>(), s["constant_bytes"].get<size_t>(),
              s["ops"].get<std::string>().c_str());
}

void print_text(const ordered_json& j) {
  print_format(j);
  print_model(j);
}

// A streaming file: the framing, and per stage what feeds each input and what each output
// means, then the stage's model as for a plain file.
ordered_json stream_json(const std::string& path, const nn::NnapiFileInfo& info, const nn::StreamFile& f) {
  ordered_json j = to_json(path, &info, *f.stages[0]);
  for (const char* key : {"metadata", "inputs", "outputs", "operands", "operations", "summary"}) j.erase(key);
  const nn::StreamDescription& d = f.stream;
  j["stream"] = {{"description", d.description},
                 {"sample_rate", d.sample_rate},
                 {"block", d.block},
                 {"hop", d.hop},
                 {"latency_samples", d.latency_samples()},
                 {"analysis_window", nn::stream_window_name(d.analysis_window)},
                 {"synthesis_window", nn::stream_window_name(d.synthesis_window)},
                 {"output_gain", d.output_gain},
                 {"summary", nn::stream_summary(d)}};
  ordered_json stages = ordered_json::array();
  for (size_t i = 0; i < f.stages.size(); ++i) {
    const nn::StreamStage& st = d.stages[i];
    ordered_json ins = ordered_json::array(), outs = ordered_json::array();
    for (const auto& b : st.inputs) {
      ordered_json e = {{"source", nn::stage_input_source_name(b.source)}};
      if (b.source == nn::StageInputSource::kState) e["state_output"] = b.state_output;
      ins.push_back(e);
    }
    for (auto r : st.outputs) outs.push_back(nn::stage_output_role_name(r));
    ordered_json model = to_json(path, nullptr, *f.stages[i]);
    model.erase("file");
    stages.push_back({{"index", i + 1}, {"name", st.name}, {"inputs", ins}, {"outputs", outs}, {"model", model}});
  }
  j["stages"] = stages;
  return j;
}

void print_stream(const ordered_json& j) {
  print_format(j);
  const auto& s = j["stream"];
  std::printf("stream: %s\n", s["summary"].get<std::string>().c_str());
  if (!s["description"].get<std::string>().empty())
    std::printf("  %s\n", s["description"].get<std::string>().c_str());
  for (const auto& st : j["stages"]) {
    std::printf("\n== stage %zu '%s'\n", st["index"].get<size_t>(), st["name"].get<std::string>().c_str());
    for (size_t k = 0; k < st["inputs"].size(); ++k) {
      const auto& in = st["inputs"][k];
      const auto& io = st["model"]["inputs"][k];
      std::printf("  input %zu '%s' %s <- %s%s\n", k, io["name"].get<std::string>().c_str(), io["dims"].dump().c_str(),
                  in["source"].get<std::string>().c_str(),
                  in.contains("state_output")
                      ? (" (output " + std::to_string(in["state_output"].get<uint32_t>()) + " of the previous hop)").c_str()
                      : "");
    }
    for (size_t k = 0; k < st["outputs"].size(); ++k) {
      const auto& io = st["model"]["outputs"][k];
      std::printf("  output %zu '%s' %s -> %s\n", k, io["name"].get<std::string>().c_str(), io["dims"].dump().c_str(),
                  st["outputs"][k].get<std::string>().c_str());
    }
    print_model(st["model"]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "nninspect: show what a model file holds: the .nnapi header and sections (version, size, checksum),\n"
      "metadata, inputs/outputs with dims and source layouts, every operand and operation with its\n"
      "scalar parameters, and an op summary. .tflite and .onnx files are converted in memory first.\n"
      "Example: nninspect assets/models/selfie_segmentation.nnapi --json"};
  std::string path;
  bool json = false;
  int indent = 2;
  app.add_option("model", path, "model file (.nnapi, .tflite or .onnx)")->required()->check(CLI::ExistingFile);
  app.add_flag("--json", json, "print JSON instead of text");
  app.add_option("--indent", indent, "JSON indent (-1: one line)");
  NN_PARSE_COMMAND_LINE(app, argc, argv);

  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  nn::NnapiFileInfo info;
  bool have_info = false;
  if (ext == ".nnapi") {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
      auto r = nn::read_nnapi_file_info(bytes);
      if (r.is_ok()) {
        info = *r;
        have_info = true;
      }
    }
  }
  bool stream = false;
  for (const auto& sec : info.sections) stream |= have_info && sec.type_name == "STREAM";
  if (stream) {
    auto file = nn::load_stream_file(path);
    if (!file.is_ok()) {
      std::fprintf(stderr, "nninspect: %s\n", nn::tools::with_path(path, file.status().to_string()).c_str());
      return nn::tools::kExitFailed;
    }
    ordered_json j = stream_json(path, info, *file);
    if (json)
      std::printf("%s\n", j.dump(indent).c_str());
    else
      print_stream(j);
    return 0;
  }
  auto model = nn::load_model(path);
  if (!model.is_ok()) {
    std::fprintf(stderr, "nninspect: %s\n", nn::tools::with_path(path, model.status().to_string()).c_str());
    if (have_info && !info.checksum_ok)
      std::fprintf(stderr, "nninspect: header checksum %s, computed %s\n",
                   hex32(info.stored_checksum).c_str(), hex32(info.computed_checksum).c_str());
    return nn::tools::kExitFailed;
  }
  ordered_json j = to_json(path, have_info ? &info : nullptr, **model);
  if (json)
    std::printf("%s\n", j.dump(indent).c_str());
  else
    print_text(j);
  return 0;
}
