// `kvremap profile` through the real CLI, and KVREMAP_PROFILE_PATH through LD_PRELOAD: profiles exported on one
// host and imported on another size that host's first start; a read-only layer sizes a start and is never
// written; an untrusted layer is refused in one line; each subcommand's problems and bad command lines.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "policy/profile.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

namespace fs = std::filesystem;
using kvremap::testing::count_of;
using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

// Every variable that names a profile directory, unset unless a test sets it.
const std::vector<std::string> kProfileVariables = {"KVREMAP_PROFILE_DIR", "KVREMAP_PROFILE_PATH", "XDG_CACHE_HOME",
                                                    "HOME", "KVREMAP_TRACE_DIR", "KVREMAP_MODE"};

std::vector<std::string> unset_except(const std::vector<std::string>& env) {
  std::vector<std::string> unset;
  for (const std::string& variable : kProfileVariables) {
    bool set = false;
    for (const std::string& e : env) set = set || e.starts_with(variable + "=");
    if (!set) unset.push_back(variable);
  }
  return unset;
}

RunResult profile_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {KVREMAP_CLI, "profile"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, env, unset_except(env), 60);
}

struct Start {
  RunResult run;
  std::vector<nlohmann::json> commits;
  bool sized = false;  // a "kv sizing adjusted" event: a profile moved the engine's sizing query
};

// The seed vLLM replica at 0.95 under LD_PRELOAD, as a user's engine starts, with `env` naming the profiles.
Start serve(std::vector<std::string> env) {
  const std::string traces = make_temp_dir();
  std::vector<std::string> all = kvremap::testing::scenario_simcuda_env(VLLM_LIKE, SEED_SCENARIO);
  all.insert(all.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + traces});
  all.insert(all.end(), env.begin(), env.end());
  Start s;
  s.run = run_program({link_as(VLLM_LIKE, "vllm"), "serve", "--scenario", SEED_SCENARIO, "--gpu-memory-utilization",
                       "0.95"},
                      all, unset_except(all), 120);
  for (const std::string& file : trace_files(traces))
    for (const auto& e : kvremap::trace::read_trace(file).other_events) {
      if (e.name == "kv committed") s.commits.push_back(e.args);
      if (e.name == "kv sizing adjusted") s.sized = true;
    }
  return s;
}

// Name and contents of every entry: what a directory holds, to compare before and after.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    out[e.path().filename().string()] = text.str();
  }
  return out;
}

std::size_t profiles_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".json";
  return n;
}

// A private directory, as the library makes one.
std::string private_dir() {
  const std::string dir = make_temp_dir() + "/profiles";
  fs::create_directory(dir);
  chmod(dir.c_str(), 0700);
  return dir;
}

// A profile the library would write for `model` on an 80 GiB device, written `age_s` ago: returns its name.
std::string write_profile(const std::string& dir, const std::string& model, std::int64_t age_s = 0) {
  kvremap::policy::ProfileKey key;
  key.argv = {"vllm", "serve", model, "--gpu-memory-utilization", "0.95"};
  key.device_name = "Simulated H100";
  key.device_total_bytes = 80ull << 30;
  kvremap::policy::Profile p;
  p.key = kvremap::policy::key_text(key);
  p.kv_requested_bytes = 40ull << 30;
  p.kv_tensors = 2;
  p.granularity_bytes = 2ull << 20;
  p.margin_bytes = -(3ll << 30);
  p.headroom_bytes = 1ull << 30;
  p.written_at = p.measured_at = static_cast<std::int64_t>(std::time(nullptr)) - age_s;
  const std::string name = kvremap::policy::profile_file_name(key);
  std::ofstream(dir + "/" + name) << kvremap::policy::to_json(p);
  chmod((dir + "/" + name).c_str(), 0600);
  return name;
}

void expect_all_kv_on_device(const Start& s) {
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  ASSERT_EQ(s.commits.size(), 1u) << s.run.err;
  EXPECT_EQ(s.commits[0].at("host_bytes").get<std::uint64_t>(), 0u) << s.commits[0].dump();
  EXPECT_TRUE(s.sized) << "sized from the profile: " << s.run.err;
}

}  // namespace

