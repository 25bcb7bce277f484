# The trace-reading library's sources: one list for the main build (tools/trace) and the fuzz build (tests/fuzz).
set(KVREMAP_TRACE_SOURCES trace_reader.cpp hot_line.cpp kv_events.cpp trace_validate.cpp trace_replay.cpp)
list(TRANSFORM KVREMAP_TRACE_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
