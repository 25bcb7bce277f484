// Output files written to a temporary file and renamed over the target on success (tools/output_file.h).
#include "tools/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <streambuf>
#include <utility>

namespace kvremap::cli {

// A stream buffer over a file descriptor that keeps the first write error's errno, which
// std::ofstream does not report.
class OutputFile::Buffer : public std::streambuf {
 public:
  explicit Buffer(int fd) : fd_(fd) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    if (error_ != 0) return false;
    const char* at = pbase();
    while (at < pptr()) {
      const ssize_t n = ::write(fd_, at, static_cast<std::size_t>(pptr() - at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        return false;
      }
      at += n;
    }
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return true;
  }

  int fd_;
  int error_ = 0;
  std::array<char, 1 << 16> buffer_{};
};

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  struct stat existing {};
  if (::stat(path_.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC);
  } else {
    const auto slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
    const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    temporary_ = dir + "." + name + ".XXXXXX";
    fd_ = ::mkostemp(temporary_.data(), O_CLOEXEC);
    if (fd_ >= 0) {
      // mkstemp makes 0600; the output is an ordinary file, readable as the umask allows.
      const mode_t mask = ::umask(0);
      ::umask(mask);
      ::fchmod(fd_, 0666 & ~mask);
    } else {
      temporary_.clear();
    }
  }
  if (fd_ < 0) {
    error_ = std::strerror(errno);
    return;
  }
  buffer_ = std::make_unique<Buffer>(fd_);
  stream_ = std::make_unique<std::ostream>(buffer_.get());
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::fail(int error_number) {
  if (error_.empty()) error_ = std::strerror(error_number);
}

bool OutputFile::commit() {
  if (fd_ < 0) return false;
  stream_->flush();
  if (buffer_->error() != 0) fail(buffer_->error());
  if (!*stream_) fail(EIO);
  const int fd = std::exchange(fd_, -1);
  // A regular file is synced before the rename, so the target is never replaced by a file whose
  // data a crash could still lose; a device or FIFO has nothing to sync.
  if (error_.empty() && !temporary_.empty() && ::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) fail(errno);
  if (error_.empty() && !temporary_.empty() && ::rename(temporary_.c_str(), path_.c_str()) != 0) fail(errno);
  if (!error_.empty()) {
    if (!temporary_.empty()) ::unlink(temporary_.c_str());
    temporary_.clear();
    return false;
  }
  temporary_.clear();
  return true;
}

void OutputFile::discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

}  // namespace kvremap::cli
