// vLLM's process tree as it starts today (engine_tree.py): spawned children renamed by setproctitle before
// any CUDA call still read the engine's own command line, handed down from the process that started it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "policy/engine_root.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::link_as;
using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

struct Deferred {
  std::string engine;
  bool graphs_expected = false;
};

struct TreeRun {
  RunResult run;
  std::vector<Deferred> deferred;    // one per trace that deferred KV
  std::vector<std::string> triggers;  // each "kv committed" event's trigger
  std::vector<std::string> serving;   // each "kv serving port open" event's `where`
};

// Debian's interpreter: Debian's python3-setproctitle is installed for it.
TreeRun run_tree(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {}) {
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = {"ENGINE_TREE_DRIVER=" SIMCUDA_DRIVER, "ENGINE_TREE_KERNELS=" ENGINE_TREE_KERNELS,
                                  "SIMCUDA_DEVICE_MEMORY=4GiB",
                                  "SIMCUDA_CONTEXT_BYTES=0",        "KVREMAP_MODE=defer",
                                  "LD_PRELOAD=" KVREMAP_PRELOAD,    "KVREMAP_TRACE_DIR=" + dir};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  TreeRun t;
  // A root handed down to the test itself is not the tree's.
  t.run = run_program(argv, env, {std::string(kvremap::policy::kEngineRootVariable)}, 120);
  for (const std::string& file : trace_files(dir)) {
    for (const auto& e : kvremap::trace::read_trace(file).other_events)
      if (e.name == "kv deferred")
        t.deferred.push_back({e.args.at("engine").get<std::string>(), e.args.at("graphs_expected").get<bool>()});
      else if (e.name == "kv committed")
        t.triggers.push_back(e.args.at("trigger").get<std::string>());
      else if (e.name == "kv serving port open")
        t.serving.push_back(e.args.at("where").get<std::string>());
  }
  return t;
}

// A process's pid and start time, as kvremap names an engine root.
std::optional<kvremap::policy::ProcessStamp> stamp_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  return kvremap::policy::stamp_from_stat(pid, std::string((std::istreambuf_iterator<char>(in)),
                                                          std::istreambuf_iterator<char>()));
}

}  // namespace

// The worker is a grandchild spawned twice over, every process of the tree renamed: it reads the flags of
// `vllm serve` as given, so --enforce-eager means no graphs and its absence means graphs.
TEST(EngineTree, ASpawnedRenamedWorkerReadsTheEnginesOwnCommandLine) {
  const std::string vllm = link_as(ENGINE_TREE, "vllm");
  for (const bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "--enforce-eager" : "graphs");
    std::vector<std::string> argv = {"/usr/bin/python3", vllm, "serve", "org/model-a", "--port", "8000"};
    if (eager) argv.push_back("--enforce-eager");
    const TreeRun t = run_tree(argv);
    ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_NE(t.run.out.find("engine_tree: worker titled VLLM::Worker_TP0 allocated its KV cache"), std::string::npos)
        << t.run.out;
    ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
    EXPECT_EQ(t.deferred[0].engine, "vllm");
    EXPECT_EQ(t.deferred[0].graphs_expected, !eager);
  }
}

// A handed-down root that names no ancestor (here a live, unrelated process with its true start time) is
// not trusted: the worker falls back to what /proc shows, its own title, which carries no flags.
TEST(EngineTree, ARootThatIsNoAncestorIsNotTrusted) {
  const pid_t unrelated = fork();
  ASSERT_GE(unrelated, 0);
  if (unrelated == 0) {
    pause();
    _exit(0);
  }
  const auto stamp = stamp_of(unrelated);
  ASSERT_TRUE(stamp.has_value());
  const std::string root =
      kvremap::policy::encode_engine_root({*stamp, {"/usr/local/bin/vllm", "serve", "org/model-a"}});
  const std::string script = ENGINE_TREE;
  const TreeRun t = run_tree({"/usr/bin/python3", "-c",
                              "from multiprocessing.spawn import spawn_main; import runpy; runpy.run_path('" + script +
                                  "', run_name='standalone')"},
                             {std::string(kvremap::policy::kEngineRootVariable) + "=" + root});
  kill(unrelated, SIGKILL);
  waitpid(unrelated, nullptr, 0);
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
  EXPECT_EQ(t.deferred[0].engine, "vllm") << "the worker's own title names the engine";
  EXPECT_FALSE(t.deferred[0].graphs_expected) << "the untrusted root's flags were read";
}

// vLLM's engine dropping its graphs on its own while its flags say graphs (no capture ever comes): the
// worker's start-up kernel runs on deferred KV — a listening socket of its own (torch.distributed's store)
// is not the serving port — and once the root listens on its --port, the worker's first serving kernel
// commits first, in another process than the one that listened.
TEST(EngineTree, TheServingPortOpeningCommitsEveryProcessBeforeItServes) {
  // A port free now, for the root's command line.
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(probe, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  close(probe);

  const std::string vllm = link_as(ENGINE_TREE, "vllm");
  const TreeRun t = run_tree({"/usr/bin/python3", vllm, "serve", "org/model-a", "--port", port},
                             {"ENGINE_TREE_SERVE=1", "KVREMAP_LOG_LEVEL=info"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("engine_tree: worker ran its first serving kernel"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
  EXPECT_TRUE(t.deferred[0].graphs_expected) << "the flags said graphs";
  EXPECT_EQ(t.serving, std::vector<std::string>{"port " + port}) << "only the root's --port, once";
  EXPECT_EQ(t.triggers, std::vector<std::string>{"kernel launch after the serving port opened"})
      << "not the start-up kernel beside the worker's own listening socket: " << t.run.err;
}
