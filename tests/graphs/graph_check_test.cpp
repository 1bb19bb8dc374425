// Graph files: every shipped graph passes `nngraph check`; each kind of mistake is
// reported with the file, the line and the cause.
#include <gst/gst.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/graph/app.h"
#include "nn/graph/graph_file.h"

namespace fs = std::filesystem;

namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string data(const std::string& name) {
  return std::string(NN_GRAPH_TEST_DATA) + "/" + name;
}

std::vector<std::string> shipped_graphs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(NN_GRAPHS_DIR))
    if (e.path().extension() == ".toml") out.push_back(e.path().string());
  out.push_back(std::string(NN_DEMOS_DIR) + "/nnbackground-demo.toml");
  std::sort(out.begin(), out.end());
  return out;
}

// The check's message for a graph in tests/graphs/data (loading or building).
std::string check_message(const std::string& file, const nn::graph::Params& params = {}) {
  auto g = nn::graph::GraphFile::load(data(file));
  if (!g.is_ok()) return g.status().message();
  const nn::Status s = nn::graph::check(g.value(), params);
  return s.is_ok() ? "" : s.message();
}

class GraphCheck : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { nn::graph::init(); }
};

TEST_F(GraphCheck, NnsegmentIsAvailable) {
  GstElementFactory* f = gst_element_factory_find("nnsegment");
  ASSERT_NE(f, nullptr) << "the nnpipe plugin is not on GST_PLUGIN_PATH";
  gst_object_unref(f);
}

TEST_F(GraphCheck, EveryShippedGraphPassesNngraphCheck) {
  const auto graphs = shipped_graphs();
  ASSERT_GE(graphs.size(), 11u);  // 10 in graphs/ and the demo's
  for (const auto& g : graphs) {
    const CommandResult r = run_command(std::string(NN_NNGRAPH_BIN) + " check '" + g + "'");
    EXPECT_EQ(r.exit_code, 0) << g << ":\n" << r.output;
    EXPECT_NE(r.output.find("ok: " + g), std::string::npos) << r.output;
  }
}

TEST_F(GraphCheck, EveryNodeOfEveryShippedGraphSaysWhy) {
  for (const auto& path : shipped_graphs()) {
    auto g = nn::graph::GraphFile::load(path);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    EXPECT_FALSE(g->description.empty()) << path;
    for (const auto& n : g->nodes) EXPECT_GE(n.why.size(), 8u) << path << ": node " << n.name;
  }
}

TEST_F(GraphCheck, ShippedGraphsOfferCameraFileAndTestSources) {
  for (const auto& path : shipped_graphs()) {
    auto g = nn::graph::GraphFile::load(path);
    ASSERT_TRUE(g.is_ok());
    const nn::graph::ParamDecl* p = g->param("source");
    if (!p) p = g->param("input");
    ASSERT_NE(p, nullptr) << path;
    // Sound-only graphs take a microphone where the others take a camera.
    const bool sound_only = p->allowed.size() == 3 && p->allowed[0] == "mic";
    EXPECT_EQ(p->allowed, (std::vector<std::string>{sound_only ? "mic" : "camera", "file", "test"})) << path;
  }
}

TEST_F(GraphCheck, UnknownElementNamesFileLineAndElement) {
  EXPECT_EQ(check_message("unknown_element.toml"), data("unknown_element.toml") +
                                                       ":4: node 'src': unknown element 'videotestsrcc' "
                                                       "(did you mean 'videotestsrc'?)");
}

TEST_F(GraphCheck, UnknownPropertyNamesTheLineOfTheProperty) {
  const std::string m = check_message("bad_property.toml");
  EXPECT_EQ(
      m.rfind(data("bad_property.toml") + ":11: node 'src' (videotestsrc): no property 'patern' (writable:",
              0),
      0u)
      << m;
  EXPECT_NE(m.find("pattern"), std::string::npos) << "the message lists the real names: " << m;
}

