// vLLM's process trees as they start today: spawned children renamed by setproctitle before any CUDA call
// (engine_tree.py), and Ray's workers, exec'd by a raylet (ray_tree.py), still read the engine's own
// command line, handed down from the process that started it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "policy/engine_root.h"
#include "policy/tree_notice.h"
#include "policy/options.h"
#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::count_of;
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
  std::vector<std::string> files;     // the trace files
  std::vector<std::string> problems;  // what validate said of each
  std::size_t option_errors = 0;      // "option error" events, over all traces
};

// How the tree runs under kvremap: LD_PRELOAD set by hand, or `kvremap run` in front of its command.
enum class Under { preload, kvremap_run };

// Debian's interpreter: Debian's python3-setproctitle is installed for it.
TreeRun run_tree(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
                 Under under = Under::preload) {
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = {"ENGINE_TREE_DRIVER=" SIMCUDA_DRIVER, "ENGINE_TREE_KERNELS=" ENGINE_TREE_KERNELS,
                                  "SIMCUDA_DEVICE_MEMORY=4GiB", "SIMCUDA_CONTEXT_BYTES=0", "KVREMAP_MODE=defer"};
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  // A root handed down to the test itself is not the tree's.
  std::vector<std::string> unset = {std::string(kvremap::policy::kEngineRootVariable),
                                    std::string(kvremap::policy::kOptionErrorsShownVariable),
                                    std::string(kvremap::policy::kStartLineShownVariable)};
  std::vector<std::string> command;
  if (under == Under::preload) {
    env.insert(env.end(), {"LD_PRELOAD=" KVREMAP_PRELOAD, "KVREMAP_TRACE_DIR=" + dir});
  } else {
    command = {KVREMAP_CLI, "run", "--library", KVREMAP_PRELOAD, "--trace-dir", dir, "--"};
    unset.insert(unset.end(), {"LD_PRELOAD", "KVREMAP_TRACE_DIR"});
  }
  command.insert(command.end(), argv.begin(), argv.end());
  TreeRun t;
  t.run = run_program(command, env, unset, 120);
  t.files = trace_files(dir);
  for (const std::string& file : t.files) {
    const kvremap::trace::Trace trace = kvremap::trace::read_trace(file);
    for (const std::string& p : kvremap::trace::validate(trace)) t.problems.push_back(file + ": " + p);
    for (const auto& e : trace.other_events)
      if (e.name == "kv deferred")
        t.deferred.push_back({e.args.at("engine").get<std::string>(), e.args.at("graphs_expected").get<bool>()});
      else if (e.name == "kv committed")
        t.triggers.push_back(e.args.at("trigger").get<std::string>());
      else if (e.name == "kv serving port open")
        t.serving.push_back(e.args.at("where").get<std::string>());
      else if (e.name == "option error")
        ++t.option_errors;
  }
  return t;
}

