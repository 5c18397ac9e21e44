#!/usr/bin/env bash
# Installs kiln from BUILD_DIR into a scratch prefix, builds examples/hello_kiln against it with
# find_package(kiln), and runs it. Usage: run_example.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
BUILD=$2
PREFIX="$BUILD/install-test"
rm -rf "$PREFIX" "$BUILD/example-build"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
cmake -S "$SRC/examples/hello_kiln" -B "$BUILD/example-build" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$BUILD/example-build" -j 2 >/dev/null
"$BUILD/example-build/hello_kiln"
