// The TCPStore's server (tessera/distributed/tcp_store.h): one thread that polls the listening socket,
// a wake-up pipe and every client connection, and answers the queries of c10d's protocol (Note
// [TCPStore wire format]) from one map of keys to bytes.
//
// A connection must open with VALIDATE and the magic number; anything else (another protocol, a port
// scanner, a query this server does not know) closes that connection only. A client's bytes are
// buffered until a whole query has arrived, so a query split across TCP segments is read whole. WAIT
// parks the connection until every key exists (answered when a write makes it so); CANCEL_WAIT
// unparks it. Replies are small and sent blocking.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>

#include "distributed/tcp_socket.h"
#include "distributed/tcp_store_wire.h"
#include "tessera/distributed.h"
#include "tessera/distributed/tcp_store.h"

namespace tessera::distributed {

using wire::Query;

class TCPStore::Server {
 public:
  explicit Server(int port) {
    listen_fd_ = detail::tcp_listen(port, &port_, "TCPStore");
    int p[2];
    TS_CHECK(::pipe2(p, O_CLOEXEC) == 0, distributed::DistributedError, "TCPStore: pipe() failed");
    wake_read_ = p[0];
    wake_write_ = p[1];
    thread_ = std::thread([this] { loop(); });
  }
  ~Server() {
    const char c = 0;
    (void)!::write(wake_write_, &c, 1);
    thread_.join();
    for (auto& [fd, _] : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_read_);
    ::close(wake_write_);
  }
  int port() const { return port_; }

 private:
  struct Client {
    std::vector<uint8_t> in;
    bool validated = false;
  };
  struct Waiter {
    int fd;
    std::vector<std::string> keys;
  };

  void loop() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      fds.push_back({wake_read_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [fd, _] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_[fd];
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (!read_from(fds[i].fd)) drop(fds[i].fd);
      }
    }
  }

  void drop(int fd) {
    ::close(fd);
    clients_.erase(fd);
    std::erase_if(waiters_, [fd](const Waiter& w) { return w.fd == fd; });
  }

  // False when the connection is to be closed.
  bool read_from(int fd) {
    uint8_t buf[16384];
    const ssize_t k = ::recv(fd, buf, sizeof(buf), 0);
    if (k <= 0) return false;
    Client& c = clients_[fd];
    c.in.insert(c.in.end(), buf, buf + k);
    size_t used = 0;
    for (;;) {
      wire::Reader r{c.in.data() + used, c.in.size() - used};
      const int got = handle(fd, c, r);
      if (got < 0) return false;
      if (got == 0) break;
      used += r.pos;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(used));
    return true;
  }

