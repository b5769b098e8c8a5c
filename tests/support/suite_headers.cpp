// The object of the unit suites' precompiled header (suite_headers.h); CMake needs a source to compile it with.
