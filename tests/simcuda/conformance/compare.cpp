// Runs one conformance client and compares its stdout with the expected results, line by line.
// Usage: conformance_compare CLIENT EXPECTED KNOWN_DIFFERENCES MODE [NAME=VALUE...]
// MODE names the run ("simulator" or "kvremap") for known-differences entries; NAME=VALUE pairs are
// added to the client's environment (LD_PRELOAD for the kvremap run). Exit 0 when every line matches.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Lines of a results file without comments (lines starting with '#') and blank lines.
bool read_lines(const std::string& path, std::vector<std::string>& lines) {
  std::ifstream in(path);
  if (!in) return false;
  std::string l;
  while (std::getline(in, l)) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.empty() || l[0] == '#') continue;
    lines.push_back(l);
  }
  return true;
}

struct Known {
  std::string client, mode, expected, got, reason;
  int line;
};

// known-differences: "CLIENT | MODE | EXPECTED LINE | LINE GOT INSTEAD | REASON", '#' comments.
bool read_known(const std::string& path, std::vector<Known>& out) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "conformance_compare: cannot read known differences %s\n", path.c_str());
    return false;
  }
  std::string l;
  int n = 0;
  while (std::getline(in, l)) {
    ++n;
    if (trim(l).empty() || trim(l)[0] == '#') continue;
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (;;) {
      const auto bar = l.find(" | ", start);
      fields.push_back(trim(l.substr(start, bar == std::string::npos ? std::string::npos : bar - start)));
      if (bar == std::string::npos) break;
      start = bar + 3;
    }
    if (fields.size() != 5 || fields[4].empty() ||
        (fields[1] != "simulator" && fields[1] != "kvremap" && fields[1] != "both")) {
      std::fprintf(stderr,
                   "conformance_compare: %s:%d: an entry needs five fields separated by \" | \": client, mode "
                   "(simulator, kvremap or both), expected line, line got instead, reason\n",
                   path.c_str(), n);
      return false;
    }
    out.push_back({fields[0], fields[1], fields[2], fields[3], fields[4], n});
  }
  return true;
}

// Runs the client with the extra environment and returns its stdout; status gets its wait status.
bool run_client(const std::string& client, const std::vector<std::string>& env, std::string& out, int& status) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    execl(client.c_str(), client.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "conformance_compare: cannot run %s: %s\n", client.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) out.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

// Prints a line diff (longest common subsequence) of expected and got; returns the number of differing lines.
int print_diff(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  int differences = 0;
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ++i, ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      std::printf("- expected line %zu (not got):  %s\n", i + 1, a[i].c_str());
      ++i, ++differences;
    } else {
      std::printf("+ got line %zu (not expected): %s\n", j + 1, b[j].c_str());
      ++j, ++differences;
    }
  }
  return differences;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: conformance_compare CLIENT EXPECTED KNOWN_DIFFERENCES MODE [NAME=VALUE...]\n");
    return 2;
  }
  const std::string client = argv[1], expected_path = argv[2], known_path = argv[3], mode = argv[4];
  const std::string name = basename_of(client);
  std::vector<std::string> env(argv + 5, argv + argc);

  std::vector<std::string> expected;
  if (!read_lines(expected_path, expected)) {
    std::fprintf(stderr, "conformance_compare: cannot read expected results %s\n", expected_path.c_str());
    return 2;
  }
  std::vector<Known> known;
  if (!read_known(known_path, known)) return 2;
  // A known difference replaces its expected line by the line the simulator (or kvremap) answers.
  for (const Known& k : known) {
    if (k.client != name || (k.mode != mode && k.mode != "both")) continue;
    bool found = false;
    for (std::string& e : expected) {
      if (e == k.expected) {
        e = k.got;
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr,
                   "conformance_compare: %s:%d names an expected line %s does not have: %s (remove or correct "
                   "the entry)\n",
                   known_path.c_str(), k.line, name.c_str(), k.expected.c_str());
      return 1;
    }
  }

  std::string out;
  int status = 0;
  if (!run_client(client, env, out, status)) {
    std::fprintf(stderr, "conformance_compare: cannot start %s: %s\n", client.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<std::string> got;
  std::size_t start = 0;
  while (start < out.size()) {
    const auto nl = out.find('\n', start);
    got.push_back(out.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }

  const int differences = print_diff(expected, got);
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok) {
    if (WIFSIGNALED(status)) {
      std::printf("%s (%s run) was killed by signal %d after %zu lines\n", name.c_str(), mode.c_str(),
                  WTERMSIG(status), got.size());
    } else {
      std::printf("%s (%s run) exited with status %d; a client exits 0 whatever the driver answers\n",
                  name.c_str(), mode.c_str(), WEXITSTATUS(status));
    }
  }
  if (differences != 0) {
    std::printf("%s (%s run): %d line(s) differ from %s; fix the simulator, or list the difference with its "
                "reason in %s\n",
                name.c_str(), mode.c_str(), differences, expected_path.c_str(), known_path.c_str());
  } else if (exited_ok) {
    std::printf("%s (%s run): all %zu lines match %s\n", name.c_str(), mode.c_str(), got.size(),
                expected_path.c_str());
  }
  return differences == 0 && exited_ok ? 0 : 1;
}
