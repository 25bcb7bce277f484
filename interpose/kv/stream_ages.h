// When each stream ran its first kernel, against the KV deferrals: the capture loop's stream told from the engine's.
#pragma once

#include <cstdint>

#include "interpose/base/thread_hot.h"
#include "policy/commit_trigger.h"

namespace kvremap::interpose {

namespace stream_ages_detail {
void note_first_launch(std::uint64_t stream);
}  // namespace stream_ages_detail

// Before every kernel launch in defer mode, `stream` as capture_stream_key() names it: records the
// stream's first kernel. One comparison while the thread launches on the stream it launched on last.
inline void note_stream_launch(std::uint64_t stream) {
  if (t_hot.last_launch_stream == stream) return;
  t_hot.last_launch_stream = stream;
  stream_ages_detail::note_first_launch(stream);
}

// A device's KV deferral: a new epoch begins, returned; streams whose first kernel comes from now on are
// new since it.
std::uint64_t begin_stream_epoch();

// Whether `stream`'s first kernel came at or after `epoch`. A stream kvremap cannot place — its table is
// full, or the handle belonged to a stream the engine destroyed — counts as in use before: its kernels
// then commit once a capture ran, which is never wrong.
policy::StreamAge stream_age(std::uint64_t stream, std::uint64_t epoch);

// The engine destroys `stream`: a stream created later may get the same handle, and is never taken for new.
void note_stream_destroyed(std::uint64_t stream);

// pthread_atfork (interpose/process/fork.cpp): the table's lock is held across fork(), so a child never
// inherits it taken by a thread it does not have.
void stream_ages_prepare_fork();
void stream_ages_after_fork();

}  // namespace kvremap::interpose