TEST(ProfileTools, ProfilesExportedOnHostAAndImportedOnHostBSizeBsFirstStart) {
  const std::string home_a = make_temp_dir(), home_b = make_temp_dir(), bundle = make_temp_dir() + "/bundle.json";
  // Host A: the default profile directory under its HOME (an empty XDG_CACHE_HOME is ignored, as the XDG rules say).
  const Start a = serve({"HOME=" + home_a, "XDG_CACHE_HOME="});
  ASSERT_EQ(a.run.exit_code, 0) << a.run.err;
  ASSERT_EQ(profiles_in(home_a + "/.cache/kvremap"), 1u) << a.run.err;
  const RunResult exported = profile_cli({"export", "-o", bundle}, {"HOME=" + home_a, "XDG_CACHE_HOME="});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_NE(exported.err.find("1 profile of " + home_a + "/.cache/kvremap into " + bundle), std::string::npos)
      << exported.err;

  // Host B: another HOME with an empty profile directory.
  fs::create_directories(home_b + "/.cache/kvremap");
  const RunResult imported = profile_cli({"import", bundle}, {"HOME=" + home_b, "XDG_CACHE_HOME="});
  ASSERT_EQ(imported.exit_code, 0) << imported.out << imported.err;
  EXPECT_NE(imported.out.find("1 of 1 profile imported into " + home_b + "/.cache/kvremap"), std::string::npos)
      << imported.out;
  EXPECT_EQ(snapshot(home_b + "/.cache/kvremap"), snapshot(home_a + "/.cache/kvremap"));
  expect_all_kv_on_device(serve({"HOME=" + home_b, "XDG_CACHE_HOME="}));
}

TEST(ProfileTools, AReadOnlyLayerSizesTheStartAndIsNeverWritten) {
  const std::string layer = private_dir();
  ASSERT_EQ(serve({"KVREMAP_PROFILE_DIR=" + layer}).run.exit_code, 0);
  ASSERT_EQ(profiles_in(layer), 1u);
  ASSERT_EQ(chmod(layer.c_str(), 0500), 0);
  const auto before = snapshot(layer);
  const std::string writable = make_temp_dir() + "/not-yet";
  const std::vector<std::string> env = {"KVREMAP_PROFILE_DIR=" + writable, "KVREMAP_PROFILE_PATH=:" + layer + ":"};

  const Start s = serve(env);
  expect_all_kv_on_device(s);
  EXPECT_NE(s.run.err.find("profiles in " + writable + ", then read-only :" + layer + ":"), std::string::npos)
      << s.run.err;
  EXPECT_EQ(snapshot(layer), before) << "a read-only layer is never written";
  // The start's own commit wrote its profile to the writable directory; its marker is gone.
  const auto written = snapshot(writable);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_TRUE(written.begin()->first.ends_with(".json"));

  const RunResult list = profile_cli({"list"}, env);
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(writable + " (written, from KVREMAP_PROFILE_DIR): 1 profile"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find(layer + " (read-only, from KVREMAP_PROFILE_PATH): 1 profile"), std::string::npos) << list.out;
  chmod(layer.c_str(), 0700);
}

TEST(ProfileTools, AnUntrustedLayerIsRefusedInOneLineAndTheStartFallsBackToTheEngine) {
  const std::string layer = private_dir();
  ASSERT_EQ(serve({"KVREMAP_PROFILE_DIR=" + layer}).run.exit_code, 0);
  ASSERT_EQ(chmod(layer.c_str(), 0777), 0);
  const std::vector<std::string> env = {"KVREMAP_PROFILE_DIR=" + make_temp_dir() + "/w",
                                        "KVREMAP_PROFILE_PATH=" + layer};
  const Start s = serve(env);
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  EXPECT_FALSE(s.sized) << s.run.err;
  EXPECT_EQ(count_of(s.run.err, "is writable by group or others (mode 0777): another user could plant or replace "
                                "profiles there, so this read-only layer is not searched"),
            1u)
      << s.run.err;
  const RunResult verify = profile_cli({"verify"}, env);
  EXPECT_EQ(verify.exit_code, 1);
  EXPECT_EQ(count_of(verify.err, "\n"), 1u) << verify.err;
  chmod(layer.c_str(), 0700);
}

