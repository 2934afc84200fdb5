// fvi/program/checkpoint.h: a record round-trips; the temporary file is never one someone planted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "fvi/program/checkpoint.h"

namespace {

std::string contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("checkpoint: a record round-trips and refuses another kind", "[program][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("fvi-ckpt-" + std::to_string(::getpid()) + "-a");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "run.ckpt").string();
  fvi::program::CheckpointRecord r{"pvi-server", 7, {1.5, -2, 3e-300}, {4}, {5, 6}};
  fvi::program::save_checkpoint(path, r);
  fvi::program::CheckpointRecord back;
  REQUIRE(fvi::program::load_checkpoint(path, "pvi-server", back));
  CHECK(back.round == 7);
  CHECK(back.state == r.state);
  CHECK(back.extra == r.extra);
  CHECK(back.traffic == r.traffic);
  CHECK_THROWS_WITH(fvi::program::load_checkpoint(path, "sfvi-silo", back), Catch::Contains(path));
  // Nothing but the checkpoint is left in the directory (no temporary file).
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()) == 1);
  std::filesystem::remove_all(dir);
}

// Issue 27 item 11: the temporary file was PATH.tmp, opened with O_CREAT | O_TRUNC, so a symlink
// planted there had its target overwritten by the checkpoint.
TEST_CASE("checkpoint: a symlink planted where a temporary file might go is not followed", "[program][checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / ("fvi-ckpt-" + std::to_string(::getpid()) + "-b");
  std::filesystem::create_directories(dir);
  const auto victim = dir / "victim.txt";
  std::ofstream(victim) << "precious";
  const std::string path = (dir / "run.ckpt").string();
  std::filesystem::create_symlink(victim, path + ".tmp");
  fvi::program::save_checkpoint(path, fvi::program::CheckpointRecord{"pvi-server", 1, {1}, {}, {}});
  CHECK(contents(victim) == "precious");
  fvi::program::CheckpointRecord back;
  CHECK(fvi::program::load_checkpoint(path, "pvi-server", back));
  CHECK(std::filesystem::is_symlink(path + ".tmp"));  // left as it was
  std::filesystem::remove_all(dir);
}
