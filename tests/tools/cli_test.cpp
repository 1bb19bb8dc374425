// The command-line tools agree with each other and with docs/TOOLS.md: exit 0 on success,
// 1 when the work fails, 2 when the command line is wrong (never CLI11's own 105/106),
// including a file named on it that does not exist;
// an error line names its file once; OpenCV's own "[ WARN ]" lines do not leak; nnmask
// writes nowhere it was not told to.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

namespace fs = std::filesystem;

struct ToolRun {
  int exit_code = -1;
  std::string out, err;
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

class ToolCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nn_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string tool(const std::string& name) {
    for (const char* sub : {"/engine/", "/graphs/"}) {
      const std::string path = std::string(NN_BINARY_DIR) + sub + name;
      if (fs::exists(path)) return path;
    }
    return {};
  }

  // Runs `tool args` in the test's own folder (so a file written "into the current folder"
  // would show up there), stdout and stderr apart.
  ToolRun run(const std::string& name, const std::string& args) {
    ToolRun r;
    const std::string exe = tool(name);
    if (exe.empty()) {
      ADD_FAILURE() << name << " is not built in " << NN_BINARY_DIR;
      return r;
    }
    const fs::path err_file = dir_ / "stderr.txt";
    const std::string cmd = "cd '" + dir_.string() + "' && '" + exe + "' " + args + " 2>'" + err_file.string() + "'";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream f(err_file);
    std::stringstream ss;
    ss << f.rdbuf();
    r.err = ss.str();
    return r;
  }

  static std::string selfie() { return nn_test::asset("models/selfie_segmentation.tflite"); }
  static std::string messi() { return nn_test::asset("media/messi5.jpg"); }
  static bool have_assets() {
    return nn_test::require_asset("models/selfie_segmentation.tflite") && nn_test::require_asset("media/messi5.jpg");
  }

  fs::path dir_;
};

TEST_F(ToolCli, CommandLineErrorsExitTwoForEveryTool) {
  for (const char* name : {"nnrun", "nninspect", "nnmask", "nnbench_quick"}) {
    SCOPED_TRACE(name);
    ToolRun missing = run(name, "");
    EXPECT_EQ(missing.exit_code, 2) << missing.err;            // CLI11 alone: 106
    EXPECT_NE(missing.err.find("is required"), std::string::npos) << missing.err;
    EXPECT_EQ(run(name, "--no-such-option x").exit_code, 2);   // CLI11 alone: 109
    EXPECT_EQ(run(name, "--help").exit_code, 0);
  }
  std::ofstream(dir_ / "model.nnapi") << "the value check comes before the model is read";
  ToolRun range = run("nnrun", "model.nnapi --threads 99 --random");
  EXPECT_EQ(range.exit_code, 2) << range.err;                  // CLI11 alone: 105
  EXPECT_NE(range.err.find("--threads"), std::string::npos) << range.err;
  if (!tool("nngraph").empty()) {
    EXPECT_EQ(run("nngraph", "").exit_code, 2);
    EXPECT_EQ(run("nngraph", "check --no-such-option").exit_code, 2);
    EXPECT_EQ(run("nngraph", "--help").exit_code, 0);
  }
}

TEST_F(ToolCli, NnrunExitsTwoWhenTheInputsDoNotFitTheModel) {
  if (!have_assets()) return;
  ToolRun none = run("nnrun", "'" + selfie() + "'");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("--random"), std::string::npos) << none.err;
  ToolRun two = run("nnrun", "'" + selfie() + "' -i '" + messi() + "' -i '" + messi() + "'");
  EXPECT_EQ(two.exit_code, 2) << two.err;
}

