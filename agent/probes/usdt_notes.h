// The USDT notes of an ELF file (.note.stapsdt), read and checked by the agent itself before
// libbpf sees the file: a workload controls the file, and each note it lists becomes an uprobe
// and possibly a libbpf spec id (a fixed pool per BPF object). Format: the SystemTap SDT notes
// (https://sourceware.org/systemtap/wiki/UserSpaceProbeImplementation): note type 3, owner
// "stapsdt", a descriptor of three addresses (probe, .stapsdt.base, semaphore) followed by the
// provider, the name and the argument string, each NUL-terminated inside the descriptor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vigil::agent {

// Reads LEN bytes at OFFSET of the file into BUF; false if they are not all there.
using ReadAt = std::function<bool(uint64_t offset, void* buf, size_t len)>;

// One probe site: a stapsdt note.
struct UsdtNote {
  std::string probe;       // "provider:name"
  uint64_t location = 0;   // the probe's address (as linked)
  uint64_t semaphore = 0;  // its semaphore's address; 0: none
  std::string args;        // argument specs (usdt_args.h)
};

struct UsdtNotes {
  std::string error;                 // why the file is refused; empty when the notes are sound
  std::map<std::string, int> sites;  // "provider:name" -> notes (probe sites) in the file
  std::vector<UsdtNote> notes;       // every site, in file order
};

// Limits a file's notes must keep: past them the file is refused, not parsed further.
inline constexpr uint32_t kMaxElfSections = 4096;
inline constexpr uint64_t kMaxNotesBytes = 1 << 20;
// Sites of the probes a set attaches that one file may have (the worker and PyTorch have one or
// two per probe): each is an uprobe and may take a libbpf spec id.
inline constexpr int kMaxUsdtSitesPerFile = 64;

// Parses the notes of a 64-bit little-endian ELF file of FILE_SIZE bytes. A file without the
// section has no sites; a file that is not such an ELF file, or whose headers or notes do not
// hold together, gets an error.
UsdtNotes read_usdt_notes(const ReadAt& read, uint64_t file_size);
// Same, for the file at PATH (opened without blocking; regular files only).
UsdtNotes read_usdt_notes(const std::string& path);

// The sites of PROBES ("provider:name") in the file at PATH, and why the file is refused (empty
// when it is not): notes that do not hold together, a site of PROBES whose argument specs libbpf
// could not read (usdt_args.h), or more than MAX_SITES sites, each of which would be an uprobe.
struct UsdtSites {
  int sites = 0;
  std::string refused;
};
UsdtSites usdt_sites(const std::string& path, const std::vector<std::string>& probes, int max_sites);

}  // namespace vigil::agent
