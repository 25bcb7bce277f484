// The scaffolding both bad-argument sweeps of the simulator share (driver and runtime): one case per
// export and bad argument, each export resolved by its exact name from the loaded library.
#pragma once

#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <set>
#include <string>
#include <vector>

namespace kvremap::testing {

template <typename Result, typename Env>
struct ArgumentCase {
  std::string function;  // the exported name called
  std::string bad;       // what is wrong with the arguments
  Result expected;
  std::function<Result(Env&)> call;
};

// `name` from the already loaded `library` (never loads it), or nullptr.
inline void* loaded_symbol(const char* library, const char* name) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  return handle ? dlsym(handle, name) : nullptr;
}

// Cases for one or more exports of one ABI (a function and its _ptsz/_ptds variant): `call`
// receives the export's address; a missing export fails the test and returns `missing`.
template <typename Fn, typename Result, typename Env, typename Call>
void add_argument_cases(std::vector<ArgumentCase<Result, Env>>& out, const char* library,
                        std::initializer_list<const char*> names, const char* bad, Result expected, Result missing,
                        Call call) {
  for (const char* name : names) {
    out.push_back({name, bad, expected, [library, name, missing, call](Env& e) -> Result {
                     auto* fn = reinterpret_cast<Fn*>(loaded_symbol(library, name));
                     if (!fn) {
                       ADD_FAILURE() << name << " is not exported";
                       return missing;
                     }
                     return call(fn, e);
                   }});
  }
}

// An enum value no CUDA enum defines, as a C caller can pass one.
template <typename E>
E out_of_range() {
  return static_cast<E>(0x7fffffff);
}

// Every defined, exported function of the shared object at `path` whose name starts with `prefix`.
inline std::set<std::string> exported_functions(const std::string& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> names;
  if (image.size() < sizeof(Elf64_Ehdr)) return names;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof eh);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, image.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    if (sh.sh_type != SHT_DYNSYM) continue;
    Elf64_Shdr strtab;
    std::memcpy(&strtab, image.data() + eh.e_shoff + sh.sh_link * sizeof(Elf64_Shdr), sizeof strtab);
    for (std::size_t off = sh.sh_offset; off + sizeof(Elf64_Sym) <= sh.sh_offset + sh.sh_size;
         off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, image.data() + off, sizeof sym);
      if (sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      const std::string name(image.data() + strtab.sh_offset + sym.st_name);
      if (name.rfind(prefix, 0) == 0) names.insert(name);
    }
  }
  return names;
}

// A test name from a case: its function and what is bad, made of identifier characters.
template <typename Case>
std::string argument_case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.function + "_" + info.param.bad;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name + "_" + std::to_string(info.index);
}

}  // namespace kvremap::testing
