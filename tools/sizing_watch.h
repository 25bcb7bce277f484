// `kvremap size`: follows a start's traces as the library writes them and says when every process that deferred
// its KV cache has committed it and written its profile — the moment a sizing run has measured what it came for.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvremap::run {

// One device of one traced process, as its `kv` events tell it.
struct SizedDevice {
  std::string trace;  // the trace file's path
  int device = 0;
  bool deferred = false;         // `kv deferred`: its KV cache is on the arena, waiting for the commit
  bool committed = false;        // `kv committed`
  bool profile_written = false;  // `kv profile written` after the commit
  std::uint64_t kv_bytes = 0;
  std::uint64_t device_bytes = 0;  // of the KV cache, on the device at the commit
  std::uint64_t host_bytes = 0;    // of the KV cache, on host memory at the commit
  std::string profile;             // the profile's path
};

// The state of a sizing run, fed line by line. Only whole lines count: the writer emits each event as one
// line, and the tail of a line still being written is kept until its newline arrives.
class SizingWatch {
 public:
  // Reads one trace line of `trace` (the leading comma of the writer's format allowed). Lines that are not
  // kvremap `kv` events, or do not parse, are ignored: the trace's own reader judges the file later.
  void feed_line(const std::string& trace, std::string_view line);

  // Reads what was appended to the trace files of `directory` since the last call; files named in
  // `before` (there before the start) are never read.
  void poll(const std::string& directory, const std::set<std::string>& before);

  // At least one device deferred its KV cache, and every device that did has committed it and written its
  // profile.
  bool measured() const;
  // How many devices have deferred, committed, written their profile: a change restarts the settle time.
  std::uint64_t progress() const;
  // The first reason a process gave for deferring nothing (`kv nothing deferred`, `kv observe only`,
  // `kv stands aside`), or empty.
  const std::string& nothing_deferred() const { return nothing_deferred_; }

  std::vector<SizedDevice> devices() const;

 private:
  std::map<std::pair<std::string, int>, SizedDevice> devices_;
  std::string nothing_deferred_;
  struct Tail {
    std::uint64_t offset = 0;
    std::string partial;
  };
  std::map<std::string, Tail> tails_;
};

// The one line a sizing run ends with, e.g. "measured 1 process: device 0 holds 22.59 GiB of KV on the device,
// none on host memory; profile written: /p/vllm-0123-rank0.json". Several processes: what each holds (the
// least to the most), host memory in all, and how many profiles, in which directories.
std::string sizing_line(const std::vector<SizedDevice>& devices);

}  // namespace kvremap::run
