#include "http/api_keys.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace rocket {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeys, NoneMeansOpen) {
  const ApiKeys k = ApiKeys::load("", "", nullptr);
  EXPECT_TRUE(k.empty());
  EXPECT_TRUE(ApiKeys::load("", "", "").empty());
}

TEST(ApiKeys, FlagFileAndEnvAllAccepted) {
  const std::string file = write_file("rocket_keys_a.txt", "# team keys\n\n  sk-file-one  \r\nsk-file-two\n#sk-commented\n");
  const ApiKeys k = ApiKeys::load("sk-flag", file, "sk-env");
  EXPECT_EQ(k.size(), 4u);
  for (const char* key : {"sk-flag", "sk-env", "sk-file-one", "sk-file-two"})
    EXPECT_TRUE(k.accepts(std::string("Bearer ") + key)) << key;
  EXPECT_FALSE(k.accepts("Bearer sk-commented"));
  EXPECT_FALSE(k.accepts("Bearer #sk-commented"));
}

TEST(ApiKeys, RejectsNearMisses) {
  const ApiKeys k = ApiKeys::load("sk-secret", "", nullptr);
  EXPECT_TRUE(k.accepts("Bearer sk-secret"));
  for (const char* bad : {"", "Bearer", "Bearer ", "sk-secret", "bearer sk-secret", "Bearer sk-secre", "Bearer sk-secretX",
                          "Bearer sk-secretsk-secret", "Bearer  sk-secret", "Bearer sk-Secret", "Basic sk-secret"})
    EXPECT_FALSE(k.accepts(bad)) << "'" << bad << "'";
  // A key compared against a token that is the key repeated must not pass (the comparison wraps the key).
  EXPECT_FALSE(ApiKeys::load("ab", "", nullptr).accepts("Bearer abab"));
}

TEST(ApiKeys, RefusesBadSources) {
  EXPECT_THROW(ApiKeys::load("", "/nonexistent/rocket-keys", nullptr), Error);
  EXPECT_THROW(ApiKeys::load("", write_file("rocket_keys_empty.txt", "# nothing\n\n"), nullptr), Error);
  EXPECT_THROW(ApiKeys::load("", write_file("rocket_keys_space.txt", "sk-has space\n"), nullptr), Error);
  EXPECT_THROW(ApiKeys::load("sk-\x01", "", nullptr), Error);
}

}  // namespace
}  // namespace rocket
