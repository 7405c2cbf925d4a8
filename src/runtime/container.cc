// The model file's container: writing it atomically, reading it with every check a damaged
// or foreign file needs.
#include "container.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "bytes.h"
#include "ember/runtime/artifact.h"
#include "ember/support/error.h"

namespace ember::runtime::container {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'L', 'I', 'B'};
constexpr size_t kHeaderBytes = 16, kEntryBytes = 32;
// A sanity bound for a section count: a corrupted count must not make us read gigabytes.
constexpr uint32_t kMaxSections = 64;

static_assert(sizeof(void*) == 8, "the artifact reader assumes a 64-bit host");

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return h;
}

// 16 random hex digits for a temporary file's name.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device device;
  uint64_t x =
      (uint64_t{device()} << 32) ^ device() ^ (uint64_t(::getpid()) << 16) ^ counter.fetch_add(1);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

using bytes::get;
using bytes::put;

// The header and section table of `sections`.
std::string header(const std::vector<std::pair<std::string, const std::string*>>& sections) {
  std::string head(kMagic, sizeof(kMagic));
  put<uint32_t>(head, kArtifactVersion);
  put<uint32_t>(head, static_cast<uint32_t>(sections.size()));
  size_t offset = align_up(kHeaderBytes + kEntryBytes * sections.size() + 8);
  for (const auto& [kind, bytes] : sections) {
    char name[8] = {};
    std::memcpy(name, kind.data(), kind.size());
    head.append(name, 8);
    put<uint64_t>(head, offset);
    put<uint64_t>(head, bytes->size());
    put<uint64_t>(head, fnv1a(bytes->data(), bytes->size()));
    offset = align_up(offset + bytes->size());
  }
  put<uint64_t>(head, fnv1a(head.data(), head.size()));
  return head;
}

// A new file with a unique name beside `path`: two exports to one path never share a
// temporary, and a link planted at a predictable name is never followed (O_EXCL |
// O_NOFOLLOW create the file, or fail).
int create_temporary(const std::string& path, std::string& tmp) {
  for (int attempt = 0;; ++attempt) {
    tmp = path + ".tmp-" + random_suffix();
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt == 100)
      fail("cannot write the artifact '", path, "': cannot create '", tmp,
           "': ", std::strerror(errno));
  }
}

}  // namespace

void write(const std::string& path,
           const std::vector<std::pair<std::string, const std::string*>>& sections) {
  for (const auto& [kind, bytes] : sections)
    if (kind.empty() || kind.size() > 8) fail("save_artifact: bad section kind '", kind, "'");
  const std::string head = header(sections);
  // Written to a temporary and renamed over `path`: a failed export never leaves half a
  // file where a good one was.
  std::string tmp;
  int fd = create_temporary(path, tmp);
  bool ok = write_all(fd, head.data(), head.size());
  size_t at = head.size();
  for (const auto& [kind, bytes] : sections) {
    std::string pad(align_up(at) - at, '\0');
    ok = ok && write_all(fd, pad.data(), pad.size()) && write_all(fd, bytes->data(), bytes->size());
    at = align_up(at) + bytes->size();
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail("cannot write the artifact '", path, "': ", std::strerror(err), " (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write the artifact '", path, "': cannot rename '", tmp,
         "' to it: ", std::strerror(err));
  }
}

