# Runs vllm_like (cmake -P; PROGRAM, ARGS space-separated, STATUS, EXPECT regex; SCENARIO + SIMCUDA_ENV=1 to model its device;
# DEVICE_COUNT=N for --ranks N).
foreach(var PROGRAM STATUS EXPECT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_scenario.cmake: -D${var}=... is required")
  endif()
endforeach()

# The scenario's device figures, as the program itself derives them: one source for the numbers.
if(SIMCUDA_ENV AND DEFINED SCENARIO)
  execute_process(COMMAND ${PROGRAM} --scenario ${SCENARIO} --print-simcuda-env
    RESULT_VARIABLE env_status OUTPUT_VARIABLE env_text ERROR_VARIABLE env_error)
  if(NOT env_status STREQUAL "0")
    message(FATAL_ERROR "${PROGRAM} --print-simcuda-env exited with '${env_status}': ${env_error}")
  endif()
  string(REPLACE "\n" ";" env_lines "${env_text}")
  foreach(line IN LISTS env_lines)
    if(line MATCHES "^(SIMCUDA_[A-Z_]+)=(.*)$")
      set(ENV{${CMAKE_MATCH_1}} "${CMAKE_MATCH_2}")
      message("${CMAKE_MATCH_1}=${CMAKE_MATCH_2}")
    endif()
  endforeach()
endif()

# The launcher's ranks each use their own device (rank r on device r).
if(SIMCUDA_ENV AND DEFINED DEVICE_COUNT)
  set(ENV{SIMCUDA_DEVICE_COUNT} "${DEVICE_COUNT}")
  message("SIMCUDA_DEVICE_COUNT=${DEVICE_COUNT}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/../run_and_expect.cmake)
