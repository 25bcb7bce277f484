// Programs that own SIGTERM/SIGINT the ways servers do, run with and without kvremap: each case installs
// its disposition before its first CUDA call (when kvremap starts tracking) and prints what the kernel
// and libc showed it. The output must be the same with and without LD_PRELOAD=libkvremap.so.
// Usage: signal_client siginfo|restart|resethand|ignored|query
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

volatile sig_atomic_t g_signo = 0, g_from_self = 0, g_has_context = 0, g_calls = 0;
int g_pipe[2] = {-1, -1};

void start_cuda() {
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) std::printf("cudaMalloc failed\n");
}

// A handler with SA_SIGINFO, as Go's runtime, the JVM, glog and many C++ servers install.
void on_siginfo(int sig, siginfo_t* info, void* context) {
  g_signo = info != nullptr ? info->si_signo : -sig;
  g_from_self = info != nullptr && info->si_pid == getpid() && info->si_code == SI_USER;
  g_has_context = context != nullptr;
}

int siginfo_case() {
  struct sigaction action {};
  action.sa_sigaction = on_siginfo;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGTERM, &action, nullptr);
  start_cuda();
  kill(getpid(), SIGTERM);
  std::printf("siginfo signo=%d from_self=%d context=%d\n", static_cast<int>(g_signo), static_cast<int>(g_from_self),
              static_cast<int>(g_has_context));
  return 0;
}

void on_term_write_pipe(int) {
  g_calls = g_calls + 1;
  const char byte = 'x';
  (void)!write(g_pipe[1], &byte, 1);
}

// Whether thread `tid` of this process is inside read(2) now (x86-64 and arm64 numbers).
bool blocked_in_read(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  return f >> number && number == SYS_read;
}

// A blocking read with an SA_RESTART handler: the signal's handler runs and the read goes on (it
// returns the byte the handler wrote), never EINTR.
int restart_case() {
  if (pipe(g_pipe) != 0) return 2;
  struct sigaction action {};
  action.sa_handler = on_term_write_pipe;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  start_cuda();
  const pid_t main_tid = static_cast<pid_t>(syscall(SYS_gettid));
  std::thread sender([main_tid] {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    while (!blocked_in_read(main_tid)) usleep(1000);
    syscall(SYS_tgkill, getpid(), main_tid, SIGTERM);
  });
  char byte = 0;
  const ssize_t n = read(g_pipe[0], &byte, 1);
  const int error = n < 0 ? errno : 0;
  sender.join();
  std::printf("read returned %zd (%s) after %d handler call(s)\n", n, error ? strerrorname_np(error) : "ok",
              static_cast<int>(g_calls));
  return 0;
}

void on_int_once(int) { g_calls = g_calls + 1; }

// SA_RESETHAND: the first SIGINT runs the handler, the second one kills (a second Ctrl-C ends a
// program that is slow to stop).
int resethand_case() {
  struct sigaction action {};
  action.sa_handler = on_int_once;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  start_cuda();
  raise(SIGINT);
  std::printf("first SIGINT handled %d time(s)\n", static_cast<int>(g_calls));
  std::fflush(stdout);
  raise(SIGINT);
  std::printf("the second SIGINT did not end the process\n");
  return 0;
}

const char* describe(const struct sigaction& a) {
  if (a.sa_flags & SA_SIGINFO) return "a handler";
  if (a.sa_handler == SIG_DFL) return "SIG_DFL";
  if (a.sa_handler == SIG_IGN) return "SIG_IGN";
  return "a handler";
}

// An ignored SIGINT (a background `cmd &` of a non-interactive shell) stays ignored, and a child the
// program execs inherits that: a terminal's Ctrl-C does not reach it.
int ignored_case() {
  signal(SIGINT, SIG_IGN);
  start_cuda();
  struct sigaction now {};
  sigaction(SIGINT, nullptr, &now);
  std::printf("SIGINT is %s\n", describe(now));
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "kill -INT $$; echo child survived SIGINT", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("child %s\n", WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited");
  return 0;
}

void on_term_count(int) { g_calls = g_calls + 1; }

// What sigaction() and signal() report for a default disposition, and a handler installed after
// the first CUDA call runs in place of any of kvremap's.
int query_case() {
  start_cuda();
  struct sigaction term {}, interrupt {};
  sigaction(SIGTERM, nullptr, &term);
  sigaction(SIGINT, nullptr, &interrupt);
  std::printf("SIGTERM is %s (flags %#x), SIGINT is %s (flags %#x)\n", describe(term),
              static_cast<unsigned>(term.sa_flags), describe(interrupt), static_cast<unsigned>(interrupt.sa_flags));
  const sighandler_t previous = signal(SIGINT, on_term_count);
  std::printf("signal(SIGINT) replaced %s\n", previous == SIG_DFL ? "SIG_DFL" : "something else");
  struct sigaction action {};
  action.sa_handler = on_term_count;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  raise(SIGTERM);
  raise(SIGINT);
  std::printf("own handlers ran %d time(s)\n", static_cast<int>(g_calls));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "siginfo") return siginfo_case();
  if (mode == "restart") return restart_case();
  if (mode == "resethand") return resethand_case();
  if (mode == "ignored") return ignored_case();
  if (mode == "query") return query_case();
  std::fprintf(stderr, "usage: signal_client siginfo|restart|resethand|ignored|query\n");
  return 2;
}