  bool reply(int fd, const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t k = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (k <= 0) return false;
      off += static_cast<size_t>(k);
    }
    return true;
  }

  bool has(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data_.count(k) != 0; });
  }

  // After a write: answers every parked WAIT whose keys all exist now.
  void wake_waiters() {
    std::vector<int> ready;
    std::erase_if(waiters_, [&](const Waiter& w) {
      if (!has(w.keys)) return false;
      ready.push_back(w.fd);
      return true;
    });
    for (int fd : ready) reply(fd, wire::Writer().value(wire::WaitReply::StopWaiting).out);
  }

  // One query from r: 1 when handled (r.pos past it), 0 when its bytes are not all here yet, -1 to
  // close the connection.
  int handle(int fd, Client& c, wire::Reader& r) {
    uint8_t q8 = 0;
    if (!r.value(&q8)) return 0;
    const auto q = static_cast<Query>(q8);
    if (!c.validated) {
      uint32_t magic = 0;
      if (q != Query::Validate) return -1;
      if (!r.value(&magic)) return 0;
      if (magic != wire::kValidationMagic) return -1;
      c.validated = true;
      return 1;
    }
    wire::Writer out;
    std::string key;
    std::vector<uint8_t> a, b;
    switch (q) {
      case Query::Validate: {
        uint32_t magic = 0;
        if (!r.value(&magic)) return 0;
        return magic == wire::kValidationMagic ? 1 : -1;
      }
      case Query::Ping: {
        uint32_t nonce = 0;
        if (!r.value(&nonce)) return 0;
        return reply(fd, out.value(nonce).out) ? 1 : -1;
      }
      case Query::Set:
        if (!r.str(&key) || !r.vec(&a)) return r.bad ? -1 : 0;
        data_[key] = std::move(a);
        wake_waiters();
        return 1;
      case Query::CompareSet: {
        if (!r.str(&key) || !r.vec(&a) || !r.vec(&b)) return r.bad ? -1 : 0;
        auto it = data_.find(key);
        if (it == data_.end()) {
          if (a.empty()) {
            data_[key] = b;
            wake_waiters();
            return reply(fd, out.vec(b).out) ? 1 : -1;
          }
          return reply(fd, out.vec(a).out) ? 1 : -1;
        }
        if (it->second == a) {
          it->second = b;
          wake_waiters();
          return reply(fd, out.vec(b).out) ? 1 : -1;
        }
        return reply(fd, out.vec(it->second).out) ? 1 : -1;
      }
      case Query::Get: {
        if (!r.str(&key)) return r.bad ? -1 : 0;
        auto it = data_.find(key);
        if (it == data_.end()) return -1;  // c10d's clients wait for a key before they get it
        return reply(fd, out.vec(it->second).out) ? 1 : -1;
      }
      case Query::Add: {
        int64_t delta = 0;
        if (!r.str(&key) || !r.value(&delta)) return r.bad ? -1 : 0;
        int64_t v = delta;
        if (auto it = data_.find(key); it != data_.end())
          v += std::strtoll(std::string(it->second.begin(), it->second.end()).c_str(), nullptr, 10);
        const std::string s = std::to_string(v);
        data_[key].assign(s.begin(), s.end());
        wake_waiters();
        return reply(fd, out.value(v).out) ? 1 : -1;
      }
      case Query::Check:
      case Query::Wait:
      case Query::MultiGet: {
        uint64_t n = 0;
        if (!r.value(&n)) return 0;
        if (n > wire::Reader::kMaxLen) return -1;
        std::vector<std::string> keys(n);
        for (auto& k : keys)
          if (!r.str(&k)) return r.bad ? -1 : 0;
        if (q == Query::Check)
          return reply(fd, out.value(has(keys) ? wire::CheckReply::Ready : wire::CheckReply::NotReady).out) ? 1 : -1;
        if (q == Query::Wait) {
          if (has(keys)) return reply(fd, out.value(wire::WaitReply::StopWaiting).out) ? 1 : -1;
          waiters_.push_back({fd, std::move(keys)});
          return 1;
        }
        for (const auto& k : keys) {
          auto it = data_.find(k);
          if (it == data_.end()) return -1;
          out.vec(it->second);
        }
        return reply(fd, out.out) ? 1 : -1;
      }
      case Query::CancelWait:
        std::erase_if(waiters_, [fd](const Waiter& w) { return w.fd == fd; });
        return reply(fd, out.value(wire::WaitReply::WaitCanceled).out) ? 1 : -1;
      case Query::GetNumKeys:
        return reply(fd, out.value(static_cast<int64_t>(data_.size())).out) ? 1 : -1;
      case Query::DeleteKey:
        if (!r.str(&key)) return r.bad ? -1 : 0;
        return reply(fd, out.value(static_cast<int64_t>(data_.erase(key))).out) ? 1 : -1;
      case Query::Append:
        if (!r.str(&key) || !r.vec(&a)) return r.bad ? -1 : 0;
        data_[key].insert(data_[key].end(), a.begin(), a.end());
        wake_waiters();
        return 1;
      case Query::MultiSet: {
        int64_t n = 0;
        if (!r.value(&n)) return 0;
        if (n < 0 || static_cast<uint64_t>(n) > wire::Reader::kMaxLen) return -1;
        std::vector<std::pair<std::string, std::vector<uint8_t>>> kv(static_cast<size_t>(n));
        for (auto& [k, v] : kv)
          if (!r.str(&k) || !r.vec(&v)) return r.bad ? -1 : 0;
        for (auto& [k, v] : kv) data_[k] = std::move(v);
        wake_waiters();
        return 1;
      }
    }
    return -1;  // a query this server does not know
  }

  int listen_fd_ = -1, port_ = 0, wake_read_ = -1, wake_write_ = -1;
  std::map<int, Client> clients_;
  std::vector<Waiter> waiters_;
  std::map<std::string, std::vector<uint8_t>> data_;
  std::thread thread_;
};

namespace detail {
std::shared_ptr<TCPStore::Server> start_tcp_store_server(int port, int* bound_port) {
  auto server = std::make_shared<TCPStore::Server>(port);
  *bound_port = server->port();
  return server;
}
}  // namespace detail

}  // namespace tessera::distributed
