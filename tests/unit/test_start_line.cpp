// The start-up line: it names the engine, the mode and where traces and profiles go, and what is off.
#include "policy/start_line.h"

#include <gtest/gtest.h>

using kvremap::policy::default_options;
using kvremap::policy::EngineKind;
using kvremap::policy::Mode;
using kvremap::policy::start_up_line;

TEST(StartLine, NamesTheEngineTheModeAndWhereItWrites) {
  kvremap::policy::Options options = default_options();
  options.mode = Mode::defer;
  const std::string line =
      start_up_line(options, {"0.1.0", EngineKind::vllm, 4242, "/var/log/kvremap", "/root/.cache/kvremap"});
  EXPECT_TRUE(line.starts_with("kvremap 0.1.0 loaded into vllm (pid 4242): KV deferral on (KVREMAP_MODE=defer)"))
      << line;
  EXPECT_NE(line.find("; traces in /var/log/kvremap; profiles in /root/.cache/kvremap"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(StartLine, SaysWhatIsOff) {
  kvremap::policy::Options options = default_options();
  options.mode = Mode::observe;
  const std::string line = start_up_line(options, {"0.1.0", EngineKind::sglang, 7, "", ""});
  EXPECT_NE(line.find("loaded into sglang (pid 7): tracking only (KVREMAP_MODE=observe): nothing is deferred"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("; no trace (KVREMAP_TRACE=off); profiles off (KVREMAP_PROFILE_DIR=off)"), std::string::npos)
      << line;
}

TEST(StartLine, EscapesAPathsControlCharacters) {
  const std::string line =
      start_up_line(default_options(), {"0.1.0", EngineKind::other, 1, "/tmp/a\x1b[31mb", "/p"});
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_NE(line.find("loaded into this engine (pid 1)"), std::string::npos) << line;
}
