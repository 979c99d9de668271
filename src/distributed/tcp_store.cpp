// The TCPStore's client (tessera/distributed/tcp_store.h): one connection to the server, one query at
// a time on it; get() and wait() poll CHECK with a growing pause (1 ms to 50 ms) until the keys exist
// or the timeout passes.
#include "tessera/distributed/tcp_store.h"

#include <unistd.h>

#include <thread>

#include "distributed/tcp_socket.h"
#include "distributed/tcp_store_wire.h"
#include "tessera/distributed.h"

namespace tessera::distributed {
namespace detail {
std::shared_ptr<TCPStore::Server> start_tcp_store_server(int port, int* bound_port);  // tcp_store_server.cpp
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
using wire::Query;

// c10d's TCPStore client puts "/" before every key it sends (its keyPrefix_), so torch.distributed's
// set("k") is the key "/k" on the server. Ours does the same, so that either side reads what the other
// wrote; the server stores keys as they arrive, and errors name the keys as the caller gave them.
std::string on_wire(const std::string& key) { return "/" + key; }

std::string key_list(const std::vector<std::string>& keys) {
  std::string s = "[";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  return s + "]";
}

}  // namespace

TCPStore::TCPStore(std::string host, TCPStoreOptions options)
    : host_(std::move(host)), port_(options.port), timeout_(options.timeout) {
  TS_CHECK(timeout_.count() > 0, ValueError, "TCPStore: the timeout must be positive, got ", timeout_.count(), " ms");
  TS_CHECK(!host_.empty(), ValueError, "TCPStore: the host is empty");
  if (options.is_master) server_ = detail::start_tcp_store_server(port_, &port_);
  const std::string what = "TCPStore(" + host_ + ":" + std::to_string(port_) + ")";
  const auto deadline = Clock::now() + timeout_;
  fd_ = detail::tcp_connect(options.is_master ? "localhost" : host_, port_, deadline, what);
  try {
    // VALIDATE, then a CHECK of one key as the round trip that proves the server speaks the protocol
    // (PING would do, but servers before PyTorch 2.4 do not know it; every 2.x server knows CHECK; a
    // CHECK of no keys is not used, since the libuv server's trace line reads the first key).
    wire::Writer w;
    w.query(Query::Validate).value(wire::kValidationMagic).query(Query::Check).value(uint64_t{1}).str(on_wire("tessera/handshake"));
    detail::tcp_send_all(fd_, w.out.data(), w.out.size(), what);
    uint8_t ready = 0xff;
    detail::tcp_recv_all(fd_, &ready, 1, deadline, what + ": the handshake (VALIDATE, CHECK)");
    TS_CHECK(ready == static_cast<uint8_t>(wire::CheckReply::Ready) || ready == static_cast<uint8_t>(wire::CheckReply::NotReady),
             distributed::DistributedError, what, ": the server answered the handshake with ", static_cast<int>(ready),
             ": it does not speak the TCPStore protocol of PyTorch 2.x");
  } catch (...) {
    detail::tcp_close(fd_);
    throw;
  }
}

TCPStore::~TCPStore() {
  detail::tcp_close(fd_);
  server_.reset();  // after the connection: the server thread sees it close, then stops
}

namespace {

struct Conn {
  int fd;
  std::string what;
  Clock::time_point deadline;
  void send(const wire::Writer& w) const { detail::tcp_send_all(fd, w.out.data(), w.out.size(), what); }
  template <typename T>
  T recv() const {
    T v{};
    detail::tcp_recv_all(fd, &v, sizeof(v), deadline, what);
    return v;
  }
  std::vector<uint8_t> recv_bytes() const {
    const auto n = recv<uint64_t>();
    TS_CHECK(n <= wire::Reader::kMaxLen, distributed::DistributedError, what, ": the server sent a value of ", n, " bytes");
    std::vector<uint8_t> v(n);
    if (n) detail::tcp_recv_all(fd, v.data(), n, deadline, what);
    return v;
  }
};

}  // namespace

void TCPStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  Conn{fd_, "TCPStore.set('" + key + "')", Clock::now() + timeout_}.send(wire::Writer().query(Query::Set).str(on_wire(key)).vec(value));
}

void TCPStore::set(const std::string& key, const std::string& value) {
  set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Conn c{fd_, "TCPStore.check(" + key_list(keys) + ")", Clock::now() + timeout_};
  wire::Writer w;
  w.query(Query::Check).value(static_cast<uint64_t>(keys.size()));
  for (const auto& k : keys) w.str(on_wire(k));
  c.send(w);
  const auto r = c.recv<wire::CheckReply>();
  TS_CHECK(r == wire::CheckReply::Ready || r == wire::CheckReply::NotReady, distributed::DistributedError, c.what,
           ": the server answered ", static_cast<int>(r), ", expected READY (0) or NOT_READY (1)");
  return r == wire::CheckReply::Ready;
}

void TCPStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (!check(keys)) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    TS_CHECK(waited < timeout, distributed::DistributedTimeoutError, "TCPStore(", host_, ":", port_, "): the keys ", key_list(keys),
             " were not set within the timeout of ", timeout.count(), " ms");
    std::this_thread::sleep_for(std::min(pause, timeout - waited));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::vector<uint8_t> TCPStore::get(const std::string& key) {
  wait({key});
  std::lock_guard<std::mutex> lock(mutex_);
  const Conn c{fd_, "TCPStore.get('" + key + "')", Clock::now() + timeout_};
  c.send(wire::Writer().query(Query::Get).str(on_wire(key)));
  return c.recv_bytes();
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Conn c{fd_, "TCPStore.add('" + key + "')", Clock::now() + timeout_};
  c.send(wire::Writer().query(Query::Add).str(on_wire(key)).value(delta));
  return c.recv<int64_t>();
}

bool TCPStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Conn c{fd_, "TCPStore.delete_key('" + key + "')", Clock::now() + timeout_};
  c.send(wire::Writer().query(Query::DeleteKey).str(on_wire(key)));
  return c.recv<int64_t>() == 1;
}

int64_t TCPStore::num_keys() {
  std::lock_guard<std::mutex> lock(mutex_);
  const Conn c{fd_, "TCPStore.num_keys()", Clock::now() + timeout_};
  c.send(wire::Writer().query(Query::GetNumKeys));
  return c.recv<int64_t>();
}

}  // namespace tessera::distributed
