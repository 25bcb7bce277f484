// Finds a symbol's address in one loaded shared object by reading its dynamic symbol table directly.
#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

#include "interpose/elf_symbol.h"

namespace {

struct Query {
  const char* object;  // substring of the object's path, e.g. "libc.so.6"
  const char* symbol;
  void* found = nullptr;
};

// The number of .dynsym entries, from DT_HASH when present, else from the GNU hash chains.
std::uint32_t symbol_count(const ElfW(Word) * sysv_hash, const std::uint32_t* gnu_hash) {
  if (sysv_hash) return sysv_hash[1];
  if (!gnu_hash) return 0;
  const std::uint32_t nbuckets = gnu_hash[0];
  const std::uint32_t symoffset = gnu_hash[1];
  const std::uint32_t bloom_size = gnu_hash[2];
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(gnu_hash + 4);
  const auto* buckets = reinterpret_cast<const std::uint32_t*>(bloom + bloom_size);
  const std::uint32_t* chains = buckets + nbuckets;
  std::uint32_t last = 0;
  for (std::uint32_t b = 0; b < nbuckets; ++b)
    if (buckets[b] > last) last = buckets[b];
  if (last < symoffset) return symoffset;
  while ((chains[last - symoffset] & 1u) == 0) ++last;
  return last + 1;
}

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<Query*>(data);
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, q->object)) return 0;
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Word)* sysv_hash = nullptr;
  const std::uint32_t* gnu_hash = nullptr;
  const ElfW(Half)* versym = nullptr;
  // The loader has already relocated these d_ptr values to absolute addresses.
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
        break;
      case DT_HASH:
        sysv_hash = reinterpret_cast<const ElfW(Word)*>(d->d_un.d_ptr);
        break;
      case DT_GNU_HASH:
        gnu_hash = reinterpret_cast<const std::uint32_t*>(d->d_un.d_ptr);
        break;
      case DT_VERSYM:
        versym = reinterpret_cast<const ElfW(Half)*>(d->d_un.d_ptr);
        break;
      default:
        break;
    }
  }
  if (!symtab || !strtab) return 0;
  const std::uint32_t n = symbol_count(sysv_hash, gnu_hash);
  for (std::uint32_t i = 0; i < n; ++i) {
    const ElfW(Sym)& s = symtab[i];
    if (s.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s.st_info) != STT_FUNC) continue;
    // Only the default version (not a hidden compat one such as dlsym@GLIBC_2.2.5).
    if (versym && (versym[i] & 0x8000)) continue;
    if (std::strcmp(strtab + s.st_name, q->symbol) != 0) continue;
    q->found = reinterpret_cast<void*>(info->dlpi_addr + s.st_value);
    return 1;
  }
  return 0;
}

}  // namespace

namespace kvremap::interpose {

void* find_symbol_in_object(const char* object, const char* symbol) {
  Query q{object, symbol};
  dl_iterate_phdr(visit, &q);
  return q.found;
}

}  // namespace kvremap::interpose