TEST_F(ToolCli, AFileNamedOnTheCommandLineThatDoesNotExistExitsTwoForEveryTool) {
  if (!have_assets()) return;
  const std::string model = (dir_ / "no-such-model.tflite").string();
  const std::string image = (dir_ / "gone.jpg").string();
  const std::string folder = (dir_ / "no-such-folder").string();
  const std::string out = (dir_ / "out.nnapi").string();
  auto q = [](const std::string& s) { return "'" + s + "'"; };
  struct Case {
    const char* tool;
    std::string args, missing;
  };
  const std::vector<Case> cases = {
      {"nnrun", q(model) + " --random", model},
      {"nnrun", q(selfie()) + " -i " + q(image), image},
      {"nninspect", q(model), model},
      {"nnbench_quick", q(model), model},
      {"nnmask", q(model) + " " + q(messi()) + " -o " + q(out), model},
      {"nnmask", q(selfie()) + " " + q(image) + " -o " + q(out), image},
      {"nnconvert", q(model) + " -o " + q(out), model},
      {"nnconvert", q(selfie()) + " --stream " + q(folder + ".toml") + " -o " + q(out), folder + ".toml"},
      {"nnconvert", q(selfie()) + " --quantize int8 --calibration " + q(folder) + " -o " + q(out), folder},
      {"nnexport", q(model) + " -o " + q(dir_ / "out.onnx"), model},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.tool) + " " + c.args);
    ToolRun r = run(c.tool, c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(count(r.err, c.missing), 1u) << r.err;
    EXPECT_EQ(r.err.find("WARN"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << "no work is done on a wrong command line";
  }
}

TEST_F(ToolCli, FailuresExitOneAndNameTheFileOnce) {
  if (!have_assets()) return;
  // A model file that is there but is not a model: the work failed.
  const std::string bad_model = (dir_ / "not-a-model.nnapi").string();
  std::ofstream(bad_model) << "not a model";
  for (const char* name : {"nnrun", "nninspect", "nnconvert", "nnexport"}) {
    SCOPED_TRACE(name);
    std::string args = "'" + bad_model + "'";
    if (std::string(name) == "nnrun") args += " --random";
    if (std::string(name) == "nnconvert") args += " --quantize int8 --calibration '" + dir_.string() + "'";
    if (std::string(name) == "nnexport") args += " -o '" + (dir_ / "out.onnx").string() + "'";
    ToolRun r = run(name, args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(count(r.err, bad_model), 1u) << r.err;
  }
  // A stream description that is there but is not TOML: 1, like any file that is wrong.
  const std::string bad_toml = (dir_ / "not-a-stream.toml").string();
  std::ofstream(bad_toml) << "rate = [";
  ToolRun stream = run("nnconvert", "'" + selfie() + "' --stream '" + bad_toml + "' -o '" +
                                        (dir_ / "s.nnapi").string() + "'");
  EXPECT_EQ(stream.exit_code, 1) << stream.err;
  EXPECT_NE(stream.err.find(bad_toml), std::string::npos) << stream.err;
  EXPECT_FALSE(fs::exists(dir_ / "s.nnapi"));
  // An image that cannot be read: once "x.jpg: cannot read image", not "x.jpg: x.jpg: ...",
  // and without OpenCV's own "[ WARN ]" line.
  const std::string bad_image = (dir_ / "not-an-image.jpg").string();
  std::ofstream(bad_image) << "not a JPEG";
  ToolRun bad = run("nnrun", "'" + selfie() + "' -i '" + bad_image + "'");
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_EQ(bad.err, "nnrun: " + bad_image + ": cannot read image\n");
  ToolRun mask = run("nnmask", "'" + selfie() + "' '" + bad_image + "' -o '" + (dir_ / "m.png").string() + "'");
  EXPECT_EQ(mask.exit_code, 1) << mask.err;
  EXPECT_EQ(count(mask.err, bad_image), 1u) << mask.err;
  EXPECT_EQ(mask.err.find("WARN"), std::string::npos) << mask.err;
}

TEST_F(ToolCli, NnmaskWritesOnlyWhereItIsTold) {
  if (!have_assets()) return;
  ToolRun no_output = run("nnmask", "'" + selfie() + "' '" + messi() + "'");
  EXPECT_EQ(no_output.exit_code, 2) << no_output.err;
  EXPECT_NE(no_output.err.find("--output"), std::string::npos) << no_output.err;
  EXPECT_FALSE(fs::exists(dir_ / "mask.png"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().filename() != "stderr.txt";
  EXPECT_EQ(files, 0u) << "nnmask wrote into the current folder";

  const std::string out = (dir_ / "mask-here.png").string();
  ToolRun ok = run("nnmask", "'" + selfie() + "' '" + messi() + "' -o '" + out + "' -t 1");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_NE(ok.out.find(out), std::string::npos) << "the summary says where the mask went: " << ok.out;
}

}  // namespace