namespace {

// Checks the header and section table at `data`, which holds the first `avail` bytes of a
// file of `size` bytes, as far as `avail` allows; returns the section count.
uint32_t check_header(const char* data, uint64_t avail, uint64_t size, const std::string& where) {
  if (size < sizeof(kMagic) || avail < sizeof(kMagic) ||
      std::memcmp(data, kMagic, sizeof(kMagic)) != 0)
    fail(where,
         " is not an Ember artifact (it does not start with \"EMBERLIB\"); "
         "create one with lib.export(path) or `ember compile`");
  if (size < kHeaderBytes) fail(where, " is truncated: the file ends inside its header");
  if (avail < kHeaderBytes) return 0;
  uint32_t version = get<uint32_t>(data + 8);
  if (version != kArtifactVersion)
    fail(where, " has format version ", version, ", but this Ember reads version ",
         kArtifactVersion,
         "; export the model again with this Ember version (or load it "
         "with the version that wrote it)");
  uint32_t count = get<uint32_t>(data + 12);
  if (count > kMaxSections) fail(where, " is corrupted: its header claims ", count, " sections");
  const size_t table_end = kHeaderBytes + kEntryBytes * count;
  if (size < table_end + 8) fail(where, " is truncated: the file ends inside its section table");
  if (avail < table_end + 8) return count;
  if (fnv1a(data, table_end) != get<uint64_t>(data + table_end))
    fail(where, " is corrupted: the checksum of its header does not match");
  for (uint32_t s = 0; s < count; ++s) {
    const char* entry = data + kHeaderBytes + kEntryBytes * s;
    uint64_t offset = get<uint64_t>(entry + 8), bytes = get<uint64_t>(entry + 16);
    if (offset > size || bytes > size - offset)
      fail(where, " is truncated: section '", std::string(entry, strnlen(entry, 8)),
           "' needs bytes up to ", offset + bytes, " but the file has ", size,
           " bytes; copy or export it again");
  }
  return count;
}

// Reads n bytes at `offset`; false on a short read.
bool read_at(std::ifstream& in, uint64_t offset, char* out, uint64_t n) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  return n == 0 || static_cast<bool>(in.read(out, static_cast<std::streamsize>(n)));
}

// `sha256` in lowercase, checked to be 64 hex digits; "" stays "".
std::string expected_digest(const std::string& sha256, const std::string& where) {
  std::string digest;
  for (char c : sha256) digest += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!digest.empty() &&
      (digest.size() != 64 || digest.find_first_not_of("0123456789abcdef") != std::string::npos))
    fail("the expected SHA-256 digest of ", where, " must be 64 hex digits, got '", sha256, "'");
  return digest;
}

// The sections of a checked header, each checked against its checksum.
std::vector<Section> sections_of(const char* data, uint64_t size, const std::string& where) {
  const uint32_t count = check_header(data, size, size, where);
  std::vector<Section> out;
  for (uint32_t s = 0; s < count; ++s) {
    const char* entry = data + kHeaderBytes + kEntryBytes * s;
    std::string kind(entry, strnlen(entry, 8));
    uint64_t offset = get<uint64_t>(entry + 8), bytes = get<uint64_t>(entry + 16);
    if (fnv1a(data + offset, bytes) != get<uint64_t>(entry + 24))
      fail(where, " is corrupted: the checksum of section '", kind,
           "' does not match; copy or export it again");
    out.push_back({std::move(kind), data + offset, bytes});
  }
  return out;
}

}  // namespace

File read(const std::string& path, const std::string& sha256, const std::string& where) {
  const std::string want_digest = expected_digest(sha256, where);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail("cannot open ", where, ": no such file");
  if (!S_ISREG(st.st_mode)) fail("cannot read ", where, ": it is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", where, ": it is not readable");
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  // The header and section table first: a file that is not an artifact, or whose table
  // is damaged, is refused before the rest of it is read (or memory is taken for it).
  char head[kHeaderBytes];
  const uint64_t head_bytes = std::min<uint64_t>(size, kHeaderBytes);
  if (!read_at(in, 0, head, head_bytes)) fail("cannot read ", where, ": read error");
  const uint32_t count = check_header(head, head_bytes, size, where);
  std::string table(kHeaderBytes + kEntryBytes * count + 8, '\0');
  if (!read_at(in, 0, table.data(), table.size())) fail("cannot read ", where, ": read error");
  check_header(table.data(), table.size(), size, where);

  // One 64-byte aligned buffer for the whole file: parameters view it in place. Everything
  // below checks this buffer, not what was read above (the file may have changed since).
  File file;
  file.size = size;
  file.buffer = NDArray::empty({static_cast<int64_t>(size)}, DType::Bool);
  const char* data = static_cast<const char*>(file.buffer.data());
  if (!read_at(in, 0, static_cast<char*>(file.buffer.data()), size))
    fail("cannot read ", where, ": read error (did the file change while it was read?)");
  if (!want_digest.empty()) {
    std::string digest = sha256_hex(data, size);
    if (digest != want_digest)
      fail(where, " has SHA-256 ", digest, ", not the expected ", want_digest,
           ": it is not the file you meant to load (or it was changed); refusing to load it");
  }
  file.sections = sections_of(data, size, where);
  return file;
}

}  // namespace ember::runtime::container
