// The text of one cold trace event while trace/'s event functions build it (internal to interpose/trace/).
#pragma once

#include <string>
#include <string_view>

namespace kvremap::interpose::trace_events_detail {

// The event's head, `{"ph":PH,"cat":CAT,"pid":…,"tid":…,"ts":NOW,"name":NAME`, in the calling
// thread's reused event string; the caller appends the rest and hands it to the writer before it
// starts another event.
std::string& event_head(std::string_view ph, std::string_view cat, std::string_view name);

}  // namespace kvremap::interpose::trace_events_detail
