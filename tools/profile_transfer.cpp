// `kvremap profile export` and `import`: a directory's valid profiles into one bundle, and a bundle's profiles,
// each checked, written into a directory with the store's atomic write.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tools/exit_status.h"
#include "tools/output_file.h"
#include "tools/profile_actions.h"
#include "tools/profile_bundle.h"
#include "tools/text.h"

namespace kvremap::cli {
namespace {

// The bundle's text, at most one byte past kMaxBundleBytes (read_bundle refuses it then).
std::optional<std::string> read_input(const std::string& path, std::string* problem) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) {
      *problem = text("cannot read the bundle {}: {}", path, std::strerror(errno));
      return std::nullopt;
    }
    in = &file;
  }
  std::string out(kMaxBundleBytes + 1, '\0');
  in->read(out.data(), static_cast<std::streamsize>(out.size()));
  if (in->bad()) {
    *problem = text("cannot read the bundle {}", path == "-" ? "on stdin" : path);
    return std::nullopt;
  }
  out.resize(static_cast<std::size_t>(in->gcount()));
  return out;
}

}  // namespace

int profile_export(const ProfileLayer& layer, const std::string& output) {
  std::string problem;
  const auto store = open_layer(layer, &problem);
  if (!store) {
    say("profile export", problem);
    return kExitTraceProblem;
  }
  const std::vector<ProfileEntry> entries = judge_entries(*store, now_seconds());
  std::size_t exported = 0;
  for (const ProfileEntry& e : entries) {
    if (e.profile) ++exported;
    else if (e.kind == EntryKind::profile) say("profile export", "skipping " + e.problem);
  }
  const std::string bundle = bundle_text(entries);
  if (output.empty()) {
    std::fwrite(bundle.data(), 1, bundle.size(), stdout);
    if (std::fflush(stdout) != 0) {
      say("profile export", text("cannot write the bundle to stdout: {}", std::strerror(errno)));
      return kExitUsage;
    }
  } else {
    OutputFile out(output);
    if (out.is_open()) out.stream() << bundle;
    if (!out.is_open() || !out.commit()) {
      say("profile export", text("cannot write {}: {}", output, out.error()));
      return kExitUsage;
    }
  }
  std::fprintf(stderr, "kvremap profile export: %zu profile%s of %s%s%s\n", exported, exported == 1 ? "" : "s",
               policy::printable(store->path()).c_str(), output.empty() ? "" : " into ",
               policy::printable(output).c_str());
  return kExitOk;
}

int profile_import(const std::string& bundle_path, const ProfileLayer& layer) {
  std::string problem;
  const std::optional<std::string> input = read_input(bundle_path, &problem);
  if (!input) {
    say("profile import", problem);
    return kExitTraceProblem;
  }
  const auto entries = read_bundle(*input, &problem);
  if (!entries) {
    say("profile import", text("{}: {}", bundle_path, problem));
    return kExitTraceProblem;
  }
  interpose::DirectoryProblem kind = interpose::DirectoryProblem::none;
  // Created as the library creates it: 0700, with its missing parents; trusted only when this user's alone.
  const auto store = interpose::ProfileStore::open({layer.path, false, layer.origin}, true, &kind, &problem);
  if (!store) {
    say("profile import", problem);
    return kExitTraceProblem;
  }
  int status = kExitOk;
  std::size_t written = 0;
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const BundleEntry& entry = (*entries)[i];
    const std::string where = text("{} entry {} ({})", bundle_path, i, entry.name);
    const ProfileEntry judged = judge_profile_text(entry.name, entry.text, where);
    if (!judged.profile) {
      say("profile import", "not imported: " + judged.problem);
      status = kExitTraceProblem;
      continue;
    }
    // The file the library would write: its own JSON of the profile, through the temporary-file-and-rename.
    if (!store->write(entry.name, policy::to_json(*judged.profile), &problem)) {
      say("profile import", "not imported: " + problem);
      status = kExitTraceProblem;
      continue;
    }
    std::printf("imported %s  %s\n", policy::printable(entry.name).c_str(), key_summary(*judged.parts).c_str());
    ++written;
  }
  std::printf("%zu of %zu profile%s imported into %s\n", written, entries->size(), entries->size() == 1 ? "" : "s",
              policy::printable(store->path()).c_str());
  return status;
}

}  // namespace kvremap::cli
