// The shared objects loaded in this process and their GNU build ids, read from their mapped notes.
#pragma once

#include <string>
#include <vector>

namespace kvremap::interpose {

struct LoadedModule {
  std::string path;      // as the dynamic loader names it
  std::string build_id;  // lowercase hex of NT_GNU_BUILD_ID; empty when the object has none
};

// Every object dl_iterate_phdr lists with a name (the main program and the vDSO have none).
std::vector<LoadedModule> loaded_modules();

}  // namespace kvremap::interpose
