# cmake -DINPUT=F -DOUTPUT=F.gz -P gzip_file.cmake: compresses as Debian does (gzip -9n: best
# compression, no name or time stamp in the header, so the same input gives the same bytes).
execute_process(COMMAND gzip -9nc ${INPUT} OUTPUT_FILE ${OUTPUT} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "gzip ${INPUT}: ${status}")
endif()
