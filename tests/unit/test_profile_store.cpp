// interpose/profile_store on a real file system: directory resolution and trust, exclusive atomic writes,
// refusals on load (links, FIFOs, other users' files), the per-start failed-start markers.
#include "interpose/kv/profile_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using kvremap::interpose::DirectoryProblem;
using kvremap::interpose::profile_directory;
using kvremap::interpose::ProfileDirectory;
using kvremap::interpose::ProfileStore;
using kvremap::policy::StartIdentity;

namespace {

// Files owned by this uid are another user's to the process under test (nobody, on most systems).
constexpr uid_t kOtherUser = 65534;

std::string fresh_dir() {
  std::string pattern = (fs::temp_directory_path() / "kvremap-profile-store-XXXXXX").string();
  return mkdtemp(pattern.data());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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

// The directory opened as the library opens it, or a test failure naming why not.
std::optional<ProfileStore> open_store(const std::string& path, bool create = false) {
  DirectoryProblem kind = DirectoryProblem::none;
  std::string problem;
  auto store = ProfileStore::open({path, false}, create, &kind, &problem);
  EXPECT_TRUE(store) << problem;
  return store;
}

struct Refusal {
  DirectoryProblem kind = DirectoryProblem::none;
  std::string problem;
  bool opened = false;
};
Refusal try_open(const std::string& path, bool create = false) {
  Refusal r;
  r.opened = ProfileStore::open({path, false}, create, &r.kind, &r.problem).has_value();
  return r;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
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
  const std::string dir = root + "/a/b/kvremap";
  const auto store = open_store(dir, true);
  ASSERT_TRUE(store);
  const auto profile = sample("key one");
  std::string problem;
  const auto path = store->write("vllm-1-rank0.json", kvremap::policy::to_json(profile), &problem);
  ASSERT_TRUE(path) << problem;
  EXPECT_EQ(*path, dir + "/vllm-1-rank0.json");
  EXPECT_EQ(mode_of(*path), 0600u) << "a profile holds the command line: the user's alone";
  std::size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "vllm-1-rank0.json") << "no temporary file left";
  }
  EXPECT_EQ(entries, 1u);
  const auto loaded = store->load("vllm-1-rank0.json", "key one", &problem);
  ASSERT_TRUE(loaded) << problem;
  EXPECT_EQ(*loaded, profile);
  // A rewrite replaces the file whole.
  auto later = profile;
  later.serving_peak_bytes = 5ull << 30;
  ASSERT_TRUE(store->write("vllm-1-rank0.json", kvremap::policy::to_json(later), &problem));
  EXPECT_EQ(store->load("vllm-1-rank0.json", "key one", &problem), later);
  fs::remove_all(root);
}

// What the `kvremap profile` tool reads through the store: the entries, a profile's text whatever its key, removal.
TEST(ProfileStore, ListsReadsAnyKeyAndRemovesForTheTool) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  const std::string text = kvremap::policy::to_json(sample("some key"));
  ASSERT_TRUE(store->write("b.json", text, &problem)) << problem;
  std::ofstream(root + "/a.txt") << "x";
  EXPECT_EQ(store->entries(), (std::vector<std::string>{"a.txt", "b.json"}));
  EXPECT_EQ(store->read_trusted("b.json", &problem), text) << problem;
  EXPECT_FALSE(store->read_trusted("missing.json", &problem));
  EXPECT_TRUE(problem.empty()) << problem;
  fs::create_symlink(root + "/b.json", root + "/c.json");
  EXPECT_FALSE(store->read_trusted("c.json", &problem));
  EXPECT_NE(problem.find("symbolic link"), std::string::npos) << problem;
  EXPECT_TRUE(store->remove("b.json", &problem)) << problem;
  EXPECT_FALSE(store->remove("b.json", &problem));
  EXPECT_NE(problem.find("cannot remove " + root + "/b.json: "), std::string::npos) << problem;
  fs::remove_all(root);
}

