// Graph files: TOML -> GraphFile, with the static checks (fields, names, parameters).
#include "nn/graph/graph_file.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#ifndef NN_ASSETS_DIR
#define NN_ASSETS_DIR ""
#endif
#ifndef NN_GRAPHS_INSTALL_DIR
#define NN_GRAPHS_INSTALL_DIR ""
#endif
#ifndef NN_GRAPHS_SOURCE_DIR
#define NN_GRAPHS_SOURCE_DIR ""
#endif

namespace nn::graph {
namespace fs = std::filesystem;

namespace {

const char* const kBuiltins[] = {"assets", "graph_dir"};

bool is_builtin(const std::string& name) {
  return std::find(std::begin(kBuiltins), std::end(kBuiltins), name) != std::end(kBuiltins);
}

int line_of(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// TOML scalars as GStreamer would read them from a launch line.
std::optional<std::string> scalar_text(const toml::node& n) {
  if (auto s = n.as_string()) return s->get();
  if (auto i = n.as_integer()) return std::to_string(i->get());
  if (auto b = n.as_boolean()) return std::string(b->get() ? "true" : "false");
  if (auto f = n.as_floating_point()) {
    std::ostringstream os;
    os.precision(17);
    os << f->get();
    return os.str();
  }
  return std::nullopt;
}

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date/time";
  }
}

class Parser {
 public:
  explicit Parser(GraphFile& g) : g_(g) {}

  void error(int line, const std::string& msg) { errors_.push_back(g_.where(line) + ": " + msg); }
  std::vector<std::string>& errors() { return errors_; }

