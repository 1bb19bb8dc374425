// A main() for the fuzz targets outside libFuzzer (any compiler, with or without
// sanitizers): runs LLVMFuzzerTestOneInput once on each file given, or on each file of a
// directory given (recursively), so ctest replays the regression inputs and the seeds.
// A crash or sanitizer report fails the test; "N inputs" is printed on success.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  std::fprintf(stderr, "replay %s (%zu bytes)\n", file.c_str(), bytes.size());
  // A copy of exactly the input's size, so ASan sees a read past the end as one.
  LLVMFuzzerTestOneInput(bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::recursive_directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') replay(e.path()), ++count;
    } else if (fs::is_regular_file(arg)) {
      replay(arg), ++count;
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
  }
  std::printf("%zu inputs\n", count);
  return 0;
}