// A read-only layer another user could change is skipped, not a reason to turn profiles off.
TEST(ProfileStore, AnUntrustedReadOnlyLayerNamesItsVariableAndIsOnlySkipped) {
  const std::string root = fresh_dir();
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  DirectoryProblem kind = DirectoryProblem::none;
  std::string problem;
  EXPECT_FALSE(ProfileStore::open({root, false, "KVREMAP_PROFILE_PATH", true}, false, &kind, &problem));
  EXPECT_EQ(kind, DirectoryProblem::untrusted);
  EXPECT_NE(problem.find("so this read-only layer is not searched"), std::string::npos) << problem;
  EXPECT_NE(problem.find("drop it from KVREMAP_PROFILE_PATH"), std::string::npos) << problem;
  EXPECT_EQ(problem.find("profiles are off"), std::string::npos) << problem;
  EXPECT_FALSE(ProfileStore::open({"/a\x01" "b", false, "KVREMAP_PROFILE_PATH", true}, false, &kind, &problem));
  EXPECT_NE(problem.find("(from KVREMAP_PROFILE_PATH) holds a control character"), std::string::npos) << problem;
  fs::remove_all(root);
}

// Every directory kvremap creates, the default one or not, parents included, is the user's alone.
TEST(ProfileStore, CreatedDirectoriesAre0700WithTheirParents) {
  const std::string root = fresh_dir();
  const mode_t old_mask = umask(0);  // the most permissive umask: 0700 must come from kvremap
  const auto store = open_store(root + "/a/b/profiles", true);
  umask(old_mask);
  ASSERT_TRUE(store);
  for (const char* dir : {"/a", "/a/b", "/a/b/profiles"}) EXPECT_EQ(mode_of(root + dir), 0700u) << dir;
  fs::remove_all(root);
}

TEST(ProfileStore, AnUnwritableDirectoryIsOneLineNamingPathAndError) {
  const std::string root = fresh_dir();
  std::ofstream(root + "/file") << "x";  // a directory below a regular file cannot exist, even for root
  const Refusal r = try_open(root + "/file/sub", true);
  EXPECT_FALSE(r.opened);
  EXPECT_EQ(r.kind, DirectoryProblem::unusable);
  EXPECT_NE(r.problem.find(root + "/file/sub"), std::string::npos) << r.problem;
  EXPECT_NE(r.problem.find("Not a directory"), std::string::npos) << r.problem;
  EXPECT_EQ(r.problem.find('\n'), std::string::npos);
  // Not asked to create it, a missing directory is no profile yet: no problem.
  const Refusal missing = try_open(root + "/none");
  EXPECT_FALSE(missing.opened);
  EXPECT_EQ(missing.kind, DirectoryProblem::none);
  EXPECT_EQ(missing.problem, "");
  fs::remove_all(root);
}

// A directory others can write to, or another user's: refused, one line naming it, why and what works.
TEST(ProfileStore, ADirectoryOthersCanWriteIsRefused) {
  const std::string root = fresh_dir();
  for (const mode_t mode : {0777u, 0770u, 01777u}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(chmod(root.c_str(), mode), 0);
    const Refusal r = try_open(root, true);
    EXPECT_FALSE(r.opened);
    EXPECT_EQ(r.kind, DirectoryProblem::untrusted);
    EXPECT_NE(r.problem.find(root), std::string::npos) << r.problem;
    EXPECT_NE(r.problem.find("writable by group or others"), std::string::npos) << r.problem;
    EXPECT_NE(r.problem.find("profiles are off"), std::string::npos) << r.problem;
    EXPECT_EQ(r.problem.find('\n'), std::string::npos);
  }
  ASSERT_EQ(chmod(root.c_str(), 0755), 0);
  EXPECT_TRUE(try_open(root).opened) << "writable by its owner alone";
  fs::remove_all(root);
}

