// interpose/profile_store on a real file system: directory resolution, atomic writes, refusals on load.
#include "interpose/kv/profile_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using kvremap::interpose::load_profile_file;
using kvremap::interpose::profile_directory;
using kvremap::interpose::ProfileDirectory;
using kvremap::interpose::write_profile_file;

namespace {

std::string fresh_dir() {
  std::string pattern = (fs::temp_directory_path() / "kvremap-profile-store-XXXXXX").string();
  return mkdtemp(pattern.data());
}

kvremap::policy::Profile sample(const std::string& key) {
  kvremap::policy::Profile p;
  p.key = key;
  p.kv_requested_bytes = 40ull << 30;
  p.margin_bytes = -(3ll << 30);
  p.headroom_bytes = 1ull << 30;
  p.measured_at = 1700000000;
  p.written_at = 1700000001;
  return p;
}

}  // namespace

TEST(ProfileStore, DirectoryFollowsTheOptionThenXdgThenHome) {
  EXPECT_EQ(profile_directory("/p", "/x", "/h").path, "/p");
  EXPECT_FALSE(profile_directory("/p", "/x", "/h").is_default);
  EXPECT_EQ(profile_directory("", "/x", "/h").path, "/x/kvremap");
  EXPECT_TRUE(profile_directory("", "/x", "/h").is_default);
  EXPECT_EQ(profile_directory("", nullptr, "/h").path, "/h/.cache/kvremap");
  EXPECT_EQ(profile_directory("", "relative", "/h").path, "/h/.cache/kvremap");
  EXPECT_EQ(profile_directory("", nullptr, nullptr).path, "");
  EXPECT_EQ(profile_directory("off", "/x", "/h").path, "");
}

TEST(ProfileStore, WritesAWholeFileAndReadsItBack) {
  const std::string root = fresh_dir();
  const ProfileDirectory dir{root + "/a/b/kvremap", true};
  const auto profile = sample("key one");
  std::string problem;
  const auto path = write_profile_file(dir, "vllm-1-rank0.json", kvremap::policy::to_json(profile), &problem);
  ASSERT_TRUE(path) << problem;
  EXPECT_EQ(*path, dir.path + "/vllm-1-rank0.json");
  struct stat st {};
  ASSERT_EQ(stat(dir.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the default cache directory is the user's own";
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "vllm-1-rank0.json") << "no temporary file left";
  }
  EXPECT_EQ(entries, 1u);
  const auto loaded = load_profile_file(*path, "key one", &problem);
  ASSERT_TRUE(loaded) << problem;
  EXPECT_EQ(*loaded, profile);
  // A rewrite replaces the file whole.
  auto later = profile;
  later.serving_peak_bytes = 5ull << 30;
  ASSERT_TRUE(write_profile_file(dir, "vllm-1-rank0.json", kvremap::policy::to_json(later), &problem));
  EXPECT_EQ(load_profile_file(*path, "key one", &problem), later);
  fs::remove_all(root);
}

TEST(ProfileStore, AnUnwritableDirectoryIsOneLineNamingPathAndError) {
  const std::string root = fresh_dir();
  std::ofstream(root + "/file") << "x";  // a directory below a regular file cannot exist, even for root
  std::string problem;
  EXPECT_FALSE(write_profile_file({root + "/file/sub", false}, "p.json", "{}", &problem));
  EXPECT_NE(problem.find(root + "/file/sub"), std::string::npos) << problem;
  EXPECT_NE(problem.find("Not a directory"), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos);
  fs::remove_all(root);
}

TEST(ProfileStore, MissingIsNothingAndBadFilesAreOneProblem) {
  const std::string root = fresh_dir();
  std::string problem;
  EXPECT_FALSE(load_profile_file(root + "/none.json", "k", &problem));
  EXPECT_EQ(problem, "") << "no profile yet is not a problem";

  const std::string good = kvremap::policy::to_json(sample("k"));
  struct Bad {
    const char* name;
    std::string text;
    const char* expected_key;
  };
  for (const Bad& b : {Bad{"truncated", good.substr(0, good.size() / 2), "k"}, Bad{"other key", good, "k2"},
                       Bad{"too large", std::string(kvremap::policy::kMaxProfileBytes + 10, ' '), "k"},
                       Bad{"other version", [&] {
                             std::string t = good;
                             t.replace(t.find("\"schema_version\": 2"), 19, "\"schema_version\": 3");
                             return t;
                           }(), "k"}}) {
    SCOPED_TRACE(b.name);
    std::ofstream(root + "/p.json", std::ios::trunc) << b.text;
    problem.clear();
    EXPECT_FALSE(load_profile_file(root + "/p.json", b.expected_key, &problem));
    EXPECT_NE(problem.find(root + "/p.json"), std::string::npos) << problem;
    EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  }
  fs::remove_all(root);
}
