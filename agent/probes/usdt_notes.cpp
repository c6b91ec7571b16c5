// Field offsets and constants of the ELF64 header, section header and note header are those of
// glibc's <elf.h> (Elf64_Ehdr, Elf64_Shdr, Elf64_Nhdr), read through the structs themselves.
#include "probes/usdt_notes.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probes/usdt_args.h"

namespace vigil::agent {
namespace {

constexpr uint32_t kStapsdtType = 3;
constexpr char kStapsdtOwner[] = "stapsdt";
constexpr size_t kAddresses = 3 * sizeof(uint64_t);  // probe, base, semaphore

uint64_t align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

// The NUL-terminated string at D[*at], which must end before END; advances *at past it.
bool take_string(const std::vector<char>& d, size_t* at, size_t end, std::string* out) {
  const void* nul = *at < end ? std::memchr(d.data() + *at, '\0', end - *at) : nullptr;
  if (!nul) return false;
  const size_t len = static_cast<const char*>(nul) - (d.data() + *at);
  out->assign(d.data() + *at, len);
  *at += len + 1;
  return true;
}

UsdtNotes refuse(std::string why) {
  UsdtNotes n;
  n.error = std::move(why);
  return n;
}

// The notes of a .note.stapsdt section's bytes.
UsdtNotes parse_notes(const std::vector<char>& d) {
  UsdtNotes out;
  size_t at = 0;
  while (at < d.size()) {
    Elf64_Nhdr h;
    if (d.size() - at < sizeof h) return refuse("truncated note header");
    std::memcpy(&h, d.data() + at, sizeof h);
    at += sizeof h;
    const uint64_t name_end = at + uint64_t{h.n_namesz}, desc_at = at + align4(h.n_namesz);
    const uint64_t desc_end = desc_at + uint64_t{h.n_descsz};
    if (name_end > d.size() || desc_end > d.size()) return refuse("note larger than its section");
    const bool stapsdt = h.n_type == kStapsdtType && h.n_namesz == sizeof kStapsdtOwner &&
                         std::memcmp(d.data() + at, kStapsdtOwner, sizeof kStapsdtOwner) == 0;
    if (stapsdt) {
      if (h.n_descsz < kAddresses) return refuse("stapsdt note without its addresses");
      UsdtNote note;
      uint64_t addresses[3];
      std::memcpy(addresses, d.data() + desc_at, sizeof addresses);
      note.location = addresses[0];
      note.semaphore = addresses[2];
      size_t s = desc_at + kAddresses;
      std::string provider, name;
      if (!take_string(d, &s, desc_end, &provider) || !take_string(d, &s, desc_end, &name) ||
          !take_string(d, &s, desc_end, &note.args))
        return refuse("stapsdt note whose strings do not end inside it");
      note.probe = provider + ":" + name;
      ++out.sites[note.probe];
      out.notes.push_back(std::move(note));
    }
    at = std::min<uint64_t>(align4(desc_end), d.size());
  }
  return out;
}

}  // namespace

UsdtNotes read_usdt_notes(const ReadAt& read, uint64_t file_size) {
  Elf64_Ehdr eh;
  if (file_size < sizeof eh || !read(0, &eh, sizeof eh)) return refuse("not an ELF file");
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return refuse("not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return refuse("not a 64-bit little-endian ELF file");
  if (eh.e_shnum == 0) return {};
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > kMaxElfSections || eh.e_shstrndx >= eh.e_shnum)
    return refuse("bad section header table");
  const uint64_t table_bytes = uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr);
  if (eh.e_shoff > file_size || table_bytes > file_size - eh.e_shoff) return refuse("section headers past the end");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read(eh.e_shoff, sh.data(), table_bytes)) return refuse("section headers past the end");
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  constexpr char kSection[] = ".note.stapsdt";
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_NOTE) continue;
    char name[sizeof kSection] = {};
    if (s.sh_name >= names.sh_size || names.sh_size - s.sh_name < sizeof kSection ||
        !read(names.sh_offset + s.sh_name, name, sizeof kSection) || std::memcmp(name, kSection, sizeof kSection) != 0)
      continue;
    if (s.sh_size > kMaxNotesBytes) return refuse("USDT notes larger than 1 MiB");
    if (s.sh_offset > file_size || s.sh_size > file_size - s.sh_offset) return refuse("USDT notes past the end");
    std::vector<char> data(s.sh_size);
    if (!data.empty() && !read(s.sh_offset, data.data(), data.size())) return refuse("USDT notes past the end");
    return parse_notes(data);
  }
  return {};
}

UsdtNotes read_usdt_notes(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return refuse("cannot open");
  struct stat st {};
  UsdtNotes out;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out = refuse("not a regular file");
  } else {
    out = read_usdt_notes(
        [fd](uint64_t off, void* buf, size_t len) {
          return pread(fd, buf, len, static_cast<off_t>(off)) == static_cast<ssize_t>(len);
        },
        static_cast<uint64_t>(st.st_size));
  }
  close(fd);
  return out;
}

UsdtSites usdt_sites(const std::string& path, const std::vector<std::string>& probes, int max_sites) {
  const UsdtNotes notes = read_usdt_notes(path);
  UsdtSites out;
  for (const auto& p : probes)
    if (auto it = notes.sites.find(p); it != notes.sites.end()) out.sites += it->second;
  if (!notes.error.empty()) out.refused = notes.error;
  else if (out.sites > max_sites)
    out.refused = std::to_string(out.sites) + " probe sites, more than " + std::to_string(max_sites);
  if (!out.refused.empty()) return out;
  for (const UsdtNote& n : notes.notes) {
    if (std::find(probes.begin(), probes.end(), n.probe) == probes.end()) continue;
    if (const UsdtArgs a = parse_usdt_args(n.args); !a.error.empty()) {
      char at[24];
      std::snprintf(at, sizeof at, "0x%llx", static_cast<unsigned long long>(n.location));
      out.refused = n.probe + " at " + at + ": " + a.error;
      break;
    }
  }
  return out;
}

}  // namespace vigil::agent
