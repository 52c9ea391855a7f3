/* The float16 conversions common/blend.h's host path calls, for the
 * simulated runtime's kernels (kernels_sim.c's gpu_mix): a program that
 * links libpinload.a gets the library's copies localized (hidden), so
 * libcudasim carries its own, pulled from the archive only where nothing
 * else defines them (the test programs link the library's objects, whose
 * copies then serve). The same code: the sim rounds as the library. */
#include "../../common/float16.c"
