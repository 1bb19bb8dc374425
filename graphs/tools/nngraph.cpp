// nngraph: run, check, draw and list pipeline graph files.
//
//   nngraph list
//   nngraph check background-blur
//   nngraph run background-blur source=test
//   nngraph dot background-blur -o blur.png
#include <gst/gst.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli.h"
#include "nn/graph/app.h"
#include "nn/graph/graph_file.h"

namespace {

using nn::graph::GraphFile;
using nn::graph::Params;

// Splits words into graphs and name=value parameters.
void split_words(const std::vector<std::string>& words, std::vector<std::string>& graphs,
                 std::vector<std::string>& params) {
  for (const auto& w : words) (w.find('=') != std::string::npos ? params : graphs).push_back(w);
}

nn::Result<GraphFile> load_graph(const std::string& name) {
  NN_ASSIGN_OR_RETURN(std::string path, nn::graph::find_graph(name));
  return GraphFile::load(path);
}

int fail(const nn::Status& s, int code) {
  std::cerr << s.message() << "\n";
  return code;
}

std::string param_line(const nn::graph::ParamDecl& p) {
  std::string s = "    " + p.name + "=" + (p.default_value ? *p.default_value : std::string("(required)"));
  if (!p.allowed.empty()) {
    s += "  [";
    for (size_t i = 0; i < p.allowed.size(); ++i) s += (i ? "|" : "") + p.allowed[i];
    s += "]";
  }
  return s + "\n        " + p.description + "\n";
}

int cmd_list(bool verbose) {
  const auto files = nn::graph::list_graph_files();
  if (files.empty()) {
    std::cerr
        << "no graphs found (searched: NN_GRAPH_PATH, the installed and the source graphs directories)\n";
    return 1;
  }
  for (const auto& f : files) {
    auto g = GraphFile::load(f);
    if (!g.is_ok()) {
      std::cout << f << ": INVALID\n" << g.status().message() << "\n\n";
      continue;
    }
    std::cout << g->name << "  (" << f << ")\n  " << g->description << "\n";
    if (!g->latency_budget.empty()) {
      // A budget given as "${param}" is shown with the parameter's default.
      auto defaults = nn::graph::resolve_params(g.value(), {});
      auto budget = defaults.is_ok() ? nn::graph::substitute(g->latency_budget, defaults.value(), g.value())
                                     : nn::Result<std::string>(defaults.status());
      std::cout << "  latency budget: " << (budget.is_ok() ? budget.value() : g->latency_budget) << " ms";
      if (g->latency_budget != (budget.is_ok() ? budget.value() : g->latency_budget))
        std::cout << " (parameter " << g->latency_budget << ")";
      std::cout << "\n";
    }
    if (!g->params.empty()) std::cout << "  parameters:\n";
    for (const auto& p : g->params) std::cout << param_line(p);
    if (verbose) {
      std::cout << "  nodes:\n";
      for (const auto& n : g->nodes)
        std::cout << "    " << n.name << " (" << n.element << "): " << n.why << "\n";
    }
    std::cout << "\n";
  }
  return 0;
}

int cmd_check(const std::vector<std::string>& words, bool all, bool verbose) {
  std::vector<std::string> graphs, assigns;
  split_words(words, graphs, assigns);
  if (all)
    for (const auto& f : nn::graph::list_graph_files()) graphs.push_back(f);
  if (graphs.empty()) {
    std::cerr << "check: name a graph (or --all)\n";
    return 2;
  }
  auto params = nn::graph::parse_assignments(assigns);
  if (!params.is_ok()) return fail(params.status(), 2);
  int bad = 0;
  for (const auto& name : graphs) {
    auto g = load_graph(name);
    nn::Status st = g.is_ok() ? nn::graph::check(g.value(), params.value()) : g.status();
    if (st.is_ok()) {
      std::cout << "ok: " << g->path << " (" << g->name << ", " << g->nodes.size() << " nodes, "
                << g->params.size() << " parameters)\n";
      if (verbose)
        for (const auto& n : g->nodes)
          std::cout << "  " << n.name << " (" << n.element << "): " << n.why << "\n";
    } else {
      std::cerr << st.message() << "\n";
      ++bad;
    }
  }
  return bad ? 2 : 0;
}

int cmd_dot(const std::vector<std::string>& words, std::string out, bool negotiate) {
  std::vector<std::string> graphs, assigns;
  split_words(words, graphs, assigns);
  if (graphs.size() != 1) {
    std::cerr << "dot: name exactly one graph\n";
    return 2;
  }
  auto params = nn::graph::parse_assignments(assigns);
  if (!params.is_ok()) return fail(params.status(), 2);
  auto g = load_graph(graphs[0]);
  if (!g.is_ok()) return fail(g.status(), 2);
  auto app = nn::graph::App::create(g.value(), params.value());
  if (!app.is_ok()) return fail(app.status(), 2);
  if (out.empty()) out = g->name + ".png";
  if (negotiate) {
    // PAUSED shows the negotiated caps on every link; live sources and missing devices
    // do not preroll, which is fine: the structure is drawn either way.
    GstElement* p = (*app)->pipeline();
    if (gst_element_set_state(p, GST_STATE_PAUSED) != GST_STATE_CHANGE_FAILURE)
      gst_element_get_state(p, nullptr, nullptr, 10 * GST_SECOND);
  }
  const std::string dot = (*app)->dot();
  gst_element_set_state((*app)->pipeline(), GST_STATE_NULL);
  const auto dotpos = out.rfind('.');
  const std::string ext = dotpos == std::string::npos ? "" : out.substr(dotpos + 1);
  if (ext == "dot" || ext == "gv") {
    std::ofstream f(out);
    f << dot;
    if (!f) return fail(nn::Status(nn::StatusCode::kIoError, out + ": cannot write"), 1);
  } else {
    const std::string tmp = out + ".tmp.dot";
    {
      std::ofstream f(tmp);
      f << dot;
      if (!f) return fail(nn::Status(nn::StatusCode::kIoError, tmp + ": cannot write"), 1);
    }
    const std::string cmd =
        "dot -T" + (ext.empty() ? std::string("png") : ext) + " -o '" + out + "' '" + tmp + "'";
    const int rc = std::system(cmd.c_str());
    std::remove(tmp.c_str());
    if (rc != 0) {
      std::cerr << "dot: '" << cmd
                << "' failed (is graphviz installed? scripts/install-deps.sh installs it); "
                << "write a .dot file with -o out.dot instead\n";
      return 1;
    }
  }
  std::cout << "wrote " << out << "\n";
  return 0;
}

int cmd_run(const std::vector<std::string>& words, int stats_ms, bool quiet, int budget) {
  std::vector<std::string> graphs, assigns;
  split_words(words, graphs, assigns);
  if (graphs.size() != 1) {
    std::cerr << "run: name exactly one graph (then name=value parameters)\n";
    return 2;
  }
  auto params = nn::graph::parse_assignments(assigns);
  if (!params.is_ok()) return fail(params.status(), 2);
  auto g = load_graph(graphs[0]);
  if (!g.is_ok()) return fail(g.status(), 2);
  GraphFile graph = g.value();
  if (budget > 0) graph.latency_budget = std::to_string(budget);
  auto created = nn::graph::App::create(graph, params.value());
  if (!created.is_ok()) return fail(created.status(), 2);
  auto& app = *created.value();

  const bool tty = isatty(STDERR_FILENO);
  std::cerr << "playing " << graph.name << " (" << graph.path << ")";
  for (const auto& [k, v] : app.params()) std::cerr << " " << k << "=" << v;
  std::cerr << "\nCtrl-C stops it cleanly (EOS); a second Ctrl-C stops at once.\n";
  if (!quiet)
    app.on_stats(
        [tty](const nn::graph::Stats& s) {
          if (tty)
            std::cerr << "\r\033[K" << s.to_line() << std::flush;
          else
            std::cerr << s.to_line() << "\n";
        },
        std::chrono::milliseconds(stats_ms));
  app.stop_on_interrupt();
  const nn::Status st = app.run();
  if (tty && !quiet) std::cerr << "\n";
  std::cout << "summary of " << graph.name << (st.is_ok() ? " (finished)" : " (failed)") << ":\n"
            << app.stats().to_summary();
  if (!st.is_ok()) return fail(st, 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nn::graph::init(&argc, &argv);
  CLI::App cli{
      "nngraph: runs pipeline graph files (GStreamer pipelines with parameters, a latency budget and a\n"
      "reason for every node). GRAPH is a path or a shipped graph's name (see `nngraph list`);\n"
      "parameters follow as name=value."};
  cli.require_subcommand(1);

  std::vector<std::string> run_words;
  int stats_ms = 1000, budget = 0;
  bool quiet = false;
  auto* run = cli.add_subcommand(
      "run", "Play a graph with a live status line; Ctrl-C ends it cleanly with a summary");
  run->add_option("graph_and_params", run_words, "GRAPH [name=value ...]")->required();
  run->add_option("--stats-interval", stats_ms, "Status line period in milliseconds")
      ->check(CLI::Range(50, 60000));
  run->add_option("--latency-budget", budget, "Override the graph's latency budget (ms)")
      ->check(CLI::Range(1, 10000));
  run->add_flag("-q,--quiet", quiet, "No status line, only the summary");

  std::vector<std::string> check_words;
  bool check_all = false, check_verbose = false;
  auto* check = cli.add_subcommand("check", "Validate graphs without playing them (every parameter variant)");
  check->add_option("graphs_and_params", check_words, "GRAPH... [name=value ...]");
  check->add_flag("--all", check_all, "Check every graph in the search path");
  check->add_flag("-v,--verbose", check_verbose, "List the nodes and why each is there");

  std::vector<std::string> dot_words;
  std::string dot_out;
  bool negotiate = false;
  auto* dot =
      cli.add_subcommand("dot", "Draw the pipeline (GraphViz): .png, .svg or .dot by the output's extension");
  dot->add_option("graph_and_params", dot_words, "GRAPH [name=value ...]")->required();
  dot->add_option("-o,--output", dot_out, "Output file (default: <graph name>.png)");
  dot->add_flag(
      "--negotiate", negotiate,
      "Pause the pipeline first so the links show their negotiated caps (opens devices, loads models)");

  bool list_verbose = false;
  auto* list = cli.add_subcommand("list", "List the shipped graphs and their parameters");
  list->add_flag("-v,--verbose", list_verbose, "Also list every node and why it is there");

  NN_PARSE_COMMAND_LINE(cli, argc, argv);
  if (*run) return cmd_run(run_words, stats_ms, quiet, budget);
  if (*check) return cmd_check(check_words, check_all, check_verbose);
  if (*dot) return cmd_dot(dot_words, dot_out, negotiate);
  if (*list) return cmd_list(list_verbose);
  return 0;
}
