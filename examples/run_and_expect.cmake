# Runs PROGRAM with ARGS (cmake -P; ARGS space-separated) and passes only if it exits STATUS (default 0) and its output matches EXPECT.
foreach(var PROGRAM EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_and_expect.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT DEFINED STATUS)
  set(STATUS 0)
endif()

# Space-separated because add_test would split a ';'-list argument before it reaches this script.
separate_arguments(program_args UNIX_COMMAND "${ARGS}")
execute_process(
  COMMAND ${PROGRAM} ${program_args}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
message("${output}")
if(NOT status STREQUAL "${STATUS}")
  message(FATAL_ERROR "${PROGRAM} exited with '${status}', expected '${STATUS}'")
endif()
if(NOT output MATCHES "${EXPECT}")
  message(FATAL_ERROR "${PROGRAM}: output does not match '${EXPECT}'")
endif()
