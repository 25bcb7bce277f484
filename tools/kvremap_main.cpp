// The kvremap CLI entry point; later issues add run, report, plot and replay subcommands.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "interpose/version_number.h"

int main(int argc, char** argv) {
  CLI::App app{"kvremap: defer LLM KV-cache backing until start-up memory is measured"};
  app.set_version_flag("--version", std::string("kvremap ") + KVREMAP_VERSION_STRING);
  app.require_subcommand(0, 1);
  auto* libpath = app.add_subcommand("libpath", "Print the path of the libkvremap.so this tool was built with");
  CLI11_PARSE(app, argc, argv);
  if (libpath->parsed()) {
    std::printf("%s/libkvremap.so\n", KVREMAP_BUILD_LIBDIR);
    return 0;
  }
  std::printf("%s", app.help().c_str());
  return 0;
}
