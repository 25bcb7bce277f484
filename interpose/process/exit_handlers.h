// Exit and signal handling: the summary at exit, SIGTERM/SIGINT, and the drain of hooks still running.
#pragma once

namespace kvremap::interpose::tracker_detail {

// Registers the atexit handler, and a SIGTERM/SIGINT handler where the disposition is the default
// (only there would the signal end the process without a summary); called once, when tracking starts.
void install_exit_handlers();

}  // namespace kvremap::interpose::tracker_detail
