# Installs the build into a scratch prefix, configures and builds the
# consumer project against it, and runs it; then installs the formats
# component alone into a second prefix and builds the formats-only program
# against that, so mpverify::formats is shown to need nothing else.
file(REMOVE_RECURSE ${WORK_DIR})
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
function(expect_output expected)
  if(NOT step_output MATCHES "${expected}")
    message(FATAL_ERROR "consumer printed '${step_output}', expected '${expected}'")
  endif()
  message(STATUS "consumer: ${step_output}")
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
     -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${WORK_DIR}/build/consumer)
expect_output("^0x3555 1 ")
step(${WORK_DIR}/build/formats_consumer)
expect_output("^0x3eab 1\n")

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/formats-prefix --component formats)
if(EXISTS ${WORK_DIR}/formats-prefix/include/mpverify/emu OR EXISTS ${WORK_DIR}/formats-prefix/bin)
  message(FATAL_ERROR "the formats component installed more than the formats")
endif()
step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/formats-build -DCMAKE_PREFIX_PATH=${WORK_DIR}/formats-prefix
     -DCMAKE_BUILD_TYPE=Release -DMPVERIFY_FORMATS_ONLY=ON)
step(${CMAKE_COMMAND} --build ${WORK_DIR}/formats-build)
step(${WORK_DIR}/formats-build/formats_consumer)
expect_output("^0x3eab 1\n")