TEST(ProfileStore, AnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "making a directory another user's needs root";
  const std::string root = fresh_dir();
  ASSERT_EQ(chown(root.c_str(), kOtherUser, kOtherUser), 0);
  const Refusal r = try_open(root);
  EXPECT_FALSE(r.opened);
  EXPECT_EQ(r.kind, DirectoryProblem::untrusted);
  EXPECT_NE(r.problem.find("owned by uid 65534"), std::string::npos) << r.problem;
  ASSERT_EQ(chown(root.c_str(), 0, 0), 0);
  EXPECT_TRUE(try_open(root).opened) << "root's own directory is trusted";
  fs::remove_all(root);
}

// The temporary file is created exclusively: a link planted at the name the old writer used
// (`<name>.tmp.<pid>`) is never written through, and the victim it points at stays as it was.
TEST(ProfileStore, ALinkPlantedAtATemporaryNameIsNeverWrittenThrough) {
  const std::string root = fresh_dir(), elsewhere = fresh_dir();
  const std::string victim = elsewhere + "/victim";
  std::ofstream(victim) << "the victim's own data\n";
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  const std::string planted = root + "/p.json.tmp." + std::to_string(getpid());
  ASSERT_EQ(symlink(victim.c_str(), planted.c_str()), 0);
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  const auto path = store->write("p.json", kvremap::policy::to_json(sample("k")), &problem);
  ASSERT_TRUE(path) << problem;
  EXPECT_EQ(slurp(victim), "the victim's own data\n");
  EXPECT_TRUE(fs::is_symlink(planted)) << "left as it was";
  EXPECT_TRUE(store->load("p.json", "k", &problem)) << problem;
  fs::remove_all(root);
  fs::remove_all(elsewhere);
}

TEST(ProfileStore, MissingIsNothingAndBadFilesAreOneProblem) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  EXPECT_FALSE(store->load("none.json", "k", &problem));
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
    EXPECT_FALSE(store->load("p.json", b.expected_key, &problem));
    EXPECT_NE(problem.find(root + "/p.json"), std::string::npos) << problem;
    EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  }
  fs::remove_all(root);
}

// A FIFO at a profile's name: refused at once (opening it for reading would wait for a writer for ever).
TEST(ProfileStore, AFifoIsRefusedWithoutWaiting) {
  const std::string root = fresh_dir();
  ASSERT_EQ(mkfifo((root + "/p.json").c_str(), 0600), 0);
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  alarm(20);  // a load that blocks ends the test run here instead of hanging it
  std::string problem;
  EXPECT_FALSE(store->load("p.json", "k", &problem));
  alarm(0);
  EXPECT_NE(problem.find(root + "/p.json"), std::string::npos) << problem;
  EXPECT_NE(problem.find("a FIFO"), std::string::npos) << problem;
  fs::remove_all(root);
}

// A link at a profile's name is not followed: nothing of the file it names reaches the message.
TEST(ProfileStore, ALinkAtAProfilesNameIsNeverFollowed) {
  const std::string root = fresh_dir(), elsewhere = fresh_dir();
  std::ofstream(elsewhere + "/secret") << "TOPSECRET-0123456789";
  ASSERT_EQ(symlink((elsewhere + "/secret").c_str(), (root + "/p.json").c_str()), 0);
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  EXPECT_FALSE(store->load("p.json", "k", &problem));
  EXPECT_NE(problem.find("symbolic link"), std::string::npos) << problem;
  EXPECT_EQ(problem.find("TOPSECRET"), std::string::npos) << problem;
  // Rewriting the profile replaces the link, never the file it names.
  ASSERT_TRUE(store->write("p.json", kvremap::policy::to_json(sample("k")), &problem)) << problem;
  EXPECT_EQ(slurp(elsewhere + "/secret"), "TOPSECRET-0123456789");
  EXPECT_FALSE(fs::is_symlink(root + "/p.json"));
  fs::remove_all(root);
  fs::remove_all(elsewhere);
}

