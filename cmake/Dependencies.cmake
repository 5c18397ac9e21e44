# Third-party libraries, all from Debian packages (scripts/setup installs them).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(yaml-cpp REQUIRED)  # build config files (kiln build --config)
find_package(CLI11 CONFIG REQUIRED)
# .npz archives (kiln calibrate's data): libzip.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
# kiln serve: HTTP (cpp-httplib; its pkg-config flags carry the TLS/zlib/brotli defines the library was built with)
# and gRPC (grpc++ and its protoc plugin).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
find_package(gRPC CONFIG REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/include REQUIRED)

# The ONNX schema: compiled here from the onnx.proto that libonnx-dev ships.
find_file(KILN_ONNX_PROTO onnx.proto PATHS /usr/include/onnx NO_DEFAULT_PATH REQUIRED)