  std::optional<std::string> string_field(const toml::table& t, const char* key, const std::string& ctx,
                                          int line, bool required) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) error(line, ctx + "missing required field '" + key + "'");
      return std::nullopt;
    }
    if (auto s = n->as_string()) return s->get();
    error(line_of(*n), ctx + "'" + key + "' must be a string, got " + type_name(*n));
    return std::nullopt;
  }

  void unknown_keys(const toml::table& t, std::initializer_list<const char*> known, const std::string& ctx) {
    for (auto&& [k, v] : t) {
      const std::string_view name = k.str();  // clang < 16 cannot capture a structured binding
      const bool ok = std::any_of(known.begin(), known.end(), [&](const char* s) { return name == s; });
      if (!ok)
        error(line_of(v), ctx + "unknown field '" + std::string(k.str()) + "' (fields: " +
                              join(std::vector<std::string>(known.begin(), known.end())) + ")");
    }
  }

  std::vector<PropertyDecl> props(const toml::node& n, const std::string& ctx) {
    std::vector<PropertyDecl> out;
    const toml::table* t = n.as_table();
    if (!t) {
      error(line_of(n), ctx + "properties must be a table, e.g. { name = value }");
      return out;
    }
    for (auto&& [k, v] : *t) {
      auto text = scalar_text(v);
      if (!text) {
        error(line_of(v), ctx + "property '" + std::string(k.str()) +
                              "' must be a string, number or boolean, got " + type_name(v));
        continue;
      }
      int line = line_of(v);
      if (line == 0) line = static_cast<int>(k.source().begin.line);
      out.push_back({std::string(k.str()), *text, line});
    }
    // toml++ keeps tables sorted by key; set properties in the order they were written.
    std::stable_sort(out.begin(), out.end(),
                     [](const PropertyDecl& a, const PropertyDecl& b) { return a.line < b.line; });
    return out;
  }

  void parse(const toml::table& root) {
    unknown_keys(root, {"name", "description", "latency-budget-ms", "param", "node"}, "");
    g_.name = string_field(root, "name", "", 1, true).value_or("");
    g_.description = string_field(root, "description", "", 1, true).value_or("");
    if (const toml::node* b = root.get("latency-budget-ms")) {
      g_.latency_budget_line = line_of(*b);
      if (auto i = b->as_integer()) {
        if (i->get() <= 0 || i->get() > 10000)
          error(line_of(*b),
                "latency-budget-ms must be 1..10000 milliseconds, got " + std::to_string(i->get()));
        else
          g_.latency_budget = std::to_string(i->get());
      } else if (auto s = b->as_string()) {
        g_.latency_budget = s->get();
      } else {
        error(line_of(*b),
              std::string("latency-budget-ms must be an integer or \"${param}\", got ") + type_name(*b));
      }
    }
    if (const toml::node* p = root.get("param")) {
      if (const toml::array* arr = p->as_array()) {
        for (const toml::node& item : *arr) parse_param(item);
      } else {
        error(line_of(*p), "'param' must be an array of tables: write each as [[param]]");
      }
    }
    if (const toml::node* n = root.get("node")) {
      if (const toml::array* arr = n->as_array()) {
        for (const toml::node& item : *arr) parse_node(item);
      } else {
        error(line_of(*n), "'node' must be an array of tables: write each as [[node]]");
      }
    }
    if (g_.nodes.empty() && errors_.empty()) error(1, "the graph has no [[node]]");
    check_references();
  }

  void parse_param(const toml::node& item) {
    const toml::table* t = item.as_table();
    const int line = line_of(item);
    if (!t) {
      error(line, "each [[param]] must be a table");
      return;
    }
    ParamDecl p;
    p.line = line;
    p.name = string_field(*t, "name", "param: ", line, true).value_or("");
    const std::string ctx = "param '" + p.name + "': ";
    unknown_keys(*t, {"name", "default", "description", "allowed"}, ctx);
    if (const toml::node* d = t->get("default")) {
      p.default_value = scalar_text(*d);
      if (!p.default_value) error(line_of(*d), ctx + "default must be a string, number or boolean");
    }
    p.description = string_field(*t, "description", ctx, line, true).value_or("");
    if (const toml::node* a = t->get("allowed")) {
      const toml::array* arr = a->as_array();
      if (!arr) error(line_of(*a), ctx + "allowed must be an array of values");
      if (arr)
        for (const toml::node& v : *arr) {
          if (auto s = scalar_text(v))
            p.allowed.push_back(*s);
          else
            error(line_of(v), ctx + "allowed values must be strings, numbers or booleans");
        }
      if (p.default_value && !p.allowed.empty() &&
          std::find(p.allowed.begin(), p.allowed.end(), *p.default_value) == p.allowed.end())
        error(line_of(*a), ctx + "default '" + *p.default_value + "' is not one of the allowed values (" +
                               join(p.allowed) + ")");
    }
    if (!p.name.empty()) {
      if (is_builtin(p.name)) error(line, ctx + "the name is reserved for a built-in (${" + p.name + "})");
      if (g_.param(p.name)) error(line, ctx + "declared twice");
    }
    g_.params.push_back(std::move(p));
  }

  void parse_node(const toml::node& item) {
    const toml::table* t = item.as_table();
    const int line = line_of(item);
    if (!t) {
      error(line, "each [[node]] must be a table");
      return;
    }
    NodeDecl n;
    n.line = line;
    n.name = string_field(*t, "name", "node: ", line, true).value_or("");
    const std::string ctx = "node '" + n.name + "': ";
    unknown_keys(
        *t, {"name", "element", "caps", "props", "when", "from", "pads", "ends-graph", "stop-qos", "why"},
        ctx);
    auto element = string_field(*t, "element", ctx, line, false);
    auto caps = string_field(*t, "caps", ctx, line, false);
    if (element && caps) error(line, ctx + "give either 'element' or 'caps' (a capsfilter), not both");
    if (!element && !caps) error(line, ctx + "missing required field 'element' (or 'caps' for a capsfilter)");
    if (element) n.element = *element;
    if (caps) {
      n.element = "capsfilter";
      n.props.push_back({"caps", *caps, line_of(*t->get("caps"))});
    }
    n.why = string_field(*t, "why", ctx, line, true).value_or("");
    if (t->get("why") && n.why.find_first_not_of(" \t\n") == std::string::npos)
      error(line, ctx + "'why' is empty: say why the node is there");
    if (const toml::node* p = t->get("props")) {
      auto more = props(*p, ctx);
      n.props.insert(n.props.end(), more.begin(), more.end());
    }
    if (const toml::node* w = t->get("when")) {
      if (const toml::table* wt = w->as_table()) {
        for (auto&& [k, v] : *wt) {
          std::vector<std::string> values;
          if (auto s = scalar_text(v))
            values.push_back(*s);
          else if (const toml::array* arr = v.as_array())
            for (const toml::node& x : *arr)
              if (auto s2 = scalar_text(x)) values.push_back(*s2);
          if (values.empty())
            error(line_of(v), ctx + "when." + std::string(k.str()) + " needs a value or a list of values");
          n.when[std::string(k.str())] = values;
          when_lines_[n.name + "\n" + std::string(k.str())] = line_of(v) ? line_of(v) : line_of(*w);
        }
      } else {
        error(line_of(*w), ctx + "'when' must be a table, e.g. when = { source = \"file\" }");
      }
    }
    if (const toml::node* f = t->get("from")) {
      n.from_line = line_of(*f);
      if (auto s = f->as_string())
        n.from.push_back(s->get());
      else if (const toml::array* arr = f->as_array()) {
        for (const toml::node& x : *arr)
          if (auto s2 = x.as_string()) {
            n.from.push_back(s2->get());
          } else if (const toml::table* link = x.as_table()) {
            // { node = "bg-queue", pad = "background" }: into that pad, by name.
            const auto* node = link->get_as<std::string>("node");
            const auto* pad = link->get_as<std::string>("pad");
            unknown_keys(*link, {"node", "pad"}, ctx + "'from' entry: ");
            if (!node || !pad || pad->get().empty()) {
              error(line_of(x), ctx + "'from' entry: a table needs node = \"name\" and pad = \"sink pad\"");
              continue;
            }
            n.from.push_back(node->get());
            n.from_pads[node->get()] = pad->get();
          } else {
            error(line_of(x),
                  ctx + "'from' lists node names (strings) or { node = \"name\", pad = \"sink pad\" }");
          }
      } else {
        error(line_of(*f), ctx + "'from' must be a node name or a list of node names");
      }
    }
    if (const toml::node* e = t->get("ends-graph")) {
      if (auto b = e->as_boolean())
        n.ends_graph = b->get();
      else
        error(line_of(*e), ctx + "'ends-graph' must be true or false");
    }
    if (const toml::node* e = t->get("stop-qos")) {
      if (auto b = e->as_boolean())
        n.stop_qos = b->get();
      else
        error(line_of(*e), ctx + "'stop-qos' must be true or false");
    }
    if (const toml::node* p = t->get("pads")) {
      if (const toml::table* pt = p->as_table()) {
        for (auto&& [k, v] : *pt)
          n.pads[std::string(k.str())] = props(v, ctx + "pad '" + std::string(k.str()) + "': ");
      } else {
        error(line_of(*p), ctx + "'pads' must be a table of pad name -> { property = value }");
      }
    }
    if (!n.name.empty() && g_.node(n.name)) error(line, ctx + "a node of this name is declared twice");
    g_.nodes.push_back(std::move(n));
  }

  void check_text(const std::string& text, int line, const std::string& ctx) {
    size_t pos = 0;
    while ((pos = text.find("${", pos)) != std::string::npos) {
      const size_t end = text.find('}', pos);
      if (end == std::string::npos) {
        error(line, ctx + "unterminated ${ in \"" + text + "\"");
        return;
      }
      const std::string name = text.substr(pos + 2, end - pos - 2);
      if (!is_builtin(name) && !g_.param(name))
        error(line, ctx + "unknown parameter ${" + name + "}" + declared());
      pos = end + 1;
    }
  }

  std::string declared() const {
    std::vector<std::string> names;
    for (const auto& p : g_.params) names.push_back(p.name);
    for (const char* b : kBuiltins) names.push_back(b);
    return " (declared: " + join(names) + ")";
  }

  void check_references() {
    check_text(g_.latency_budget, g_.latency_budget_line, "latency-budget-ms: ");
    for (const auto& p : g_.params)
      if (p.default_value) check_text(*p.default_value, p.line, "param '" + p.name + "': default: ");
    for (const auto& n : g_.nodes) {
      const std::string ctx = "node '" + n.name + "': ";
      for (const auto& pr : n.props) check_text(pr.value, pr.line, ctx + "property '" + pr.name + "': ");
      for (const auto& [pad, list] : n.pads)
        for (const auto& pr : list)
          check_text(pr.value, pr.line, ctx + "pad '" + pad + "' property '" + pr.name + "': ");
      for (const auto& [param, values] : n.when) {
        const int line = when_lines_[n.name + "\n" + param];
        const ParamDecl* p = g_.param(param);
        if (!p) {
          error(line, ctx + "when: unknown parameter '" + param + "'" + declared());
          continue;
        }
        if (p->allowed.empty()) continue;
        for (const auto& v : values)
          if (std::find(p->allowed.begin(), p->allowed.end(), v) == p->allowed.end())
            error(line, ctx + "when: '" + v + "' is not an allowed value of '" + param + "' (" +
                            join(p->allowed) + ")");
      }
      for (const auto& f : n.from) {
        if (f == n.name)
          error(n.from_line, ctx + "links from itself");
        else if (!g_.node(f))
          error(n.from_line, ctx + "links from unknown node '" + f + "'");
      }
    }
  }

 private:
  GraphFile& g_;
  std::vector<std::string> errors_;
  std::map<std::string, int> when_lines_;
};

}  // namespace