TEST_F(GraphCheck, BadEnumValueListsTheAllowedOnes) {
  const std::string m = check_message("bad_value.toml");
  EXPECT_EQ(m.rfind(data("bad_value.toml") + ":11: node 'src' (videotestsrc): bad value 'zebra' for property "
                                             "'pattern': expected one of smpte, snow, black",
                    0),
            0u)
      << m;
}

TEST_F(GraphCheck, OutOfRangeValueGivesTheRange) {
  EXPECT_EQ(check_message("out_of_range.toml"),
            data("out_of_range.toml") +
                ":13: node 'q' (queue): value '-3' out of range for property 'max-size-buffers': "
                "expected an unsigned integer in 0..4294967295");
}

TEST_F(GraphCheck, UnknownParameterInAPropertyIsAStaticError) {
  EXPECT_EQ(check_message("unknown_parameter.toml"),
            data("unknown_parameter.toml") +
                ":12: node 'src': property 'num-buffers': unknown parameter ${frame} "
                "(declared: frames, assets, graph_dir)");
}

TEST_F(GraphCheck, MissingParameterPointsAtItsDeclaration) {
  const std::string m = check_message("missing_parameter.toml");
  EXPECT_EQ(
      m,
      data("missing_parameter.toml") +
          ":4: missing parameter 'frames' (no default): pass frames=VALUE (how many (no default: required))");
  EXPECT_EQ(check_message("missing_parameter.toml", {{"frames", "3"}}), "");
}

