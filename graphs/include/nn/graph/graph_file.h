// A pipeline graph file: a GStreamer pipeline written as named nodes with declared
// parameters, a latency budget and a reason for every node. See "Build your own camera app" in README.md.
//
//   name = "background-blur"
//   description = "People stay sharp, the background is blurred"
//   latency-budget-ms = 33
//
//   [[param]]
//   name = "source"
//   default = "file"
//   allowed = ["camera", "file", "test"]
//   description = "Where frames come from"
//
//   [[node]]
//   name = "test"
//   when = { source = "test" }      # only when the parameter says so
//   element = "videotestsrc"
//   props = { is-live = true }
//   why = "A live synthetic source for machines without a camera."
//
// Nodes link in file order to the previous node that is part of the graph (elements
// without sink pads start a new chain); `from = "tee"` or `from = ["a", "b"]` links
// explicitly. Property values may use ${param} and the built-ins ${assets},
// ${graph_dir}. This header knows nothing of GStreamer: parsing and the static checks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/status.h"

namespace nn::graph {

using Params = std::map<std::string, std::string>;

// A property (or pad property) value as written, before ${param} substitution.
struct PropertyDecl {
  std::string name;
  std::string value;
  int line = 0;
};

struct ParamDecl {
  std::string name;
  std::optional<std::string> default_value;  // none: the user must pass it
  std::string description;
  std::vector<std::string> allowed;  // empty: any value
  int line = 0;
};

struct NodeDecl {
  std::string name;
  std::string element;  // factory name, e.g. "videoconvert"
  std::string why;      // required: why the node is there
  std::vector<PropertyDecl> props;
  // Parameter name -> values for which the node is part of the graph (all keys must match).
  std::map<std::string, std::vector<std::string>> when;
  std::vector<std::string> from;  // explicit upstream nodes; empty: the previous active node
  int from_line = 0;
  // Upstream node -> this node's sink pad it links to, by name ({ node = "q", pad =
  // "background" } in 'from'): request pads that automatic linking never picks.
  std::map<std::string, std::string> from_pads;
  // Pad name (e.g. "sink_0", known after linking) -> properties to set on that pad.
  std::map<std::string, std::vector<PropertyDecl>> pads;
  // When this node's output ends (EOS), the whole graph ends: a main stream mixed with a
  // longer secondary one (a background video) decides when the result is complete.
  bool ends_graph = false;
  // QoS events (sinks telling upstream they are late) stop at this node's input: after a
  // tee, a late window must not make the decoder thin out what a file branch records.
  bool stop_qos = false;
  int line = 0;

  bool active(const Params& resolved) const;
};

struct GraphFile {
  std::string path;  // as loaded ("<string>" for parse())
  std::string name;
  std::string description;
  std::string latency_budget;  // milliseconds, may be "${param}"; empty: element defaults
  int latency_budget_line = 0;
  std::vector<ParamDecl> params;
  std::vector<NodeDecl> nodes;

  // Reads and statically checks a graph file. Errors name the file, the line and the cause,
  // one per line: "graphs/blur.toml:42: node 'seg': unknown parameter ${modle}".
  static Result<GraphFile> load(const std::string& path);
  static Result<GraphFile> parse(std::string_view text, const std::string& origin);

  const ParamDecl* param(const std::string& name) const;
  const NodeDecl* node(const std::string& name) const;
  std::string where(int line) const;  // "path:line"
  std::string directory() const;
};

// Values for every declared parameter: the given ones (checked against `allowed`),
// defaults for the rest. Unknown names and missing required values are errors.
Result<Params> resolve_params(const GraphFile& graph, const Params& given);

// Parses "name=value" words; anything without '=' is an error.
Result<Params> parse_assignments(const std::vector<std::string>& words);

// Replaces ${param} and the built-ins (${assets}, ${graph_dir}) in text. An unknown name
// is an error that says which names exist.
Result<std::string> substitute(const std::string& text, const Params& resolved, const GraphFile& graph);

// Where graphs are looked up by name, in order: $NN_GRAPH_PATH (colon separated), the
// installed graphs directory, the source tree's graphs/ directory.
std::vector<std::string> graph_search_dirs();
// A path to an existing file, or a graph name ("background-blur" or "background-blur.toml")
// found in graph_search_dirs().
Result<std::string> find_graph(const std::string& name_or_path);
// Every *.toml in the search dirs (first one wins for a name).
std::vector<std::string> list_graph_files();

// The assets directory: $NN_ASSETS_DIR, else the one compiled in.
std::string assets_dir();

}  // namespace nn::graph
