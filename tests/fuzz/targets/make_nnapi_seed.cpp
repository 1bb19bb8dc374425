// Converts models (.tflite, .onnx) to .nnapi files for the .nnapi reader's seed corpus:
// OUT_DIR/<n>_<basename>.nnapi for each model the importers accept; refused ones are
// counted and skipped (a refused model is a seed for the importer targets, not here).
#include <cstdio>
#include <filesystem>
#include <string>

#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR MODEL...\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out_dir(argv[1]);
  std::filesystem::create_directories(out_dir);
  int written = 0, refused = 0;
  for (int i = 2; i < argc; ++i) {
    auto model = nn::load_model(argv[i]);
    const std::filesystem::path in(argv[i]);
    // ONNX node tests are all called model.onnx: name the seed after their folder.
    const std::string stem = in.stem() == "model" ? in.parent_path().filename().string() : in.stem().string();
    const std::string out = (out_dir / (std::to_string(i - 1) + "_" + stem + ".nnapi")).string();
    if (!model.is_ok() || !nn::save_nnapi_file(*model.value(), out).is_ok()) {
      ++refused;
      continue;
    }
    ++written;
  }
  std::printf("%d .nnapi seeds written to %s, %d models refused\n", written, argv[1], refused);
  return written > 0 ? 0 : 1;
}
