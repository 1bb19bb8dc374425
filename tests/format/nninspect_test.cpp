// nninspect on a saved .nnapi file: the JSON says what the file holds, the text names
// every section, and a damaged file gives an error and a non-zero exit.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/format/nnapi_file.h"
#include "nn/ops/registry.h"
#include "test_support.h"

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun run_cli(const std::string& args) {
  CliRun r;
  std::string cmd = std::string(NN_BINARY_DIR) + "/engine/nninspect " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class NnInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(NN_BINARY_DIR) + "/engine/nninspect"))
      GTEST_SKIP() << "nninspect is not built in " << NN_BINARY_DIR;
    if (!nn::OpRegistry::instance().find(nn::OperationType::ADD)) GTEST_SKIP() << "ADD not registered yet";
    nn::Model m;
    uint32_t in = m.add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 2, 2, 3}, "image");
    const float bias[3] = {1, 2, 3};
    uint32_t b = m.add_constant_f32({3}, bias, "bias");
    uint32_t fuse = m.add_scalar_i32(3);
    uint32_t out = m.add_tensor(nn::OperandType::TENSOR_FLOAT32, {}, "mask");
    m.add_operation(nn::OperationType::ADD, {in, b, fuse}, {out});
    m.inputs = {in};
    m.outputs = {out};
    m.metadata.task = "segmentation";
    m.metadata.input_source_layouts = {"NCHW"};
    m.metadata.extra = {{"labels", "person"}};
    dir_ = std::filesystem::temp_directory_path() / ("nninspect_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "m.nnapi").string();
    NN_ASSERT_OK(nn::save_nnapi_file(m, path_));
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(NnInspect, JsonDescribesTheFile) {
  CliRun r = run_cli("--json " + path_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"]["version"], "1.0");
  EXPECT_EQ(j["format"]["checksum_ok"], true);
  EXPECT_EQ(j["format"]["file_size"], std::filesystem::file_size(path_));
  EXPECT_EQ(j["format"]["sections"].size(), 5u);
  EXPECT_EQ(j["metadata"]["task"], "segmentation");
  EXPECT_EQ(j["metadata"]["extra"]["labels"], "person");
  EXPECT_EQ(j["inputs"][0]["name"], "image");
  EXPECT_EQ(j["inputs"][0]["source_layout"], "NCHW");
  EXPECT_EQ(j["outputs"][0]["dims"], nlohmann::json::array({1, 2, 2, 3}));
  ASSERT_EQ(j["operands"].size(), 4u);
  EXPECT_EQ(j["operands"][1]["bytes"], 12);
  EXPECT_EQ(j["operands"][2]["value"], 3);
  EXPECT_EQ(j["operations"][0]["type"], "ADD");
  EXPECT_EQ(j["operations"][0]["inputs"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(j["operations"][0]["params"]["2"], 3);  // the fuse code, shown by value
  EXPECT_EQ(j["summary"]["ops"], "ADD x 1");
}

TEST_F(NnInspect, TextNamesSectionsAndOps) {
  CliRun r = run_cli(path_);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* text :
       {"format: .nnapi 1.0", "ok\n", "section CONSTANTS", "task                   segmentation",
        "source layout NCHW", "'bias' 12 bytes", "ADD                    in [0, 1, 2=3] out [3]",
        "summary: 1 operations, 4 operands, 16 constant bytes"})
    EXPECT_NE(r.out.find(text), std::string::npos) << "missing '" << text << "' in:\n" << r.out;
}

TEST_F(NnInspect, BadFilesExitNonZeroWithTheReason) {
  std::string cut = (dir_ / "cut.nnapi").string();
  std::filesystem::copy_file(path_, cut);
  std::filesystem::resize_file(cut, 100);
  CliRun r = run_cli(cut);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("truncated: header says"), std::string::npos) << r.out;
  r = run_cli((dir_ / "missing.nnapi").string());
  EXPECT_EQ(r.exit_code, 2);  // a file named on the command line that is not there: docs/TOOLS.md
  EXPECT_NE(r.out.find("missing.nnapi"), std::string::npos) << r.out;
  r = run_cli("");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("model is required"), std::string::npos) << r.out;
}

}  // namespace
