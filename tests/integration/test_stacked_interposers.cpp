// Stacked interposers: a torch_memory_saver-like preload library and kvremap in both LD_PRELOAD orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_program.h"
#include "tools/trace/trace_reader.h"

using kvremap::testing::make_temp_dir;
using kvremap::testing::run_program;
using kvremap::testing::RunResult;
using kvremap::testing::trace_files;

namespace {

const std::vector<std::string> kSimulator = {"SIMCUDA_DEVICE_MEMORY=8GiB", "SIMCUDA_CONTEXT_BYTES=0",
                                             "SIMCUDA_MODULE_BYTES=0"};

struct Stacked {
  RunResult run;
  std::vector<kvremap::trace::Trace> traces;
  const kvremap::trace::OtherEvent* event(const std::string& name) const {
    for (const auto& t : traces)
      for (const auto& e : t.other_events)
        if (e.name == name) return &e;
    return nullptr;
  }
};

// cuda_program memory-saver with LD_PRELOAD=`preload`, in defer mode with the KV tensor's size named, so
// kvremap would place it in its arena wherever its cudaMalloc hook sees it.
Stacked run_stacked(const std::string& preload) {
  const std::string dir = make_temp_dir();
  std::vector<std::string> env = kSimulator;
  for (const std::string& e : {"LD_PRELOAD=" + preload, "KVREMAP_TRACE_DIR=" + dir, std::string("KVREMAP_MODE=defer"),
                               std::string("KVREMAP_KV_TENSOR_BYTES=1GiB"), "KVREMAP_PROFILE_DIR=" + dir + "/profiles"})
    env.push_back(e);
  Stacked s;
  s.run = run_program({CUDA_PROGRAM, "memory-saver"}, env, {}, 60, 9, dir);
  for (const std::string& file : trace_files(dir)) s.traces.push_back(kvremap::trace::read_trace(file));
  return s;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// What every order must keep: the stand-in owns the KV tensor, and its pause gives the memory back.
void expect_the_standin_owns_the_kv(const Stacked& s) {
  EXPECT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
  EXPECT_NE(s.run.out.find("memory saver stand-in: loaded"), std::string::npos) << s.run.out;
  EXPECT_NE(s.run.out.find("pause freed 1024 MiB"), std::string::npos) << s.run.out;
  EXPECT_EQ(s.run.out.find("FAILED"), std::string::npos) << s.run.out;
  ASSERT_EQ(s.traces.size(), 1u) << s.run.err;
}

// KVREMAP_PRELOAD is "[sanitizer runtime ]libkvremap.so": a sanitizer's runtime stays first in any order.
std::string stand_in_first() {
  const std::string preload = KVREMAP_PRELOAD;
  const std::size_t space = preload.rfind(' ');
  const std::string runtime = space == std::string::npos ? "" : preload.substr(0, space + 1);
  const std::string library = space == std::string::npos ? preload : preload.substr(space + 1);
  return runtime + MEMORY_SAVER_STANDIN + ":" + library;
}

// The stand-in's region maps its KV with cuMemCreate and cuMemMap, which reach kvremap's driver hooks from
// the stand-in's own code: a library that defines cudaMalloc itself, whose VMM memory kvremap leaves to it
// (no virtual handle, nothing deferred, nothing in the arena), so its pause frees what it mapped.
TEST(StackedInterposers, StandInFirstKeepsItsKvAndKvremapSaysNothing) {
  const Stacked s = run_stacked(stand_in_first());
  expect_the_standin_owns_the_kv(s);
  EXPECT_EQ(s.run.err.find("stands aside"), std::string::npos) << s.run.err;
  EXPECT_EQ(s.event("kv stands aside"), nullptr);
  EXPECT_EQ(s.event("kv arena reserved"), nullptr) << "kvremap placed something in its arena";
  EXPECT_EQ(s.event("kv deferred"), nullptr) << "kvremap deferred the stand-in's KV";
  bool traced = false;
  for (const auto& a : s.traces.at(0).allocs) traced = traced || (a.api == "cuMemCreate" && a.category == "vmm");
  EXPECT_TRUE(traced) << "the stand-in's VMM memory is traced as the engine's own";
}

TEST(StackedInterposers, KvremapFirstStandsAsideWithOneWarning) {
  const Stacked s = run_stacked(std::string(KVREMAP_PRELOAD) + ":" + MEMORY_SAVER_STANDIN);
  expect_the_standin_owns_the_kv(s);
  // Nothing of the stand-in's, its resume's own cuMemCreate included, goes near the arena.
  EXPECT_EQ(s.event("kv arena reserved"), nullptr) << "kvremap placed something in its arena";
  EXPECT_EQ(s.event("kv deferred"), nullptr) << "kvremap deferred the stand-in's KV";
  EXPECT_EQ(count(s.run.err, "stands aside"), 1u) << s.run.err;
  EXPECT_NE(s.run.err.find(MEMORY_SAVER_STANDIN), std::string::npos) << s.run.err;
  EXPECT_NE(s.run.err.find("put kvremap after it in LD_PRELOAD"), std::string::npos) << s.run.err;
  const auto* aside = s.event("kv stands aside");
  ASSERT_NE(aside, nullptr) << s.run.err;
  EXPECT_EQ(aside->args.at("api").get<std::string>(), "cudaMalloc");
  EXPECT_EQ(aside->args.at("library").get<std::string>(), MEMORY_SAVER_STANDIN);
  // Still traced, as the ordinary allocation it is.
  bool traced = false;
  for (const auto& a : s.traces.at(0).allocs) traced = traced || (a.api == "cudaMalloc" && a.bytes == (1ULL << 30));
  EXPECT_TRUE(traced);
}

TEST(StackedInterposers, KvremapAlonePlacesTheKvAsBefore) {
  const Stacked s = run_stacked(KVREMAP_PRELOAD);
  EXPECT_EQ(s.run.exit_code, 0) << s.run.out << s.run.err;
  EXPECT_NE(s.run.out.find("memory saver stand-in: absent"), std::string::npos) << s.run.out;
  EXPECT_EQ(s.run.out.find("FAILED"), std::string::npos) << s.run.out;
  EXPECT_EQ(s.run.err.find("stands aside"), std::string::npos) << s.run.err;
  EXPECT_EQ(s.event("kv stands aside"), nullptr);
  EXPECT_NE(s.event("kv arena reserved"), nullptr) << s.run.err;
}

}  // namespace
