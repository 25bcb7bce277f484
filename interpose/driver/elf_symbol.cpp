// Finds a symbol's address in one loaded shared object by reading its dynamic symbol table directly.
#include <elf.h>
#include <link.h>

#include <cstdint>

#include "interpose/driver/elf_symbol.h"

namespace {

// Own string comparisons: this file runs inside sanitizer runtimes' start-up (see
// find_symbol_in_object), where their str* interceptors may not yet reach libc's functions.
bool equal(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

bool contains(const char* haystack, const char* needle) {
  for (; *haystack; ++haystack) {
    const char* h = haystack;
    const char* n = needle;
    while (*n && *h == *n) ++h, ++n;
    if (!*n) return true;
  }
  return !*needle;
}

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

// The default-version function `symbol` defined by the object `map`, or nullptr.
void* lookup(const link_map* map, const char* symbol) {
  const ElfW(Dyn)* dyn = map->l_ld;
  if (!dyn) return nullptr;
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
  if (!symtab || !strtab) return nullptr;
  const std::uint32_t n = symbol_count(sysv_hash, gnu_hash);
  for (std::uint32_t i = 0; i < n; ++i) {
    const ElfW(Sym)& s = symtab[i];
    if (s.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s.st_info) != STT_FUNC) continue;
    // Only the default version (not a hidden compat one such as dlsym@GLIBC_2.2.5).
    if (versym && (versym[i] & 0x8000)) continue;
    if (!equal(strtab + s.st_name, symbol)) continue;
    return reinterpret_cast<void*>(map->l_addr + s.st_value);
  }
  return nullptr;
}

}  // namespace

namespace kvremap::interpose {

// Walks the loader's list of objects through _r_debug rather than dl_iterate_phdr: sanitizer
// runtimes intercept dl_iterate_phdr and call dlsym (this library's hook, which lands here) while
// they set their interceptors up, before the interceptor can forward anywhere. The objects searched
// for (libc) are loaded before any code runs, so they sit at the head of the list, ahead of entries
// a concurrent dlopen may be appending.
void* find_symbol_in_object(const char* object, const char* symbol) {
  for (const link_map* map = _r_debug.r_map; map; map = map->l_next)
    if (map->l_name && contains(map->l_name, object)) return lookup(map, symbol);
  return nullptr;
}

}  // namespace kvremap::interpose