// A loopback port free now, for a root's --port.
std::string free_port() {
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(probe, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  EXPECT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(probe);
  return std::to_string(ntohs(address.sin_port));
}

// A `vllm serve` of another tree (ray_tree.py with RAY_TREE_HOLD_ROOT=1), alive under kvremap while this
// object lives: the root it hands its descendants is valid in every way — its pid and start time, a serving
// flag any process of this user can map — but being an ancestor of the tree under test.
class UnrelatedRoot {
 public:
  UnrelatedRoot() {
    int out[2], in[2];
    if (pipe(out) != 0) return;
    if (pipe(in) != 0) {
      close(out[0]);
      close(out[1]);
      return;
    }
    std::vector<std::string> argv = {"/usr/bin/python3", link_as(RAY_TREE, "vllm"), "serve", "org/model-b"};
    std::vector<std::string> env =
        kvremap::testing::child_environment({"LD_PRELOAD=" KVREMAP_PRELOAD, "RAY_TREE_HOLD_ROOT=1"},
                                            {std::string(kvremap::policy::kEngineRootVariable), "KVREMAP_TRACE_DIR"});
    std::vector<char*> args, envp;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    char c = 0;
    while (read(out[0], &c, 1) == 1 && c != '\n') value_ += c;
    close(out[0]);
  }
  ~UnrelatedRoot() {
    if (stdin_ >= 0) close(stdin_);  // it exits once its stdin closes
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  UnrelatedRoot(const UnrelatedRoot&) = delete;
  UnrelatedRoot& operator=(const UnrelatedRoot&) = delete;
  // Its KVREMAP_ENGINE_ROOT; empty when it could not be started or read.
  const std::string& value() const { return value_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string value_;
};

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

// A handed-down root that names no ancestor (here the root of a live `vllm serve` of another tree) is not
// trusted: the worker falls back to what /proc shows, its own title, which carries no flags.
TEST(EngineTree, ARootThatIsNoAncestorIsNotTrusted) {
  const UnrelatedRoot unrelated;
  const std::string root = unrelated.value();
  ASSERT_FALSE(root.empty());
  const std::string script = ENGINE_TREE;
  const TreeRun t = run_tree({"/usr/bin/python3", "-c",
                              "from multiprocessing.spawn import spawn_main; import runpy; runpy.run_path('" + script +
                                  "', run_name='standalone')"},
                             {std::string(kvremap::policy::kEngineRootVariable) + "=" + root});
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
  const std::string port = free_port();
  const std::string vllm = link_as(ENGINE_TREE, "vllm");
  const TreeRun t = run_tree({"/usr/bin/python3", vllm, "serve", "org/model-a", "--port", port},
                             {"ENGINE_TREE_SERVE=1", "KVREMAP_LOG_LEVEL=info"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("engine_tree: worker ran its first serving kernel"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
  EXPECT_TRUE(t.deferred[0].graphs_expected) << "the flags said graphs";
  // The root heard its own port open once, and only it; it never calls CUDA, so it writes no trace.
  const std::string heard = "the engine's server listens on its port " + port + ":";
  EXPECT_NE(t.run.err.find(heard), std::string::npos) << t.run.err;
  EXPECT_EQ(t.run.err.find(heard), t.run.err.rfind(heard)) << t.run.err;
  EXPECT_TRUE(t.serving.empty()) << "a trace of a process that never called CUDA";
  EXPECT_EQ(t.files.size(), 1u) << "the worker's only";
  EXPECT_EQ(t.triggers, std::vector<std::string>{"kernel launch after the serving port opened"})
      << "not the start-up kernel beside the worker's own listening socket: " << t.run.err;
}

// vLLM's API server is a process of its own that never calls CUDA (its engine core and workers do) and
// listens on the serving port: it writes no trace and says nothing, at exit least of all ("deferred
// nothing" would be a wrong cause: nothing was to be deferred there). A front process that does call CUDA
// after listening writes a trace, which holds the port's opening from before that call, and its "deferred
// nothing" line names the true cause at info level: it made no memory query.
TEST(EngineTree, AnApiServerThatNeverCallsCudaWritesNoTraceAndSaysNothing) {
  const std::string vllm = link_as(ENGINE_TREE, "vllm");
  const std::string port = free_port();
  const std::vector<std::string> argv = {"/usr/bin/python3", vllm, "serve", "org/model-a", "--port", port};
  const TreeRun front = run_tree(argv, {"ENGINE_TREE_FRONT=listen"});
  ASSERT_EQ(front.run.exit_code, 0) << front.run.out << front.run.err;
  EXPECT_NE(front.run.out.find("engine_tree: the front process listens"), std::string::npos) << front.run.out;
  EXPECT_EQ(front.files, std::vector<std::string>{});
  // Only the root's start-up line, once: the engine's root says kvremap is there.
  EXPECT_TRUE(front.run.err.starts_with("kvremap " KVREMAP_VERSION " loaded into vllm (pid ")) << front.run.err;
  EXPECT_EQ(count_of(front.run.err, "\n"), 1u) << front.run.err;
  const TreeRun quiet = run_tree(argv, {"ENGINE_TREE_FRONT=listen", "KVREMAP_LOG_LEVEL=error"});
  ASSERT_EQ(quiet.run.exit_code, 0) << quiet.run.out << quiet.run.err;
  EXPECT_EQ(quiet.run.err, "") << "KVREMAP_LOG_LEVEL=error silences the start-up line";

  const TreeRun used = run_tree(argv, {"ENGINE_TREE_FRONT=listen-then-cuda", "KVREMAP_LOG_LEVEL=info"});
  ASSERT_EQ(used.run.exit_code, 0) << used.run.out << used.run.err;
  EXPECT_NE(used.run.out.find("engine_tree: the front process allocated"), std::string::npos) << used.run.out;
  EXPECT_EQ(used.files.size(), 1u);
  EXPECT_EQ(used.problems, std::vector<std::string>{});
  EXPECT_EQ(used.serving, std::vector<std::string>{"port " + port}) << "the opening before the first CUDA call";
  EXPECT_NE(used.run.err.find("info: KVREMAP_MODE=defer deferred nothing: this process made no memory query"),
            std::string::npos)
      << used.run.err;
  EXPECT_EQ(used.run.err.find("warning"), std::string::npos) << used.run.err;
}

// `timeout 60 nice -n 19 vllm serve` with an invalid option: the wrappers, the engine and every process it
// spawns load kvremap and read the same value; the line is printed once, by the first of them, and each
// process still falls back on its own (its trace records the error). A value of the hand-down variable that
// names no ancestor (exported to a shell, say) silences nothing.
TEST(EngineTree, AnOptionErrorIsPrintedOncePerTree) {
  const std::string vllm = link_as(ENGINE_TREE, "vllm");
  const std::vector<std::string> argv = {"/usr/bin/timeout", "60", "/usr/bin/nice", "-n", "19", "/usr/bin/python3",
                                         vllm, "serve", "org/model-a", "--enforce-eager"};
  const std::string line = "kvremap: KVREMAP_STRICT='2' is invalid";
  const TreeRun t = run_tree(argv, {"KVREMAP_STRICT=2"});
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_EQ(count_of(t.run.err, line), 1u) << t.run.err;
  EXPECT_EQ(count_of(t.run.err, " loaded into vllm (pid "), 1u) << "the start-up line, by the engine's root alone: "
                                                                  << t.run.err;
  ASSERT_EQ(t.files.size(), 1u) << "the worker, the one process that calls CUDA, traces";
  EXPECT_EQ(t.option_errors, t.files.size()) << "every traced process records the error";
  EXPECT_EQ(t.deferred.size(), 1u) << "the tree defers as it would with the option unset";

  const auto problems = kvremap::policy::parse_options({{"KVREMAP_STRICT", "2"}}).problems;
  ASSERT_EQ(problems.size(), 1u);
  const std::string stale = std::string(kvremap::policy::kOptionErrorsShownVariable) + "=" +
                            kvremap::policy::encode_tree_notice(
                                {{1, 1}, kvremap::policy::lines_hash(std::vector<std::string>{problems.front().message})});
  const TreeRun exported = run_tree(argv, {"KVREMAP_STRICT=2", stale});
  ASSERT_EQ(exported.run.exit_code, 0) << exported.run.out << exported.run.err;
  EXPECT_EQ(count_of(exported.run.err, line), 1u) << exported.run.err;
}

// `vllm serve --distributed-executor-backend ray` starting its Ray cluster itself: the worker is exec'd by a
// raylet that the engine core started by exec, then execs itself once more (Ray's setup_worker.py), and is
// titled `ray::RayWorkerWrapper`. Its own line names no engine, so it takes the line `vllm serve` handed
// down: the flags decide graphs as for the spawned worker, and the root's serving flag reaches it, so with
// graphs expected and none captured its first serving kernel commits once the root listens on its --port.
TEST(RayTree, AWorkerExecdBelowVllmReadsVllmsLineAndHearsItsPortOpen) {
  const std::string vllm = link_as(RAY_TREE, "vllm");
  for (const bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "--enforce-eager" : "graphs");
    const std::string port = free_port();
    std::vector<std::string> argv = {
        "/usr/bin/python3", vllm, "serve", "org/model-a", "--port", port, "--distributed-executor-backend", "ray"};
    if (eager) argv.push_back("--enforce-eager");
    const TreeRun t = run_tree(argv);
    ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
    EXPECT_NE(t.run.out.find("engine_tree: worker titled ray::RayWorkerWrapper allocated its KV cache"),
              std::string::npos)
        << t.run.out;
    EXPECT_NE(t.run.out.find("engine_tree: worker ran its first serving kernel"), std::string::npos) << t.run.out;
    ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
    EXPECT_EQ(t.deferred[0].engine, "vllm");
    EXPECT_EQ(t.deferred[0].graphs_expected, !eager);
    EXPECT_TRUE(t.serving.empty()) << "the root never calls CUDA: it writes no trace";
    EXPECT_EQ(t.triggers, std::vector<std::string>{eager ? "kernel launch, no captures expected"
                                                         : "kernel launch after the serving port opened"})
        << t.run.err;
  }
}

// A cluster started on its own under `kvremap run -- ray start --head --block`: its root names no engine,
// so the worker keeps its own line (Ray's default_worker.py): no engine, no graphs expected, committed at
// its first launch after the KV burst, and the info line says why. A root that vLLM's tree hands it through
// Ray's runtime environment (VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY=KVREMAP_) names no ancestor of the
// worker and is ignored.
TEST(RayTree, AWorkerOfAClusterStartedOnItsOwnKeepsItsOwnLine) {
  const UnrelatedRoot unrelated;
  const std::string root = unrelated.value();
  ASSERT_FALSE(root.empty());
  const std::string runtime_env =
      "RAY_TREE_RUNTIME_ENV_VARS={\"" + std::string(kvremap::policy::kEngineRootVariable) + "\": \"" + root + "\"}";
  const TreeRun t = run_tree({"/usr/bin/python3", link_as(RAY_TREE, "ray"), "start", "--head", "--block"},
                             {runtime_env, "KVREMAP_LOG_LEVEL=info"}, Under::kvremap_run);
  ASSERT_EQ(t.run.exit_code, 0) << t.run.out << t.run.err;
  EXPECT_NE(t.run.out.find("engine_tree: worker ran its first serving kernel"), std::string::npos) << t.run.out;
  ASSERT_EQ(t.deferred.size(), 1u) << t.run.err;
  EXPECT_EQ(t.deferred[0].engine, "other") << "the handed-down vLLM root was trusted";
  EXPECT_FALSE(t.deferred[0].graphs_expected);
  EXPECT_TRUE(t.serving.empty());
  EXPECT_EQ(t.triggers, std::vector<std::string>{"kernel launch, no captures expected"}) << t.run.err;
  EXPECT_NE(t.run.err.find("no CUDA-graph capture expected (not a recognised engine (vLLM, SGLang)): the KV cache is "
                           "committed before the first launch"),
            std::string::npos)
      << t.run.err;
}
