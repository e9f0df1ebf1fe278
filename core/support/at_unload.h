// Running code when this library is unloaded (dlclose) or the process exits.
//
// std::atexit from a shared library is tied to that library only when libc_nonshared's
// atexit is linked in; a sanitizer runtime linked first exports its own, which ties the
// function to the process: it then does not run at dlclose (a compiler process was left
// behind) and runs at exit in code already unmapped. __cxa_atexit with this library's
// __dso_handle, as the compiler registers a static's destructor, runs it at whichever
// comes first, before the functions registered earlier.
#pragma once

extern "C" int __cxa_atexit(void (*function)(void *), void *argument, void *dso_handle);
extern "C" __attribute__((visibility("hidden"))) void *__dso_handle;

namespace tinymlir {

inline void AtUnloadOrExit(void (*function)(void *)) {
  __cxa_atexit(function, nullptr, &__dso_handle);
}

}  // namespace tinymlir
