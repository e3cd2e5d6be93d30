// The fuzzer's committed corpus (tests/fuzz/corpus), replayed as an ordinary test: every input
// libFuzzer kept runs once through the fuzz entry point (tests/fuzz/fuzz_attention.cpp, linked
// into this binary), so a regression on any of them fails the native suites — under ASan and
// UBSan, and on the scalar twin — and not only the timed fuzz run. A failed property of the
// target traps; Catch2 reports the signal with the input's name.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST_CASE("every input of the fuzz corpus runs cleanly through the fuzz target", "[fuzz]") {
  std::vector<std::filesystem::path> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(ATTN_FUZZ_CORPUS))
    if (entry.is_regular_file()) inputs.push_back(entry.path());
  std::sort(inputs.begin(), inputs.end());
  REQUIRE(!inputs.empty());
  for (const auto& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    INFO("corpus input " << path.filename().string() << " (" << bytes.size() << " bytes)");
    REQUIRE(file.good() | file.eof());
    CHECK(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) == 0);
  }
}