// Profiles others could have written are not read: writable by group or others, or another user's.
TEST(ProfileStore, AProfileOthersCouldHaveWrittenIsRefused) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  ASSERT_TRUE(store->write("p.json", kvremap::policy::to_json(sample("k")), &problem)) << problem;
  ASSERT_EQ(chmod((root + "/p.json").c_str(), 0666), 0);
  EXPECT_FALSE(store->load("p.json", "k", &problem));
  EXPECT_NE(problem.find("writable by group or others (mode 0666)"), std::string::npos) << problem;
  ASSERT_EQ(chmod((root + "/p.json").c_str(), 0644), 0);
  problem.clear();
  EXPECT_TRUE(store->load("p.json", "k", &problem)) << problem;
  if (geteuid() == 0) {
    ASSERT_EQ(chown((root + "/p.json").c_str(), kOtherUser, kOtherUser), 0);
    EXPECT_FALSE(store->load("p.json", "k", &problem));
    EXPECT_NE(problem.find("owned by uid 65534"), std::string::npos) << problem;
  }
  fs::remove_all(root);
}

// Paths in messages have their control characters escaped: a name cannot forge a log line.
TEST(ProfileStore, PathsInMessagesAreEscaped) {
  const std::string root = fresh_dir();
  const std::string name = "p\nkvremap: forged\x1b[2J.json";
  ASSERT_EQ(mkfifo((root + "/" + name).c_str(), 0600), 0);
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  std::string problem;
  EXPECT_FALSE(store->load(name, "k", &problem));
  EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\x1b'), std::string::npos) << problem;
  EXPECT_NE(problem.find("p\\x0akvremap: forged\\x1b[2J.json"), std::string::npos) << problem;
  fs::remove_all(root);
}

// Markers are per start: two starts of one profile each have their own, neither refuses the other,
// and each removes only its own.
TEST(ProfileStore, EachStartHasItsOwnMarkerAndRemovesOnlyItsOwn) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  const StartIdentity me = kvremap::interpose::this_start();
  ASSERT_FALSE(me.host.empty());
  ASSERT_NE(me.start_ticks, 0u);
  StartIdentity peer = me;  // a start still running: this test's parent process
  peer.pid = getppid();
  peer.start_ticks = kvremap::interpose::process_start_ticks(peer.pid).value();
  std::string problem;
  ASSERT_TRUE(store->mark("p.json", me, &problem)) << problem;
  ASSERT_TRUE(store->mark("p.json", peer, &problem)) << "a second start's marker is not refused: " << problem;
  EXPECT_TRUE(fs::exists(root + "/" + kvremap::policy::marker_file_name("p.json", me)));
  // This process judges its own marker as a later program of it would: an earlier program of the same
  // process (before an exec) that never committed. Its peer is running.
  const auto seen = store->markers("p.json", me, 0);
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& m : seen) {
    EXPECT_EQ(m.problem, "");
    ASSERT_TRUE(m.owner);
    EXPECT_EQ(m.failed, m.owner->pid == me.pid) << m.file;
  }
  store->unmark("p.json", me);
  const auto left = store->markers("p.json", me, 0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].owner->pid, peer.pid) << "another start's marker stays";
  store->remove_failed("p.json", me, 0);
  EXPECT_EQ(store->markers("p.json", me, 0).size(), 1u) << "a running start's marker is never removed";
  fs::remove_all(root);
}

// A start of this host whose process is gone failed; its marker is removed as failed.
TEST(ProfileStore, AMarkerOfAStartThatIsGoneCountsAsFailed) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  const StartIdentity me = kvremap::interpose::this_start();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  StartIdentity gone = me;
  gone.pid = child;
  gone.start_ticks = kvremap::interpose::process_start_ticks(child).value_or(me.start_ticks + 1);
  waitpid(child, nullptr, 0);
  std::string problem;
  ASSERT_TRUE(store->mark("p.json", gone, &problem)) << problem;
  const auto seen = store->markers("p.json", me, 0);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].failed);
  store->remove_failed("p.json", me, 0);
  EXPECT_TRUE(store->markers("p.json", me, 0).empty());
  fs::remove_all(root);
}

