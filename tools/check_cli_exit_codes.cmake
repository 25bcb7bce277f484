# Runs `kvremap` on good, bad and no input and checks each exit code: 0 ok, 1 trace problem, 2 usage;
# `kvremap run` also: 126 command not executable, 127 command not found (else the command's own status,
# tested with real commands in tests/integration/test_run.cpp).
# Inputs made here (too large to keep as fixtures) go to WORK.
function(expect_exit expected)
  execute_process(COMMAND ${KVREMAP} ${ARGN} RESULT_VARIABLE actual OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT actual EQUAL expected)
    message(FATAL_ERROR "kvremap ${ARGN}: exit ${actual}, expected ${expected}\nstdout: ${out}\nstderr: ${err}")
  endif()
endfunction()

expect_exit(0 report ${DATA}/complete.json ${DATA}/killed_mid_line.json ${DATA}/killed_after_comma.json)
expect_exit(0 validate ${DATA}/complete.json ${DATA}/missing_close_bracket.json)
expect_exit(1 validate ${DATA}/schema_problems.json)
expect_exit(1 validate ${DATA}/garbage.json)
expect_exit(1 report ${DATA}/wrong_schema_version.json)
expect_exit(1 report ${DATA}/does-not-exist.json)
expect_exit(2 report)
expect_exit(2 validate --no-such-flag ${DATA}/complete.json)
expect_exit(2 no-such-subcommand)
# `kvremap run` cases that never start a program (a started one would need the sanitizer runtime preloaded).
expect_exit(2 run)
expect_exit(2 run --)
expect_exit(2 run --library ${WORK}/no-such-libkvremap.so -- true)
expect_exit(2 run --trace-dir ${DATA}/complete.json/traces -- true)
expect_exit(2 run --no-such-flag -- true)
expect_exit(127 run -- ${WORK}/no-such-command)
expect_exit(126 run -- ${DATA}/complete.json)

# A trace that cannot be read: exit 1, nothing on stdout, and exactly one line on stderr that names
# the file and matches `pattern` (no abort, no "ok, 0 events").
function(expect_read_failure command file pattern)
  execute_process(COMMAND ${KVREMAP} ${command} ${file} RESULT_VARIABLE actual OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "\n$" "" line "${err}")
  if(NOT actual EQUAL 1 OR NOT out STREQUAL "" OR line MATCHES "\n"
     OR NOT line MATCHES "^kvremap ${command}: [^\n]*${pattern}")
    message(FATAL_ERROR "kvremap ${command} ${file}: exit ${actual}, expected 1 and one line matching "
                        "'${pattern}' on stderr\nstdout: ${out}\nstderr: ${err}")
  endif()
endfunction()

file(MAKE_DIRECTORY ${WORK})
# A directory stands for the trace files in it; one without any is a usage error.
file(MAKE_DIRECTORY ${WORK}/no-traces)
foreach(command report validate)
  expect_exit(2 ${command} ${WORK}/no-traces)
endforeach()
string(REPEAT "[" 100000 open_arrays)
string(REPEAT "]" 100000 close_arrays)
string(REPEAT "{\"a\":" 100000 open_objects)
string(REPEAT "}" 100000 close_objects)
file(READ ${DATA}/complete.json complete_text)
string(REGEX MATCH ",[{]\"ph\":\"M\",\"cat\":\"kvremap\",\"name\":\"kvremap_trace\"[^\n]*" header_line
       "${complete_text}")
file(WRITE ${WORK}/deep_arrays.json "[\n${header_line}\n,${open_arrays}${close_arrays}\n]\n")
file(WRITE ${WORK}/deep_objects.json "[\n${header_line}\n,${open_objects}1${close_objects}\n")

foreach(command report validate)
  expect_read_failure(${command} ${DATA}/number_out_of_range.json
                      "number_out_of_range\\.json: line 6: not a JSON event: number overflow parsing '1e309'$")
  expect_read_failure(${command} ${WORK}/deep_arrays.json "deep_arrays\\.json: line 3: nested deeper than 64 levels")
  expect_read_failure(${command} ${WORK}/deep_objects.json "deep_objects\\.json: line 3: nested deeper than 64 levels")
  expect_read_failure(${command} ${DATA}/does-not-exist.json "does-not-exist\\.json: line 0: cannot open: No such file")
  expect_read_failure(${command} ${DATA}/complete.json/inside "complete\\.json/inside: line 0: cannot open: Not a directory")
  # A file that opens but cannot be read, for any account (root included): the reading process's
  # own /proc/self/mem fails at offset 0.
  expect_read_failure(${command} /proc/self/mem "/proc/self/mem: line 1: cannot read: Input/output error")
endforeach()

# plot, diff, merge and what-if: the same contract. A trace whose process was killed still reads
# (exit 0); another schema version, a missing file or a trace that cannot answer is 1; usage is 2.
expect_exit(0 plot ${DATA}/complete.json ${DATA}/killed_mid_line.json -o ${WORK}/plot.html)
expect_exit(0 report --json ${DATA}/complete.json ${DATA}/killed_after_comma.json)
expect_exit(0 diff ${DATA}/complete.json ${DATA}/killed_mid_line.json)
expect_exit(0 merge ${DATA}/complete.json ${DATA}/killed_mid_line.json -o ${WORK}/merged.json)
expect_exit(0 validate ${WORK}/merged.json)
expect_exit(1 plot ${DATA}/wrong_schema_version.json -o ${WORK}/plot.html)
expect_exit(1 report --json ${DATA}/wrong_schema_version.json)
expect_exit(1 diff ${DATA}/complete.json ${DATA}/wrong_schema_version.json)
expect_exit(1 merge ${DATA}/complete.json ${DATA}/garbage.json -o ${WORK}/merged.json)
expect_exit(1 what-if ${DATA}/complete.json --gpu-memory-utilization 0.9)
expect_exit(2 plot ${DATA}/complete.json)
expect_exit(2 plot ${DATA}/complete.json -o ${DATA}/complete.json/plot.html)
expect_exit(2 diff ${DATA}/complete.json)
expect_exit(2 merge ${DATA}/complete.json)
expect_exit(2 what-if ${DATA}/complete.json)
expect_exit(2 what-if ${DATA}/complete.json --gpu-memory-utilization 2)
expect_exit(2 what-if ${DATA}/complete.json --gpu-memory-utilization 0.9 --chunk lots)
foreach(command plot diff merge what-if)
  expect_exit(0 ${command} --help)
endforeach()
foreach(command "plot;-o;${WORK}/plot.html" "what-if;--gpu-memory-utilization;0.9" "merge;-o;${WORK}/merged.json")
  list(GET command 0 name)
  list(SUBLIST command 1 -1 options)
  execute_process(COMMAND ${KVREMAP} ${name} ${DATA}/wrong_schema_version.json ${options}
                  RESULT_VARIABLE actual OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT actual EQUAL 1 OR NOT err MATCHES "^kvremap ${name}: [^\n]*wrong_schema_version\\.json: line 2: unsupported schema_version 9[^\n]*\n$")
    message(FATAL_ERROR "kvremap ${name} on another schema version: exit ${actual}\nstdout: ${out}\nstderr: ${err}")
  endif()
endforeach()
