// getSupportedOps (kiln/ops.h): the op table, read from the OpDefs.
#include <algorithm>

#include "kiln/ops.h"
#include "ops/op_def.h"

namespace kiln {

std::vector<OpInfo> getSupportedOps() {
  std::vector<OpInfo> r;
  for (const OpDef* d : BuiltinOps().All())
    if (d->domain != kKilnDomain) r.push_back({d->domain, d->name, d->since_version, d->until_version, false});
  for (const OpDef& d : ExternalOps()) r.push_back({d.domain, d.name, d.since_version, d.until_version, true});
  std::sort(r.begin(), r.end(), [](const OpInfo& a, const OpInfo& b) {
    return std::tie(a.domain, a.name, a.since_version) < std::tie(b.domain, b.name, b.since_version);
  });
  return r;
}

}  // namespace kiln