// Layers are searched in order: a corrupt copy in the first is one line naming it, and the second sizes the start.
TEST(ProfileTools, ABadProfileInOneLayerIsOneLineAndTheNextLayerSizesTheStart) {
  const std::string good = private_dir(), bad = private_dir();
  ASSERT_EQ(serve({"KVREMAP_PROFILE_DIR=" + good}).run.exit_code, 0);
  const auto files = snapshot(good);
  ASSERT_EQ(files.size(), 1u);
  const std::string name = files.begin()->first;
  std::ofstream(bad + "/" + name) << "{";
  chmod((bad + "/" + name).c_str(), 0600);

  const Start s = serve({"KVREMAP_PROFILE_DIR=" + make_temp_dir() + "/w", "KVREMAP_PROFILE_PATH=" + bad + ":" + good});
  expect_all_kv_on_device(s);
  EXPECT_EQ(count_of(s.run.err, "ignoring the profile " + bad + "/" + name + ": not JSON"), 1u) << s.run.err;
  EXPECT_EQ(snapshot(good), files);
}

TEST(ProfileTools, ListAndShowGiveTheKeyPartsAndFiguresInHumanUnits) {
  const std::string dir = private_dir();
  const std::string name = write_profile(dir, "Qwen/Qwen3-8B", 3 * 86400);
  const RunResult list = profile_cli({"list", dir});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(dir + " (written, from DIR): 1 profile\n"), std::string::npos) << list.out;
  for (const char* part : {"vllm", "Qwen/Qwen3-8B", "Simulated H100 (80.00 GiB)", "40.00 GiB", "3 d"})
    EXPECT_NE(list.out.find(part), std::string::npos) << part << "\n" << list.out;
  EXPECT_NE(list.out.find(name), std::string::npos) << list.out;

  const RunResult show = profile_cli({"show", name}, {"KVREMAP_PROFILE_DIR=" + dir});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("KV requested  40.00 GiB in 2 tensors (granularity 2.00 MiB)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("margin        -3.00 GiB (a deficit)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("(3 d ago)"), std::string::npos) << show.out;
  EXPECT_EQ(profile_cli({"show", dir + "/" + name}).out, show.out);
  const RunResult missing = profile_cli({"show", "vllm-0000000000000000-rank0.json"}, {"KVREMAP_PROFILE_DIR=" + dir});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(count_of(missing.err, "\n"), 1u) << missing.err;
}

TEST(ProfileTools, VerifyNamesEachProblemInOneLineAndExitsOne) {
  const std::string dir = private_dir();
  const std::string good = write_profile(dir, "a");
  RunResult clean = profile_cli({"verify", dir});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("1 file in 1 directory: clean"), std::string::npos) << clean.out;

  std::ofstream(dir + "/notes.txt") << "x";
  std::ofstream(dir + "/" + good + ".tmp.123.abc") << "{";
  std::ofstream(dir + "/vllm-0000000000000000-rank0.json") << "{";
  fs::copy_file(dir + "/" + good, dir + "/vllm-1111111111111111-rank0.json");
  std::ofstream(dir + "/vllm-2222222222222222-rank0.json.unconfirmed") << "";
  const std::string shared = write_profile(dir, "b");
  chmod((dir + "/" + shared).c_str(), 0666);
  for (const auto& e : fs::directory_iterator(dir)) chmod(e.path().c_str(), e.path().filename() == shared ? 0666 : 0600);

  const RunResult r = profile_cli({"verify", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_of(r.err, "\n"), 6u) << r.err;
  for (const std::string& file : {std::string("notes.txt"), good + ".tmp.123.abc",
                                  std::string("vllm-0000000000000000-rank0.json: not JSON"),
                                  std::string("vllm-1111111111111111-rank0.json: its key is that of " + good),
                                  std::string("vllm-2222222222222222-rank0.json.unconfirmed: a failed-start marker of no profile"),
                                  shared + ": it is writable by group or others"})
    EXPECT_NE(r.err.find(dir + "/" + file), std::string::npos) << file << "\n" << r.err;
}

