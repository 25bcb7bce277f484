// An output file written whole or not at all: a temporary file beside the target, renamed over it on success.
#pragma once

#include <memory>
#include <ostream>
#include <string>

namespace kvremap::cli {

// Writes to `<dir>/.<name>.XXXXXX` (made exclusively, mode 0666 less the umask like any new file)
// and renames it over `path` in commit(): a write that fails part-way (a full disk, a file-size
// limit) leaves no partial file, and an existing target as it was. A target that exists and is not
// a regular file (/dev/stdout, a FIFO) cannot be replaced: it is written directly.
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();  // without a successful commit(): the temporary file is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // False when the file could not be made; error() says why.
  bool is_open() const { return fd_ >= 0; }
  std::ostream& stream() { return *stream_; }
  // Flushes, checks every write, closes and renames. False with error() set on any failure; the
  // temporary file is then gone and the target untouched.
  bool commit();
  // Gives up: the temporary file is removed, the target untouched.
  void discard();
  // The first error, as strerror text ("No space left on device").
  const std::string& error() const { return error_; }

 private:
  class Buffer;
  void fail(int error_number);

  std::string path_;
  std::string temporary_;  // empty: writing `path_` directly
  int fd_ = -1;
  std::string error_;
  std::unique_ptr<Buffer> buffer_;
  std::unique_ptr<std::ostream> stream_;
};

}  // namespace kvremap::cli
