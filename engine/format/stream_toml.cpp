// A stream description file (assets/streams/*.toml) -> StreamDescription. The keys are
// documented in SPEC.md ("Streaming models"); unknown keys are refused so a typo is not
// silently a default.
#include <set>

#include <toml++/toml.h>

#include "nn/format/stream_file.h"

namespace nn {

namespace {

Status bad(const std::string& path, const std::string& message) {
  return {StatusCode::kInvalidArgument, path + ": " + message};
}

Result<StreamWindow> window_from(const std::string& path, const std::string& key, const std::string& v) {
  if (v == "none") return StreamWindow::kNone;
  if (v == "hann") return StreamWindow::kHann;
  if (v == "sqrt_hann") return StreamWindow::kSqrtHann;
  return bad(path, key + " = \"" + v + "\": expected none, hann or sqrt_hann");
}

Status check_keys(const std::string& path, const toml::table& t, const std::set<std::string>& allowed,
                  const std::string& where) {
  for (const auto& [k, v] : t) {
    (void)v;
    if (!allowed.count(std::string(k.str())))
      return bad(path, where + "unknown key '" + std::string(k.str()) + "'");
  }
  return Status::ok();
}

Result<uint32_t> positive(const std::string& path, const toml::table& t, const std::string& key) {
  auto v = t[key].value<int64_t>();
  if (!v) return bad(path, "missing integer key '" + key + "'");
  if (*v < 1 || *v > (int64_t{1} << 30)) return bad(path, key + " = " + std::to_string(*v) + " is out of range");
  return static_cast<uint32_t>(*v);
}

}  // namespace

Result<StreamDescription> parse_stream_toml(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return bad(path, "line " + std::to_string(where.line) + ": " + std::string(e.description()));
  }
  NN_RETURN_IF_ERROR(check_keys(path, root,
                                {"description", "sample_rate", "block", "hop", "analysis_window",
                                 "synthesis_window", "output_gain", "stage"},
                                ""));
  StreamDescription d;
  d.description = root["description"].value_or(std::string());
  NN_ASSIGN_OR_RETURN(d.sample_rate, positive(path, root, "sample_rate"));
  NN_ASSIGN_OR_RETURN(d.block, positive(path, root, "block"));
  NN_ASSIGN_OR_RETURN(d.hop, positive(path, root, "hop"));
  NN_ASSIGN_OR_RETURN(d.analysis_window,
                      window_from(path, "analysis_window", root["analysis_window"].value_or(std::string("none"))));
  NN_ASSIGN_OR_RETURN(d.synthesis_window,
                      window_from(path, "synthesis_window", root["synthesis_window"].value_or(std::string("none"))));
  d.output_gain = static_cast<float>(root["output_gain"].value_or(1.0));
  const toml::array* stages = root["stage"].as_array();
  if (!stages || stages->empty()) return bad(path, "no [[stage]] tables");
  for (size_t i = 0; i < stages->size(); ++i) {
    const std::string where = "stage " + std::to_string(i + 1) + ": ";
    const toml::table* t = stages->get(i)->as_table();
    if (!t) return bad(path, where + "not a table");
    NN_RETURN_IF_ERROR(check_keys(path, *t, {"name", "inputs", "outputs"}, where));
    StreamStage s;
    s.name = (*t)["name"].value_or(std::string());
    const toml::array* ins = (*t)["inputs"].as_array();
    const toml::array* outs = (*t)["outputs"].as_array();
    if (!ins || !outs) return bad(path, where + "needs inputs = [...] and outputs = [...]");
    // Inputs: "rfft_magnitude", "time_block", "masked_time_block", or "state:K" (fed by
    // this stage's output K).
    for (size_t k = 0; k < ins->size(); ++k) {
      auto v = ins->get(k)->value<std::string>();
      if (!v) return bad(path, where + "input " + std::to_string(k) + " is not a string");
      StageInputBinding b;
      if (*v == "rfft_magnitude") {
        b.source = StageInputSource::kRfftMagnitude;
      } else if (*v == "time_block") {
        b.source = StageInputSource::kTimeBlock;
      } else if (*v == "masked_time_block") {
        b.source = StageInputSource::kMaskedTimeBlock;
      } else if (v->rfind("state:", 0) == 0 && v->size() > 6 && v->size() < 12 &&
                 v->find_first_not_of("0123456789", 6) == std::string::npos) {
        b.source = StageInputSource::kState;
        b.state_output = static_cast<uint32_t>(std::stoul(v->substr(6)));
      } else {
        return bad(path, where + "input " + std::to_string(k) + " \"" + *v +
                             "\": expected rfft_magnitude, time_block, masked_time_block or state:<output index>");
      }
      s.inputs.push_back(b);
    }
    for (size_t k = 0; k < outs->size(); ++k) {
      auto v = outs->get(k)->value<std::string>();
      if (!v) return bad(path, where + "output " + std::to_string(k) + " is not a string");
      if (*v == "spectral_mask") s.outputs.push_back(StageOutputRole::kSpectralMask);
      else if (*v == "time_block") s.outputs.push_back(StageOutputRole::kTimeBlock);
      else if (*v == "state") s.outputs.push_back(StageOutputRole::kState);
      else if (*v == "unused") s.outputs.push_back(StageOutputRole::kUnused);
      else
        return bad(path, where + "output " + std::to_string(k) + " \"" + *v +
                             "\": expected spectral_mask, time_block, state or unused");
    }
    d.stages.push_back(std::move(s));
  }
  return d;
}

}  // namespace nn
