/* The gpuos plugin ABI: the one C structure a plugin library hands to gpuos.
 *
 * A plugin is a shared library that exports one C symbol,
 *
 *   const GpuosPluginDescriptor* gpuos_plugin_descriptor(void);
 *
 * returning a pointer to a descriptor with static storage duration. The host
 * reads `abi_version` and `struct_size` (the first 8 bytes, identical in every
 * ABI version) before it trusts anything else in the structure; a plugin built
 * for another ABI version is refused with a message, never called.
 *
 * The descriptor names the plugin, its kind and a factory pair:
 *   create(config, &object, error, capacity) makes one object implementing the
 *     C++ interface of the kind (gpuos/plugins/<kind>.h), returned as a
 *     `void*` that points at that interface class (not at a derived class);
 *   destroy(object) deletes it. The host never `delete`s a plugin object.
 * Neither function lets an exception escape.
 *
 * Plugins written in C++ do not fill this structure by hand: they use
 * GPUOS_EXPORT_PLUGIN from gpuos/plugins/export.h. GPUOS_PLUGIN_ENTRY_POINT
 * below is the low-level form, for hand-written descriptors.
 *
 * This header is valid C and C++. docs/plugins.md describes the versioning
 * policy: GPUOS_PLUGIN_ABI_VERSION changes whenever this structure or any
 * interface in gpuos/plugins/ changes in a way an old plugin would misread. */
#ifndef GPUOS_PLUGIN_ABI_H_
#define GPUOS_PLUGIN_ABI_H_

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
#else
#include <stddef.h>
#include <stdint.h>
#endif

/* Version 1 is preliminary for the executor and frontend kinds: their
 * interfaces will grow when the runtime's task graph lands (docs/plugins.md). */
#define GPUOS_PLUGIN_ABI_VERSION 1u

/* Name of the exported entry point, as an identifier and as a string. */
#define GPUOS_PLUGIN_ENTRY_POINT_SYMBOL gpuos_plugin_descriptor
#define GPUOS_PLUGIN_ENTRY_POINT_NAME "gpuos_plugin_descriptor"

/* Values of GpuosPluginDescriptor::kind. 0 is never valid. Append only. */
#define GPUOS_PLUGIN_KIND_FRONTEND 1u
#define GPUOS_PLUGIN_KIND_FUSION_STRATEGY 2u
#define GPUOS_PLUGIN_KIND_EXECUTOR 3u
#define GPUOS_PLUGIN_KIND_SCHEDULER 4u
#define GPUOS_PLUGIN_KIND_MEMORY_MANAGER 5u

/* Results of GpuosPluginDescriptor::create. */
#define GPUOS_PLUGIN_CREATE_OK 0
#define GPUOS_PLUGIN_CREATE_INVALID_CONFIG 1 /* the config string is wrong */
#define GPUOS_PLUGIN_CREATE_UNAVAILABLE 2    /* a resource it needs is missing */
#define GPUOS_PLUGIN_CREATE_FAILED 3         /* anything else */

/* Size of the error buffer the host passes to create (bytes, with the NUL). */
#define GPUOS_PLUGIN_ERROR_CAPACITY 1024u

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuosPluginDescriptor {
  /* Must stay the first two fields in every ABI version. */
  uint32_t abi_version; /* GPUOS_PLUGIN_ABI_VERSION the plugin was built with */
  uint32_t struct_size; /* sizeof(GpuosPluginDescriptor) as the plugin saw it */

  uint32_t kind;           /* GPUOS_PLUGIN_KIND_* */
  uint32_t cxx_abi_tag;    /* GPUOS_PLUGIN_CXX_ABI_TAG of the plugin's compiler */
  const char* name;        /* unique among loaded plugins: [A-Za-z0-9_.-]{1,64} */
  const char* version;     /* the plugin's own version, free text, e.g. "1.2.0" */
  const char* description; /* one line, for listings; may be "" */

  /* Creates one object from `config` (NUL-terminated, docs/plugins.md
   * "Configuration"). On success stores the interface pointer in *object and
   * returns GPUOS_PLUGIN_CREATE_OK. On failure leaves *object NULL, writes a
   * NUL-terminated message of at most error_capacity bytes to `error` and
   * returns another GPUOS_PLUGIN_CREATE_* value. Thread-safe. */
  int32_t (*create)(const char* config, void** object, char* error, size_t error_capacity);
  /* Destroys an object returned by create. Accepts NULL. */
  void (*destroy)(void* object);
} GpuosPluginDescriptor;

typedef const GpuosPluginDescriptor* (*GpuosPluginEntryPoint)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Marks a symbol as exported from a library built with hidden visibility. */
#if defined(_WIN32)
#define GPUOS_PLUGIN_VISIBLE __declspec(dllexport)
#else
#define GPUOS_PLUGIN_VISIBLE __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define GPUOS_PLUGIN_EXTERN_C extern "C"
#else
#define GPUOS_PLUGIN_EXTERN_C
#endif

/* Opens the definition of the entry point; follow it with the body:
 *
 *   GPUOS_PLUGIN_ENTRY_POINT {
 *     static const GpuosPluginDescriptor descriptor = {...};
 *     return &descriptor;
 *   }
 */
#define GPUOS_PLUGIN_ENTRY_POINT                                          \
  GPUOS_PLUGIN_EXTERN_C GPUOS_PLUGIN_VISIBLE const GpuosPluginDescriptor* \
  GPUOS_PLUGIN_ENTRY_POINT_SYMBOL(void)

/* Plugin objects are C++ objects shared across the library boundary, so host
 * and plugin must agree on the C++ standard library and its layout options.
 * The tag records those that change std::string and container layouts:
 * bits 8-11 the library (1 libstdc++, 2 libc++), bit 4 libstdc++'s C++11 string
 * ABI, bit 0 a debug-mode library. The host refuses a plugin whose tag differs. */
#ifdef __cplusplus
#if defined(_LIBCPP_VERSION)
#define GPUOS_PLUGIN_CXX_LIBRARY_ 2u
#elif defined(__GLIBCXX__)
#define GPUOS_PLUGIN_CXX_LIBRARY_ 1u
#else
#define GPUOS_PLUGIN_CXX_LIBRARY_ 0u
#endif
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define GPUOS_PLUGIN_CXX11_STRINGS_ 1u
#else
#define GPUOS_PLUGIN_CXX11_STRINGS_ 0u
#endif
#if defined(_GLIBCXX_DEBUG) || (defined(_LIBCPP_DEBUG) && _LIBCPP_DEBUG > 0)
#define GPUOS_PLUGIN_CXX_DEBUG_ 1u
#else
#define GPUOS_PLUGIN_CXX_DEBUG_ 0u
#endif
#define GPUOS_PLUGIN_CXX_ABI_TAG \
  ((GPUOS_PLUGIN_CXX_LIBRARY_ << 8) | (GPUOS_PLUGIN_CXX11_STRINGS_ << 4) | GPUOS_PLUGIN_CXX_DEBUG_)
#endif /* __cplusplus */

#endif /* GPUOS_PLUGIN_ABI_H_ */
