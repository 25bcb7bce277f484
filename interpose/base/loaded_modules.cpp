// Walks the loaded objects' PT_NOTE segments, in memory, for their GNU build ids.
#include "interpose/base/loaded_modules.h"

#include <elf.h>
#include <link.h>

#include <cstring>

namespace kvremap::interpose {
namespace {

std::string build_id_of(const dl_phdr_info* info) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const auto* at = reinterpret_cast<const unsigned char*>(info->dlpi_addr + segment.p_vaddr);
    const unsigned char* end = at + segment.p_memsz;
    // Each note: its header, the name and the descriptor, each padded to 4 bytes.
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, at, sizeof note);
      const unsigned char* name = at + sizeof note;
      const unsigned char* desc = name + ((note.n_namesz + 3u) & ~3u);
      // The last note's padding may lie past the segment's end (a 10-byte id is 26 bytes of note).
      if (desc + note.n_descsz > end || desc < name) break;
      const unsigned char* next = desc + ((note.n_descsz + 3u) & ~3u);
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        for (ElfW(Word) b = 0; b < note.n_descsz; ++b) {
          hex += kHex[desc[b] >> 4];
          hex += kHex[desc[b] & 0xf];
        }
        return hex;
      }
      at = next;
    }
  }
  return {};
}

}  // namespace

std::vector<LoadedModule> loaded_modules() {
  std::vector<LoadedModule> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name && info->dlpi_name[0] != '\0')
          static_cast<std::vector<LoadedModule>*>(data)->push_back({info->dlpi_name, build_id_of(info)});
        return 0;
      },
      &out);
  return out;
}

}  // namespace kvremap::interpose