bool NodeDecl::active(const Params& resolved) const {
  for (const auto& [param, values] : when) {
    auto it = resolved.find(param);
    if (it == resolved.end()) return false;
    if (std::find(values.begin(), values.end(), it->second) == values.end()) return false;
  }
  return true;
}

const ParamDecl* GraphFile::param(const std::string& n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

const NodeDecl* GraphFile::node(const std::string& n) const {
  for (const auto& x : nodes)
    if (x.name == n) return &x;
  return nullptr;
}

std::string GraphFile::where(int line) const {
  return path + ":" + std::to_string(line > 0 ? line : 1);
}

std::string GraphFile::directory() const {
  const fs::path p(path);
  return p.has_parent_path() ? fs::absolute(p).parent_path().string() : fs::current_path().string();
}

Result<GraphFile> GraphFile::parse(std::string_view text, const std::string& origin) {
  GraphFile g;
  g.path = origin;
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return Status(StatusCode::kInvalidArgument,
                  g.where(static_cast<int>(e.source().begin.line)) + ": " + std::string(e.description()));
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, g.where(1) + ": " + e.what());
  }
  Parser parser(g);
  parser.parse(root);
  if (!parser.errors().empty()) return Status(StatusCode::kInvalidArgument, join(parser.errors(), "\n"));
  return g;
}

