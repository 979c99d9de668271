// Blocking TCP sockets for the TCPStore (POSIX): listen, connect with retries until a deadline, and
// whole-buffer send and receive bounded by a deadline. Errors are DistributedError (or
// DistributedTimeoutError for a deadline) whose message starts with `what`.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace tessera::distributed::detail {

using Deadline = std::chrono::steady_clock::time_point;

// A socket listening on every address (IPv6 and IPv4 where the host has both) at `port` (0: any free
// port). *bound_port receives the port.
int tcp_listen(int port, int* bound_port, const std::string& what);
// Connects to host:port, retrying refused or unreachable attempts (the server may not be up yet)
// until `deadline`.
int tcp_connect(const std::string& host, int port, Deadline deadline, const std::string& what);
void tcp_send_all(int fd, const void* data, size_t n, const std::string& what);
// Receives exactly n bytes; DistributedTimeoutError past the deadline, DistributedError when the peer
// closed the connection.
void tcp_recv_all(int fd, void* data, size_t n, Deadline deadline, const std::string& what);
void tcp_close(int fd);

}  // namespace tessera::distributed::detail
