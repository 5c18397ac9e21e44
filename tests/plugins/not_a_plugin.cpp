// A shared library without kiln's entry point: the loader must say it is not a kiln plugin library.
extern "C" __attribute__((visibility("default"))) int not_a_kiln_plugin(void) { return 42; }
