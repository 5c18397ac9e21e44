# FlatBuffers engine schema: generates engine_generated.h from src/engine/engine.fbs into the build tree
# (owned by the engine-file work). Included from src/CMakeLists.txt before the stages are defined, so the
# kiln sources can `#include "engine_generated.h"`. The FlatBuffers runtime used here (builder, verifier) is
# header-only, so only its include directory is used (linking the static libflatbuffers.a, which is not
# position-independent, would break a shared Python module later).
find_package(FlatBuffers CONFIG REQUIRED)
find_program(KILN_FLATC flatc REQUIRED)

set(KILN_ENGINE_FBS ${PROJECT_SOURCE_DIR}/src/engine/engine.fbs)
set(KILN_ENGINE_GEN_DIR ${CMAKE_CURRENT_BINARY_DIR}/engine_schema)
add_custom_command(
  OUTPUT ${KILN_ENGINE_GEN_DIR}/engine_generated.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${KILN_ENGINE_GEN_DIR}
  COMMAND ${KILN_FLATC} --cpp --scoped-enums -o ${KILN_ENGINE_GEN_DIR} ${KILN_ENGINE_FBS}
  DEPENDS ${KILN_ENGINE_FBS}
  COMMENT "flatc: engine.fbs -> engine_generated.h"
  VERBATIM)
add_custom_target(kiln_engine_schema DEPENDS ${KILN_ENGINE_GEN_DIR}/engine_generated.h)
# The engine stage (src/CMakeLists.txt) compiles against the generated header and the FlatBuffers runtime.
