// The target that compiles cmake/precompiled.hpp once for every ferry target (see CMakeLists.txt).
