# cmake -DKVREMAP=path/to/kvremap -DOUTPUT=kvremap.1 -DVERSION=x.y.z -P man_page.cmake: writes kvremap(1)
# from the tool's own help: `kvremap --help`, then each subcommand's `--help` in the order the top-level
# help lists them, then `kvremap help-env` (the environment). Help text goes in verbatim (no fill), so
# every line of `kvremap [SUBCOMMAND] --help` is a line of the page.

function(help_of out)
  execute_process(COMMAND ${KVREMAP} ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "man_page: '${KVREMAP} ${ARGN}' exited with ${status}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Text as roff shows it verbatim: a backslash is \e, and a line that starts with a dot or an apostrophe
# (a request to roff) starts with the zero-width \& instead.
function(roff_verbatim out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

help_of(top --help)
# The subcommands: the lines after "Subcommands:", each "  NAME  description".
string(REGEX REPLACE ".*\nSubcommands:\n" "" listing "${top}")
string(REGEX MATCHALL "(^|\n)  [a-z][a-z-]*" names "${listing}")
if(NOT names)
  message(FATAL_ERROR "man_page: no subcommands in '${KVREMAP} --help'")
endif()

roff_verbatim(page_top "${top}")
set(page ".TH KVREMAP 1 \"\" \"kvremap ${VERSION}\" \"User Commands\"\n")
string(APPEND page ".SH NAME\nkvremap \\- defer LLM KV-cache backing until start-up memory is measured\n")
string(APPEND page ".SH SYNOPSIS\n.B kvremap\n.RI [ OPTIONS ] \" \" [ SUBCOMMAND ]\n")
string(APPEND page ".SH DESCRIPTION\n${page_top}")
string(APPEND page ".SH COMMANDS\n")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  help_of(sub ${name} --help)
  roff_verbatim(text "${sub}")
  string(APPEND page ".SS kvremap ${name}\n${text}")
endforeach()
help_of(environment help-env)
roff_verbatim(text "${environment}")
string(APPEND page ".SH ENVIRONMENT\nThe library reads these variables (kvremap help-env):\n${text}")
string(APPEND page ".SH FILES\n.TP\n.I PREFIX/share/doc/kvremap/\nREADME, docs (architecture, KV deferral, configuration, trace format, tools)\n")
file(WRITE ${OUTPUT} "${page}")
