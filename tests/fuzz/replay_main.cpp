// Replays every file of the fuzz corpus through the fuzz target (built without libFuzzer), so
// each input the fuzzer ever kept stays a regression test in the ordinary test suite.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t count = 0;
  auto replay = [&](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++count;
  };
  for (int i = 1; i < argc; ++i) {  // folders (every file in them) or single files
    if (std::filesystem::is_regular_file(argv[i])) {
      replay(argv[i]);
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i]))
      if (entry.is_regular_file()) replay(entry.path());
  }
  std::cout << "replayed " << count << " inputs without a crash\n";
  return count > 0 ? 0 : 1;
}