Result<GraphFile> GraphFile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, path + ": cannot open graph file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

Result<Params> parse_assignments(const std::vector<std::string>& words) {
  Params out;
  for (const auto& w : words) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status(StatusCode::kInvalidArgument,
                    "'" + w + "' is not a parameter assignment: write name=value");
    out[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return out;
}

Result<Params> resolve_params(const GraphFile& graph, const Params& given) {
  std::vector<std::string> errors;
  std::vector<std::string> names;
  for (const auto& p : graph.params) names.push_back(p.name);
  for (const auto& [k, v] : given)
    if (!graph.param(k))
      errors.push_back(graph.path + ": unknown parameter '" + k + "'" +
                       (names.empty() ? " (the graph declares none)" : " (declared: " + join(names) + ")"));
  Params out;
  for (const auto& p : graph.params) {
    auto it = given.find(p.name);
    if (it != given.end()) {
      if (!p.allowed.empty() &&
          std::find(p.allowed.begin(), p.allowed.end(), it->second) == p.allowed.end()) {
        errors.push_back(graph.where(p.line) + ": parameter '" + p.name + "': '" + it->second +
                         "' is not allowed (allowed: " + join(p.allowed) + ")");
        continue;
      }
      out[p.name] = it->second;
    } else if (p.default_value) {
      out[p.name] = *p.default_value;
    } else {
      errors.push_back(graph.where(p.line) + ": missing parameter '" + p.name + "' (no default): pass " +
                       p.name + "=VALUE (" + p.description + ")");
    }
  }
  if (!errors.empty()) return Status(StatusCode::kInvalidArgument, join(errors, "\n"));
  // Defaults may refer to built-ins or other parameters: expand them once.
  for (const auto& p : graph.params) {
    auto expanded = substitute(out[p.name], out, graph);
    if (!expanded.is_ok())
      return Status(StatusCode::kInvalidArgument, graph.where(p.line) + ": " + expanded.status().message());
    out[p.name] = expanded.value();
  }
  return out;
}

Result<std::string> substitute(const std::string& text, const Params& resolved, const GraphFile& graph) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t start = text.find("${", pos);
    if (start == std::string::npos) break;
    const size_t end = text.find('}', start);
    if (end == std::string::npos)
      return Status(StatusCode::kInvalidArgument, "unterminated ${ in \"" + text + "\"");
    out += text.substr(pos, start - pos);
    const std::string name = text.substr(start + 2, end - start - 2);
    if (name == "assets")
      out += assets_dir();
    else if (name == "graph_dir")
      out += graph.directory();
    else if (auto it = resolved.find(name); it != resolved.end())
      out += it->second;
    else
      return Status(StatusCode::kInvalidArgument, "unknown parameter ${" + name + "}");
    pos = end + 1;
  }
  out += text.substr(pos);
  return out;
}

std::string assets_dir() {
  if (const char* env = std::getenv("NN_ASSETS_DIR"); env && *env) return env;
  return NN_ASSETS_DIR;
}

std::vector<std::string> graph_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("NN_GRAPH_PATH"); env && *env) {
    std::stringstream ss(env);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  for (const char* d : {NN_GRAPHS_INSTALL_DIR, NN_GRAPHS_SOURCE_DIR}) {
    std::error_code ec;
    if (*d && fs::is_directory(d, ec)) dirs.push_back(d);
  }
  return dirs;
}

Result<std::string> find_graph(const std::string& name_or_path) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  const bool looks_like_path = name_or_path.find('/') != std::string::npos;
  const std::string file =
      name_or_path.size() > 5 && name_or_path.ends_with(".toml") ? name_or_path : name_or_path + ".toml";
  const auto dirs = graph_search_dirs();
  if (!looks_like_path)
    for (const auto& d : dirs) {
      const fs::path p = fs::path(d) / file;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  std::string msg = "no graph '" + name_or_path + "': not a file";
  if (!looks_like_path)
    msg += ", and not found as " + file + " in " + (dirs.empty() ? "(no graph directories)" : join(dirs));
  msg += " (nngraph list shows the shipped graphs)";
  return Status(StatusCode::kIoError, msg);
}

std::vector<std::string> list_graph_files() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& d : graph_search_dirs()) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".toml") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (seen.insert(f.filename().string()).second) out.push_back(f.string());
  }
  return out;
}

}  // namespace nn::graph
