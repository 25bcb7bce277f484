// Exit and signal handling: the summary at exit, SIGTERM/SIGINT, and the drain of hooks still running.
#pragma once

namespace kvremap::interpose::tracker_detail {

// Registers the atexit handler and the SIGTERM/SIGINT handlers; called once, when tracking starts.
void install_exit_handlers();

}  // namespace kvremap::interpose::tracker_detail
