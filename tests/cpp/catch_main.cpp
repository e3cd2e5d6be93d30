// Catch2's main, in a translation unit of its own: it is by far the slowest file to compile.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