// A marker of another host is running until it is older than the bound; this process cannot see it.
TEST(ProfileStore, AnotherHostsMarkerFailsOnlyOnceOlderThanTheBound) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  const StartIdentity me = kvremap::interpose::this_start();
  StartIdentity remote = me;
  remote.host = "another-host";
  std::string problem;
  ASSERT_TRUE(store->mark("p.json", remote, &problem)) << problem;
  const std::int64_t now = static_cast<std::int64_t>(time(nullptr));
  ASSERT_EQ(store->markers("p.json", me, now).size(), 1u);
  EXPECT_FALSE(store->markers("p.json", me, now)[0].failed);
  EXPECT_TRUE(store->markers("p.json", me, now + kvremap::policy::kForeignMarkerSeconds + 5)[0].failed);
  fs::remove_all(root);
}

// Only what kvremap wrote is a marker: a link, a FIFO, another user's file or text of another form
// is one line naming it and counts for nothing; the shared name of no start counts as failed.
TEST(ProfileStore, OnlyAKvremapMarkerCounts) {
  const std::string root = fresh_dir();
  const auto store = open_store(root);
  ASSERT_TRUE(store);
  const StartIdentity me = kvremap::interpose::this_start();
  std::ofstream(root + "/victim") << "v";
  ASSERT_EQ(symlink((root + "/victim").c_str(), (root + "/p.json.unconfirmed.link").c_str()), 0);
  ASSERT_EQ(mkfifo((root + "/p.json.unconfirmed.fifo").c_str(), 0600), 0);
  std::ofstream(root + "/p.json.unconfirmed.text") << "hello\n";
  const auto seen = store->markers("p.json", me, 0);
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& m : seen) {
    EXPECT_FALSE(m.failed) << m.file;
    EXPECT_NE(m.problem.find(root + "/" + m.file), std::string::npos) << m.problem;
  }
  store->remove_failed("p.json", me, 0);
  EXPECT_EQ(store->markers("p.json", me, 0).size(), 3u) << "what is no marker is never removed";
  EXPECT_EQ(slurp(root + "/victim"), "v");
  std::ofstream(root + "/p.json.unconfirmed") << "a start sized from this profile by pid 1\n";
  std::size_t failed = 0;
  for (const auto& m : store->markers("p.json", me, 0)) failed += m.failed;
  EXPECT_EQ(failed, 1u);
  fs::remove_all(root);
}

// The pure parts: the marker's text reads back, /proc stat's start time past a command with spaces and
// parentheses, and the judgement.
TEST(StartMarker, TextReadsBackAndJudgementFollowsThePlace) {
  using namespace kvremap::policy;
  StartIdentity a{"node-1", "boot", "pid:[4026531836]", 42, 1234};
  std::string problem;
  EXPECT_EQ(read_marker(marker_text(a), &problem), a) << problem;
  EXPECT_FALSE(read_marker("kvremap start marker 1\nhost x\n", &problem));
  EXPECT_FALSE(read_marker(std::string(kMaxMarkerBytes + 1, 'x'), &problem));
  EXPECT_EQ(marker_file_name("p.json", {"a.b/c", "", "", 7, 9}), "p.json.unconfirmed.a_b_c.7.9");
  EXPECT_EQ(start_ticks_from_stat("12 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987 19 20\n"), 987u);
  StartIdentity here = a;
  here.pid = 43;
  here.start_ticks = 99;
  EXPECT_FALSE(marker_failed(a, here, 1234, 0)) << "its process runs";
  EXPECT_TRUE(marker_failed(a, here, 5, 0)) << "the pid was reused";
  EXPECT_TRUE(marker_failed(a, here, std::nullopt, 0)) << "no such process";
  StartIdentity other_boot = here;
  other_boot.boot_id = "another boot";
  EXPECT_FALSE(marker_failed(a, other_boot, std::nullopt, kForeignMarkerSeconds));
  EXPECT_TRUE(marker_failed(a, other_boot, std::nullopt, kForeignMarkerSeconds + 1));
}
