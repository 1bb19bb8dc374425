// nnconvert's calibration folder (engine/tools/support/calibration_set): images and evenly
// spread frames of videos become samples, through the tools' pre-processing; a video or
// image that cannot be read is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "calibration_set.h"
#include "nn/import/import.h"
#include "tensor_io.h"
#include "test_support.h"

namespace nn {
namespace {

namespace fs = std::filesystem;

class CalibrationSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nn_calibration_set_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<float> input_of(const tools::CalibrationSet& set, size_t i, const Model& model) {
  std::vector<float> x(num_elements(model.operands[model.inputs[0]].dims));
  Status s = set.to_input(i, model, 0, x.data());
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return x;
}

TEST_F(CalibrationSetTest, ReadsImagesAndEvenlySpreadVideoFrames) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(nn_test::require_asset("media/people/vtest.avi"));
  ASSERT_TRUE(nn_test::require_asset("media/people/grace_hopper.jpg"));
  auto model = load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  fs::copy_file(nn_test::asset("media/people/grace_hopper.jpg"), dir_ / "a_grace_hopper.jpg");
  fs::create_symlink(nn_test::asset("media/people/vtest.avi"), dir_ / "b_vtest.avi");
  std::ofstream(dir_ / "notes.txt") << "not a sample";

  auto set = tools::CalibrationSet::open(dir_.string(), 5);
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  ASSERT_EQ(set->size(), 6u);  // the photo, 5 frames; notes.txt is not a sample
  EXPECT_EQ(set->videos(), 1u);
  EXPECT_EQ(set->describe(0), (dir_ / "a_grace_hopper.jpg").string());
  // vtest.avi has 795 frames: 0, 159, 318, 477, 636.
  const std::string video = (dir_ / "b_vtest.avi").string();
  EXPECT_EQ(set->describe(1), video + " frame 0");
  EXPECT_EQ(set->describe(3), video + " frame 318");
  EXPECT_EQ(set->describe(5), video + " frame 636");

  // The photo as nnrun reads it.
  std::vector<float> photo(num_elements((*model)->operands[(*model)->inputs[0]].dims));
  ASSERT_TRUE(tools::image_to_input((dir_ / "a_grace_hopper.jpg").string(), **model, 0, photo.data()).is_ok());
  EXPECT_EQ(input_of(*set, 0, **model), photo);
  // Frame 318 as the same frame saved losslessly and read as an image.
  cv::VideoCapture cap(video);
  cv::Mat frame;
  for (int i = 0; i <= 318; ++i) ASSERT_TRUE(cap.read(frame));
  const std::string png = (fs::temp_directory_path() / ("nn_calibration_frame318_" + std::to_string(::getpid()) + ".png")).string();
  ASSERT_TRUE(cv::imwrite(png, frame));
  std::vector<float> expected(photo.size());
  ASSERT_TRUE(tools::image_to_input(png, **model, 0, expected.data()).is_ok());
  fs::remove(png);
  EXPECT_EQ(input_of(*set, 3, **model), expected);
  EXPECT_NE(input_of(*set, 2, **model), expected);  // another frame, not the same one twice

  // A video with fewer frames than asked gives each once; --calibration-limit keeps the first.
  auto all = tools::CalibrationSet::open(dir_.string(), 5000);
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->size(), 1u + 795u);
  all->truncate(3);
  EXPECT_EQ(all->size(), 3u);
}

TEST_F(CalibrationSetTest, AVideoThatDoesNotDecodeIsAnErrorNamingIt) {
  ASSERT_TRUE(nn_test::require_asset("media/people/basketball1.png"));
  fs::copy_file(nn_test::asset("media/people/basketball1.png"), dir_ / "a.png");
  std::ofstream(dir_ / "broken.avi") << "RIFF but not a video at all";
  auto set = tools::CalibrationSet::open(dir_.string(), 30);
  ASSERT_FALSE(set.is_ok());
  const std::string msg = set.status().to_string();
  EXPECT_NE(msg.find((dir_ / "broken.avi").string() + ": cannot read video"), std::string::npos) << msg;
}

TEST_F(CalibrationSetTest, AnImageThatIsCorruptOrGoneFailsWhenReadNamingIt) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  auto model = load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(model.is_ok());
  ASSERT_TRUE(nn_test::require_asset("media/people/camera.png"));
  fs::copy_file(nn_test::asset("media/people/camera.png"), dir_ / "a.png");
  std::ofstream(dir_ / "b_corrupt.jpg") << "not a JPEG";
  fs::copy_file(nn_test::asset("media/people/camera.png"), dir_ / "c_gone.png");
  auto set = tools::CalibrationSet::open(dir_.string(), 30);
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  ASSERT_EQ(set->size(), 3u);
  fs::remove(dir_ / "c_gone.png");
  std::vector<float> x(num_elements((*model)->operands[(*model)->inputs[0]].dims));
  EXPECT_TRUE(set->to_input(0, **model, 0, x.data()).is_ok());
  Status corrupt = set->to_input(1, **model, 0, x.data());
  EXPECT_FALSE(corrupt.is_ok());
  EXPECT_NE(corrupt.to_string().find((dir_ / "b_corrupt.jpg").string() + ": cannot read image"), std::string::npos)
      << corrupt.to_string();
  Status gone = set->to_input(2, **model, 0, x.data());
  EXPECT_FALSE(gone.is_ok());
  EXPECT_NE(gone.to_string().find((dir_ / "c_gone.png").string()), std::string::npos) << gone.to_string();
}

TEST_F(CalibrationSetTest, NotAFolderIsAnError) {
  auto set = tools::CalibrationSet::open((dir_ / "no-such-folder").string(), 30);
  ASSERT_FALSE(set.is_ok());
  EXPECT_NE(set.status().to_string().find("no-such-folder"), std::string::npos);
}

}  // namespace
}  // namespace nn