TEST(ProfileTools, ImportNamesEachBadEntryAndWritesOnlyWholeValidProfiles) {
  const std::string from = private_dir(), to = make_temp_dir() + "/new/profiles";
  write_profile(from, "a");
  write_profile(from, "b");
  const std::string bundle_path = make_temp_dir() + "/bundle.json";
  ASSERT_EQ(profile_cli({"export", from, "-o", bundle_path}).exit_code, 0);
  nlohmann::json bundle = nlohmann::json::parse(std::ifstream(bundle_path));
  ASSERT_EQ(bundle["profiles"].size(), 2u);
  nlohmann::json tampered = bundle["profiles"][1];
  tampered["profile"]["key"] = tampered["profile"]["key"].get<std::string>() + " ";
  nlohmann::json incomplete = bundle["profiles"][1];
  incomplete["name"] = "vllm-3333333333333333-rank0.json";
  incomplete["profile"].erase("kv_requested_bytes");
  bundle["profiles"][1] = tampered;
  bundle["profiles"].push_back(incomplete);
  std::ofstream(bundle_path) << bundle.dump();

  const RunResult r = profile_cli({"import", bundle_path, to});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(count_of(r.err, "not imported: " + bundle_path + " entry "), 2u) << r.err;
  EXPECT_NE(r.err.find("entry 1 (" + tampered["name"].get<std::string>() + "): its key is that of "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("entry 2 (vllm-3333333333333333-rank0.json): missing field kv_requested_bytes"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("1 of 3 profiles imported into " + to), std::string::npos) << r.out;
  const auto written = snapshot(to);
  ASSERT_EQ(written.size(), 1u) << "only the whole, valid entry; no temporary file";
  EXPECT_EQ(written.begin()->first, bundle["profiles"][0]["name"].get<std::string>());
  struct stat st {};
  ASSERT_EQ(stat(to.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  std::ofstream(bundle_path) << "not json";
  const RunResult bad = profile_cli({"import", bundle_path, to});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(count_of(bad.err, "\n"), 1u) << bad.err;
  EXPECT_NE(bad.err.find("not a kvremap profile bundle"), std::string::npos) << bad.err;
}

TEST(ProfileTools, PruneRemovesWhatItSaysAndADryRunNothing) {
  const std::string dir = private_dir();
  const std::string old = write_profile(dir, "old-model", 40 * 86400);
  const std::string recent = write_profile(dir, "recent-model");
  std::ofstream(dir + "/" + old + ".unconfirmed") << "";
  chmod((dir + "/" + old + ".unconfirmed").c_str(), 0600);

  const RunResult dry = profile_cli({"prune", dir, "--older-than", "30d", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove " + old), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("would remove 1 of 2 profiles"), std::string::npos) << dry.out;
  EXPECT_EQ(snapshot(dir).size(), 3u);

  const RunResult aged = profile_cli({"prune", dir, "--older-than", "30d"});
  EXPECT_EQ(aged.exit_code, 0) << aged.err;
  EXPECT_NE(aged.out.find("removed " + old), std::string::npos) << aged.out;
  EXPECT_EQ(snapshot(dir).size(), 1u) << "the profile and its marker";

  const RunResult keyed = profile_cli({"prune", dir, "--key-contains", "recent-model"});
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  EXPECT_NE(keyed.out.find("removed " + recent), std::string::npos) << keyed.out;
  EXPECT_TRUE(snapshot(dir).empty());
}

TEST(ProfileTools, BadCommandLinesExitTwoWithOneLine) {
  const std::string dir = private_dir();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, {"prune", dir}, {"prune", dir, "--older-than", "3x"}, {"show"}, {"list"},
        {"list", std::string("/tmp/a\x1b[31m")}}) {
    // No directory known: neither KVREMAP_PROFILE_DIR nor HOME, and an empty XDG_CACHE_HOME.
    const RunResult r = profile_cli(args, {"XDG_CACHE_HOME="});
    std::string shown;
    for (const std::string& a : args) shown += a + " ";
    EXPECT_EQ(r.exit_code, 2) << shown << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1u) << shown << r.err;
  }
  // kvremap run reads KVREMAP_PROFILE_PATH as the library does: a relative entry stops it before the command.
  const RunResult run = run_program({KVREMAP_CLI, "run", "--", "true"}, {"KVREMAP_PROFILE_PATH=/ok:relative"},
                                    unset_except({"KVREMAP_PROFILE_PATH=x"}), 60);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("KVREMAP_PROFILE_PATH entry 'relative' is not an absolute path"), std::string::npos) << run.err;
}
