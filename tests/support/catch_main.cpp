// Wider than any test's name: Catch2 2.13's console reporter wraps a long name at the column after
// its first ": ", and where that leaves no room it loops forever printing the header of a failed
// test (assert-free in Release builds), filling the disk with the log.
#define CATCH_CONFIG_CONSOLE_WIDTH 240
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
