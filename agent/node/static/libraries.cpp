// The compiled parts of header-mostly libraries, for the static node program only: Debian ships no static
// Boost.JSON, and building it in here keeps the node program free of the workstation's shared libraries.
#include <boost/json/src.hpp>
