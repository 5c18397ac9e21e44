#!/usr/bin/env bash
# Installs kiln from BUILD_DIR into a scratch prefix, has the installed `kiln plugin new` write a plugin project,
# builds it against the install with find_package(kiln), and runs its tests (ctest; the CUDA-vs-CPU test counts
# as skipped where no GPU is found). Then loads the built plugin with the installed kiln command line, and builds
# examples/plugins against the install too.
# Usage: run_plugin_new.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
BUILD=$2
PREFIX="$BUILD/install-plugin-test"
WORK="$BUILD/plugin-new-test"
rm -rf "$PREFIX" "$WORK"
mkdir -p "$WORK"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
"$PREFIX/bin/kiln" plugin new HalveIt --domain com.acme --output "$WORK/halve_it"
# A second project in the same folder is refused with a sentence, not overwritten.
if "$PREFIX/bin/kiln" plugin new HalveIt --domain com.acme --output "$WORK/halve_it" 2>"$WORK/err.txt"; then
  echo "kiln plugin new overwrote an existing project" >&2
  exit 1
fi
grep -q "exists and is not an empty folder" "$WORK/err.txt"
cmake -S "$WORK/halve_it" -B "$WORK/halve_it/build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$WORK/halve_it/build" -j 2 >/dev/null
ctest --test-dir "$WORK/halve_it/build" --output-on-failure
# The installed CLI builds and runs the project's model with its library.
LIB="$WORK/halve_it/build/libhalve_it_plugin.so"
"$PREFIX/bin/kiln" build --onnx="$WORK/halve_it/build/halve_it.onnx" --dynamicPlugins="$LIB" --backend=cpu \
  --saveEngine="$WORK/halve_it.engine" >/dev/null
"$PREFIX/bin/kiln" run --loadEngine="$WORK/halve_it.engine" --dynamicPlugins="$LIB" >/dev/null
# examples/plugins builds the same way, standalone, and the installed CLI loads what it built.
cmake -S "$SRC/examples/plugins" -B "$WORK/examples-build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$WORK/examples-build" -j 2 >/dev/null
"$PREFIX/bin/kiln" plugin list --dynamicPlugins="$WORK/examples-build/libkiln_example_plugins.so" | grep -q "com.example.SelectAbove"
echo "kiln plugin new: the project builds against the install and its tests pass; so do examples/plugins"
