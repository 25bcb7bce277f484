// The process id, cached: getpid() is a system call and every trace event names the process.
#pragma once

namespace kvremap::interpose {

int process_id();
// In a forked child, before its first event.
void refresh_process_id();

}  // namespace kvremap::interpose
