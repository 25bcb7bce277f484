// Finds the libkvremap.so the kvremap tool preloads: an explicit KVREMAP_LIBRARY, else the library
// beside the tool in the tree it was installed in (or built in), so a moved tree keeps working.
#include "tools/library_location.h"

#include <elf.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "policy/path_rules.h"
#include "policy/printable.h"

namespace kvremap::cli {
namespace fs = std::filesystem;

namespace {

// The symbol whose definition marks a libkvremap.so (interpose/kvremap.h, exported by interpose/exports.map).
constexpr const char* kEntryPoint = "kvremap_version";
// A dynamic symbol or string table larger than this is no libkvremap.so's: refuse rather than read it.
constexpr std::uint64_t kMaxTableBytes = std::uint64_t{64} << 20;

// `bytes` bytes of `file` at `offset` into `out`; false when the file is shorter.
bool read_at(std::ifstream& file, std::uint64_t offset, std::uint64_t bytes, void* out) {
  file.clear();
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
  return file.good() && static_cast<std::uint64_t>(file.gcount()) == bytes;
}

}  // namespace

std::string library_problem(const std::string& path) {
  std::error_code ec;
  if (const auto bad = policy::path_problem(path)) return *bad;
  if (!fs::is_regular_file(path, ec)) return "is not a file";
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::string("cannot be read (") + std::strerror(errno) + ")";
  Elf64_Ehdr header{};
  if (!read_at(file, 0, EI_NIDENT, &header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return "is not an ELF file";
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr unsigned char kNativeData = ELFDATA2LSB;
#else
  constexpr unsigned char kNativeData = ELFDATA2MSB;
#endif
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != kNativeData ||
      !read_at(file, 0, sizeof header, &header))
    return "is an ELF file of another word size or byte order than this machine's";
  if (header.e_type != ET_DYN) return "is an ELF file but not a shared object (an executable or object file)";
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0)
    return "is a shared object without section headers, so its dynamic symbols cannot be read";
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (!read_at(file, header.e_shoff, sections.size() * sizeof(Elf64_Shdr), sections.data()))
    return "is a truncated shared object (its section headers lie past its end)";
  for (const Elf64_Shdr& symbols : sections) {
    if (symbols.sh_type != SHT_DYNSYM || symbols.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[symbols.sh_link];
    if (symbols.sh_size > kMaxTableBytes || strings.sh_size > kMaxTableBytes)
      return "is a shared object whose dynamic symbol table is too large for a libkvremap.so";
    std::vector<Elf64_Sym> table(symbols.sh_size / sizeof(Elf64_Sym));
    std::string names(strings.sh_size, '\0');
    if (!read_at(file, symbols.sh_offset, table.size() * sizeof(Elf64_Sym), table.data()) ||
        !read_at(file, strings.sh_offset, names.size(), names.data()))
      return "is a truncated shared object (its dynamic symbols lie past its end)";
    for (const Elf64_Sym& symbol : table) {
      if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= names.size()) continue;
      if (std::strcmp(names.c_str() + symbol.st_name, kEntryPoint) == 0) return "";
    }
  }
  return std::string("is a shared object that does not define kvremap's entry points (no ") + kEntryPoint +
         " among its dynamic symbols)";
}

LibraryLocation locate_library(const char* variable, const std::string& tool,
                               const std::vector<std::string>& beside_tool) {
  std::error_code ec;
  if (variable != nullptr && *variable != '\0') {
    const std::string named = variable;
    if (const std::string problem = library_problem(named); !problem.empty())
      return {"", std::string(kLibraryVariable) + "='" + policy::printable(named) + "' " + problem +
                      ": name a libkvremap.so, or unset it to use the one installed beside kvremap"};
    return {fs::absolute(named, ec).lexically_normal().string(), ""};
  }
  const fs::path directory = fs::path(tool).parent_path();
  std::string looked;
  for (const std::string& relative : beside_tool) {
    const fs::path candidate = (directory / relative).lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return {candidate.string(), ""};
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  return {"", "no libkvremap.so beside this kvremap (looked for " + looked + "); set " + kLibraryVariable +
                  " to the library, or pass --library PATH to kvremap run"};
}

LibraryLocation locate_own_library() {
  std::error_code ec;
  const fs::path tool = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {"", "cannot read /proc/self/exe (" + ec.message() + "); set " + kLibraryVariable + " to the library"};
  // KVREMAP_LIBDIR_FROM_BINDIR: the installed layout (cmake/InstallDirs.cmake); the build tree keeps
  // the tool in bin/ and the library in lib/.
  return locate_library(std::getenv(kLibraryVariable), tool.string(),
                        {KVREMAP_LIBDIR_FROM_BINDIR "/" KVREMAP_LIBRARY_SONAME, "../lib/" KVREMAP_LIBRARY_SONAME});
}

}  // namespace kvremap::cli
