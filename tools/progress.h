// Progress on stderr while a tool reads a large trace: silent for reads under a second, then a percentage.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "policy/printable.h"

namespace kvremap::cli {

// Passed as ReadOptions::on_progress. Prints "<prefix>: read 42%" only once the read has taken
// longer than kQuietFor, so small traces stay quiet: on a terminal rewritten in place once per
// percent, elsewhere (a CI log) one line per tenth; finish() ends the line when anything was printed.
class ReadProgress {
 public:
  static constexpr std::chrono::milliseconds kQuietFor{1000};

  ReadProgress(std::string command, std::string path)
      : prefix_(policy::printable("kvremap " + std::move(command) + ": " + std::move(path))),
        start_(std::chrono::steady_clock::now()) {}
  ReadProgress(const ReadProgress&) = delete;
  ReadProgress& operator=(const ReadProgress&) = delete;
  ~ReadProgress() { finish(); }

  void operator()(std::uint64_t bytes_read, std::uint64_t file_bytes) {
    if (file_bytes == 0) return;
    if (std::chrono::steady_clock::now() - start_ < kQuietFor) return;
    const int percent = static_cast<int>(bytes_read * 100 / file_bytes);
    if (percent == last_percent_ || (!terminal_ && last_percent_ >= 0 && percent / 10 == last_percent_ / 10)) return;
    last_percent_ = percent;
    std::fprintf(stderr, terminal_ ? "\r%s: read %d%%" : "%s: read %d%%\n", prefix_.c_str(), percent);
    std::fflush(stderr);
  }

  void finish() {
    if (last_percent_ < 0) return;
    if (terminal_) std::fprintf(stderr, "\n");
    last_percent_ = -1;
  }

 private:
  std::string prefix_;
  std::chrono::steady_clock::time_point start_;
  int last_percent_ = -1;
  bool terminal_ = ::isatty(STDERR_FILENO) == 1;
};

}  // namespace kvremap::cli
