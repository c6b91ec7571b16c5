// The agent's own reading of USDT notes: against binutils' readelf on real files, and refusals
// of notes that do not hold together, on ELF files built here.
#include "probes/usdt_notes.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace vigil::agent {
namespace {

// "provider:name" -> sites, as `readelf -n` lists them (Provider: / Name: lines).
std::map<std::string, int> readelf_sites(const std::string& path) {
  std::map<std::string, int> sites;
  FILE* p = popen(("readelf -n " + path).c_str(), "r");
  if (!p) return sites;
  char line[4096];
  std::string provider;
  while (std::fgets(line, sizeof line, p)) {
    std::string l(line);
    l.erase(l.find_last_not_of(" \n") + 1);
    if (auto at = l.find("Provider: "); at != std::string::npos) provider = l.substr(at + 10);
    else if (auto at2 = l.find("Name: "); at2 != std::string::npos && !provider.empty())
      ++sites[provider + ":" + l.substr(at2 + 6)], provider.clear();
  }
  pclose(p);
  return sites;
}

TEST(UsdtNotes, SameSitesAsReadelf) {
  for (const char* path : {"/lib/x86_64-linux-gnu/libstdc++.so.6", "/proc/self/exe"}) {
    const UsdtNotes notes = read_usdt_notes(path);
    EXPECT_EQ(notes.error, "") << path;
    EXPECT_EQ(notes.sites, readelf_sites(path)) << path;
  }
  EXPECT_FALSE(readelf_sites("/lib/x86_64-linux-gnu/libstdc++.so.6").empty()) << "libstdc++ has USDT notes";
}

void append(std::vector<char>& v, const void* bytes, size_t n) {
  const size_t at = v.size();
  v.resize(at + n);
  std::memcpy(v.data() + at, bytes, n);
}

// A 64-bit little-endian ELF file with a section-name table and one .note.stapsdt section.
std::vector<char> elf_with_notes(const std::vector<char>& notes) {
  const std::string names = std::string("\0.shstrtab\0.note.stapsdt\0", 25);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 3;
  eh.e_shstrndx = 1;
  const uint64_t names_at = sizeof eh, notes_at = names_at + names.size();
  eh.e_shoff = notes_at + notes.size();
  Elf64_Shdr sh[3]{};
  sh[1].sh_type = SHT_STRTAB, sh[1].sh_name = 1, sh[1].sh_offset = names_at, sh[1].sh_size = names.size();
  sh[2].sh_type = SHT_NOTE, sh[2].sh_name = 11, sh[2].sh_offset = notes_at, sh[2].sh_size = notes.size();
  std::vector<char> f;
  append(f, &eh, sizeof eh);
  append(f, names.data(), names.size());
  append(f, notes.data(), notes.size());
  append(f, sh, sizeof sh);
  return f;
}

// One stapsdt note whose descriptor is three addresses and TEXT (the strings, as given).
std::vector<char> note(const std::string& text) {
  Elf64_Nhdr h{8, static_cast<Elf64_Word>(24 + text.size()), 3};
  std::vector<char> n;
  append(n, &h, sizeof h);
  append(n, "stapsdt", 8);
  n.resize(n.size() + 24);  // the three addresses
  append(n, text.data(), text.size());
  n.resize((n.size() + 3) & ~size_t{3});
  return n;
}

UsdtNotes parse(const std::vector<char>& f) {
  return read_usdt_notes(
      [&f](uint64_t off, void* buf, size_t len) {
        if (off > f.size() || len > f.size() - off) return false;
        std::memcpy(buf, f.data() + off, len);
        return true;
      },
      f.size());
}

TEST(UsdtNotes, CountsSitesPerProbe) {
  std::vector<char> notes;
  for (int i = 0; i < 3; ++i) {
    auto n = note(std::string("vigil\0alloc_block_alloc\08@%rdi 8@%rsi\0", 38));
    notes.insert(notes.end(), n.begin(), n.end());
  }
  auto n = note(std::string("pytorch\0free\08@%rsi\0", 20));
  notes.insert(notes.end(), n.begin(), n.end());
  const UsdtNotes got = parse(elf_with_notes(notes));
  EXPECT_EQ(got.error, "");
  EXPECT_EQ(got.sites, (std::map<std::string, int>{{"vigil:alloc_block_alloc", 3}, {"pytorch:free", 1}}));
}

TEST(UsdtNotes, RefusesWhatDoesNotHoldTogether) {
  // The argument string does not end inside the note.
  EXPECT_NE(parse(elf_with_notes(note(std::string("vigil\0alloc_snapshot\08@%rdi", 27)))).error, "");
  // A descriptor too short for its addresses.
  std::vector<char> short_desc = note("");
  reinterpret_cast<Elf64_Nhdr*>(short_desc.data())->n_descsz = 16;
  EXPECT_NE(parse(elf_with_notes(short_desc)).error, "");
  // A note that claims more bytes than its section has.
  std::vector<char> long_desc = note(std::string("a\0b\0c\0", 6));
  reinterpret_cast<Elf64_Nhdr*>(long_desc.data())->n_descsz = 1 << 20;
  EXPECT_NE(parse(elf_with_notes(long_desc)).error, "");
  // Section headers past the end of the file, and files that are not ELF.
  std::vector<char> cut = elf_with_notes(note(std::string("a\0b\0c\0", 6)));
  cut.resize(cut.size() - 1);
  EXPECT_NE(parse(cut).error, "");
  EXPECT_NE(parse(std::vector<char>(100, 'x')).error, "");
  EXPECT_NE(parse({}).error, "");
}

// BYTES in a file of their own under /tmp, removed with this object.
struct TempFile {
  explicit TempFile(const std::vector<char>& bytes) {
    const int fd = mkstemp(path);
    written = fd >= 0 && write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    if (fd >= 0) close(fd);
  }
  ~TempFile() { unlink(path); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  char path[28] = "/tmp/usdt_notes_test.XXXXXX";
  bool written = false;
};

TEST(UsdtSites, RefusesTooManySites) {
  std::vector<char> notes;
  for (int i = 0; i <= kMaxUsdtSitesPerFile; ++i) {
    auto n = note(std::string("vigil\0alloc_snapshot\0-8@%rax\0", 29));
    notes.insert(notes.end(), n.begin(), n.end());
  }
  const std::vector<char> f = elf_with_notes(notes);
  const TempFile file(f);
  ASSERT_TRUE(file.written);
  const char* path = file.path;
  const UsdtSites many = usdt_sites(path, {"vigil:alloc_snapshot"}, kMaxUsdtSitesPerFile);
  const UsdtSites other = usdt_sites(path, {"pytorch:malloc"}, kMaxUsdtSitesPerFile);
  EXPECT_EQ(many.sites, kMaxUsdtSitesPerFile + 1);
  EXPECT_NE(many.refused, "");
  EXPECT_EQ(other.sites, 0);
  EXPECT_EQ(other.refused, "");
  EXPECT_NE(usdt_sites("/dev/null", {"vigil:alloc_snapshot"}, 1).refused, "");  // not a regular file
}

TEST(UsdtSites, RefusesAProbeWhoseArgumentsLibbpfCouldNotReadNamingTheSite) {
  // pytorch:free's note names a register libbpf has no name for; vigil:alloc_snapshot's is sound.
  std::vector<char> notes = note(std::string("vigil\0alloc_snapshot\0-8@%rax\0", 29));
  auto bad = note(std::string("pytorch\0free\0-8@%rzz\0", 23));
  const uint64_t location = 0x171d5;  // the probe's address: the descriptor's first word
  std::memcpy(bad.data() + sizeof(Elf64_Nhdr) + 8, &location, sizeof location);
  notes.insert(notes.end(), bad.begin(), bad.end());
  const std::vector<char> f = elf_with_notes(notes);
  const TempFile file(f);
  ASSERT_TRUE(file.written);
  const char* path = file.path;
  const UsdtSites wanted = usdt_sites(path, {"vigil:alloc_snapshot", "pytorch:free"}, kMaxUsdtSitesPerFile);
  const UsdtSites unwanted = usdt_sites(path, {"vigil:alloc_snapshot"}, kMaxUsdtSitesPerFile);
  EXPECT_EQ(wanted.refused, "pytorch:free at 0x171d5: argument 1 '-8@%rzz': register 'rzz' is not one libbpf reads");
  EXPECT_EQ(unwanted.refused, "");  // not a probe of ours: libbpf never reads it
  EXPECT_EQ(unwanted.sites, 1);
}

}  // namespace
}  // namespace vigil::agent
