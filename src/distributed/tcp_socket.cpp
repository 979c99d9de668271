// Blocking TCP sockets for the TCPStore (tcp_socket.h).
#include "distributed/tcp_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "tessera/distributed.h"

namespace tessera::distributed::detail {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

}  // namespace

int tcp_listen(int port, int* bound_port, const std::string& what) {
  TS_CHECK(port >= 0 && port < 65536, ValueError, what, ": port ", port, " is not a TCP port (0 to 65535)");
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = fd >= 0;
  if (v6) {
    int off = 0;
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // dual stack: IPv4 clients too
  } else {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  TS_CHECK(fd >= 0, distributed::DistributedError, what, ": socket() failed: ", std::strerror(errno));
  int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(fd, 1024) != 0) {
    const int err = errno;
    ::close(fd);
    TS_THROW(distributed::DistributedError, what, ": cannot listen on port ", port, ": ", std::strerror(err),
             err == EADDRINUSE ? " (another process holds it: a store already running there, or another job)" : "");
  }
  sockaddr_storage got{};
  socklen_t len = sizeof(got);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  *bound_port = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

int tcp_connect(const std::string& host, int port, Deadline deadline, const std::string& what) {
  TS_CHECK(port > 0 && port < 65536, ValueError, what, ": port ", port, " is not a TCP port (1 to 65535)");
  std::string last = "no attempt";
  auto pause = std::chrono::milliseconds(10);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve the host: ") + ::gai_strerror(gai);
      // A name that does not resolve now will not later, except while DNS comes up: retry it too.
    } else {
      for (addrinfo* a = res; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(res);
          int on = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
          return fd;
        }
        last = std::strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  TS_THROW(distributed::DistributedTimeoutError, what, ": cannot connect to ", host, ":", port, " (", last,
           ") before the timeout; is the process that hosts the store running there?");
}

void tcp_send_all(int fd, const void* data, size_t n, const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    TS_CHECK(k > 0, distributed::DistributedError, what, ": send failed: ", std::strerror(errno), " (the store's server is gone?)");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void tcp_recv_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    TS_CHECK(r >= 0, distributed::DistributedError, what, ": poll failed: ", std::strerror(errno));
    TS_CHECK(r > 0, distributed::DistributedTimeoutError, what, ": no answer from the store's server before the timeout");
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    TS_CHECK(k != 0, distributed::DistributedError, what, ": the store's server closed the connection");
    TS_CHECK(k > 0, distributed::DistributedError, what, ": recv failed: ", std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void tcp_close(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace tessera::distributed::detail
