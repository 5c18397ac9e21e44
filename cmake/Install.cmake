# `cmake --install` puts the library, the public headers (include/kiln) and the CLI under the prefix, with a
# package config so that other projects use kiln through find_package(kiln) and target kiln::kiln
# (examples/hello_kiln does; the `install` test builds it against a fresh install), and plugin libraries through
# kiln::plugin_api (the plugin header alone; `kiln plugin new` writes such a project).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(KILN_EXPORT_TARGETS kiln kiln_onnx_proto kiln_plugin_api)
install(TARGETS ${KILN_EXPORT_TARGETS} EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kiln_cli kiln-conformance RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/kilnConfig.cmake ${CMAKE_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
