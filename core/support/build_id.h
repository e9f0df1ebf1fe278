// The identity of this build of the library: the GNU build ID of the shared object (or
// executable) this code is linked into, as hex. Any change to the code changes it, so
// compiled programs cached on disk by one build are never loaded by another, even when
// both carry the same version number. "" when the linker wrote no build ID.
#pragma once

#include <string>

namespace tinymlir {

const std::string &LibraryBuildId();

}  // namespace tinymlir
