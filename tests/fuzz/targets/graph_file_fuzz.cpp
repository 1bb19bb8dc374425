// libFuzzer target: the graph-file parser (TOML, then the static checks) and what nngraph
// does next with a graph that parsed: resolve the parameters (defaults, then every allowed
// value of each parameter in turn) and substitute ${...} in every property, pad property
// and the latency budget of the nodes that are active.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nn/graph/graph_file.h"

namespace {

void expand(const nn::graph::GraphFile& graph, const nn::graph::Params& given) {
  auto resolved = nn::graph::resolve_params(graph, given);
  if (!resolved.is_ok()) return;
  const auto& params = resolved.value();
  (void)nn::graph::substitute(graph.latency_budget, params, graph);
  for (const auto& node : graph.nodes) {
    if (!node.active(params)) continue;
    for (const auto& prop : node.props) (void)nn::graph::substitute(prop.value, params, graph);
    for (const auto& [pad, props] : node.pads)
      for (const auto& prop : props) (void)nn::graph::substitute(prop.value, params, graph);
    for (const auto& from : node.from) (void)graph.node(from);
    (void)graph.where(node.line);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = nn::graph::GraphFile::parse(text, "fuzz.toml");
  if (!graph.is_ok()) return 0;
  const auto& g = graph.value();
  expand(g, {});
  // Each allowed value of each parameter (bounded: a hostile file may list thousands).
  size_t tried = 0;
  for (const auto& p : g.params)
    for (const auto& value : p.allowed) {
      if (++tried > 64) return 0;
      expand(g, {{p.name, value}});
    }
  return 0;
}
