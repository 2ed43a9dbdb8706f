// platform/fd_poll_posix.cpp: platform_fd_readable (platform.h), on Linux and macOS alike.
//
// The drain thread asks it at every wake-up whether the control socket has a connection
// waiting (session/control_wake.h): one poll() with no timeout, no GIL, no descriptor made.
#if defined(__linux__) || defined(__APPLE__)

#include <poll.h>

#include <cerrno>

#include "platform.h"

namespace spprof {

bool platform_fd_readable(int fd) {
    if (fd < 0) return false;
    const int saved = errno;
    struct pollfd p = {fd, POLLIN, 0};
    int n;
    do {
        n = poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    errno = saved;
    return n == 1 && (p.revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0;
}

}  // namespace spprof

#endif