TEST_F(GraphCheck, UnknownParameterOnTheCommandLine) {
  auto g = nn::graph::GraphFile::load(data("tiny_valid.toml"));
  ASSERT_TRUE(g.is_ok());
  auto r = nn::graph::resolve_params(g.value(), {{"frams", "3"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), data("tiny_valid.toml") + ": unknown parameter 'frams' (declared: frames)");
}

TEST_F(GraphCheck, DisallowedParameterValue) {
  const std::string path = std::string(NN_GRAPHS_DIR) + "/background-blur.toml";
  auto g = nn::graph::GraphFile::load(path);
  ASSERT_TRUE(g.is_ok());
  auto r = nn::graph::resolve_params(g.value(), {{"source", "webcam"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(
                ":9: parameter 'source': 'webcam' is not allowed (allowed: camera, file, test)"),
            std::string::npos)
      << r.status().message();
}

TEST_F(GraphCheck, UnlinkedSrcPad) {
  EXPECT_EQ(check_message("unlinked_src.toml"),
            data("unlinked_src.toml") +
                ":9: node 'convert' (videoconvert): src pad 'src' is not linked: end the "
                "chain with a sink, or link a node from it");
}

TEST_F(GraphCheck, NodeAfterASinkCannotLink) {
  const std::string m = check_message("unlinked_sink.toml");
  EXPECT_NE(m.find(data("unlinked_sink.toml") +
                   ":14: node 'second-sink': cannot link from node 'sink': its element "
                   "has no src pad"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(data("unlinked_sink.toml") +
                   ":14: node 'second-sink' (fakesink): sink pad 'sink' is not linked"),
            std::string::npos)
      << m;
}

TEST_F(GraphCheck, IncompatibleLinkSaysWhatEachSideTakes) {
  const std::string m = check_message("incompatible_link.toml");
  EXPECT_EQ(
      m.rfind(
          data("incompatible_link.toml") +
              ":9: node 'convert': cannot link node 'src' (line 4, audiotestsrc) to it: no compatible pads "
              "(src outputs audio/x-raw",
          0),
      0u)
      << m;
}

TEST_F(GraphCheck, DecodebinIntoAFixedFormatNodeAsksForAConverter) {
  const std::string m = check_message("decodebin_fixed_format.toml");
  EXPECT_EQ(m.rfind(data("decodebin_fixed_format.toml") +
                        ":20: node 'composite' (cairooverlay) takes only video/x-raw format { BGRx",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("what node 'decode' (decodebin) outputs is I420 for most files: put a videoconvert "
                   "between them"),
            std::string::npos)
      << m;
}

// The same through a capsfilter (the usual "fix the format once" node): its caps restrict
// what it takes. Without this check the run failed with decodebin's "not-linked" and
// `nngraph check` said ok.
TEST_F(GraphCheck, DecodebinIntoAFormatCapsfilterAsksForAConverter) {
  const std::string m = check_message("decodebin_into_capsfilter.toml");
  EXPECT_EQ(m.rfind(data("decodebin_into_capsfilter.toml") +
                        ":20: node 'rgba' (capsfilter) takes only video/x-raw format RGBA, but what node "
                        "'decode' (decodebin) outputs is I420 for most files: put a videoconvert between them",
                    0),
            0u)
      << m;
}

TEST_F(GraphCheck, MissingWhy) {
  EXPECT_EQ(check_message("missing_why.toml"),
            data("missing_why.toml") + ":4: node 'src': missing required field 'why'");
}

TEST_F(GraphCheck, TomlSyntaxError) {
  const std::string m = check_message("syntax_error.toml");
  EXPECT_EQ(m.rfind(data("syntax_error.toml") + ":6: ", 0), 0u) << m;
}

TEST_F(GraphCheck, WhenOnUndeclaredParameter) {
  EXPECT_EQ(check_message("bad_when.toml"),
            data("bad_when.toml") +
                ":12: node 'src': when: unknown parameter 'sorce' (declared: source, assets, graph_dir)");
}

TEST_F(GraphCheck, EveryVariantIsCheckedAndNamed) {
  // The default (source=test) builds; the other source has a bad value, found all the same.
  EXPECT_EQ(check_message("broken_variant.toml"),
            data("broken_variant.toml") +
                ":20: node 'other' (videotestsrc): bad value 'maybe' for property "
                "'is-live': expected true or false [with source=other]");
}

TEST_F(GraphCheck, CliReportsErrorsWithExitCode2) {
  const CommandResult r =
      run_command(std::string(NN_NNGRAPH_BIN) + " check '" + data("unknown_element.toml") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(data("unknown_element.toml") + ":4: node 'src': unknown element 'videotestsrcc'"),
            std::string::npos)
      << r.output;
  const CommandResult u = run_command(std::string(NN_NNGRAPH_BIN) + " run background-blur colour=red");
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_NE(u.output.find("unknown parameter 'colour'"), std::string::npos) << u.output;
  const CommandResult n = run_command(std::string(NN_NNGRAPH_BIN) + " check no-such-graph");
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_NE(n.output.find("no graph 'no-such-graph'"), std::string::npos) << n.output;
}

TEST_F(GraphCheck, ListShowsShippedGraphsAndParameters) {
  const CommandResult r = run_command(std::string(NN_NNGRAPH_BIN) + " list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"background-blur", "background-image", "background-video", "green-screen",
                           "transparent", "virtual-camera", "segment-benchmark"})
    EXPECT_NE(r.output.find(std::string(name) + "  ("), std::string::npos) << name << "\n" << r.output;
  EXPECT_NE(r.output.find("source=file  [camera|file|test]"), std::string::npos) << r.output;
}

TEST_F(GraphCheck, DotDrawsThePipeline) {
  if (run_command("command -v dot").exit_code != 0) GTEST_SKIP() << "graphviz (dot) is not installed";
  const std::string out = std::string(NN_GRAPH_TEST_OUT) + "/background-blur.png";
  fs::remove(out);
  const CommandResult r = run_command(std::string(NN_NNGRAPH_BIN) +
                                      " dot background-blur source=test output=none -o '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  FILE* f = fopen(out.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  unsigned char sig[8] = {};
  ASSERT_EQ(fread(sig, 1, 8, f), 8u);
  fclose(f);
  EXPECT_EQ(sig[1], 'P');
  EXPECT_EQ(sig[2], 'N');
  EXPECT_EQ(sig[3], 'G');
  EXPECT_GT(fs::file_size(out), 10000u);
}

}  // namespace
