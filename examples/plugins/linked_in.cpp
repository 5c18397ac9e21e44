// The same creators linked into a program (the kiln command line): listed for --staticPlugins, registered on request.
#include "example_plugins.h"

KILN_LINKED_IN_PLUGIN(kiln_examples::ScaleShiftCreator);
KILN_LINKED_IN_PLUGIN(kiln_examples::SelectAboveCreator);
