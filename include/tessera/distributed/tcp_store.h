// distributed::TCPStore: a key-value store over TCP, as torch.distributed.TCPStore, modelled on its wire
// format so that a tessera process can meet PyTorch's processes and torchrun's agent:
//
//   ts::distributed::TCPStore store("10.0.0.1", {.port = 29500, .is_master = rank == 0});
//   if (rank == 0) store.set("id", bytes);
//   std::vector<uint8_t> id = store.get("id");   // waits until some process sets it
//
// One process hosts the store (is_master: a server thread listening on `port`, 0 for any free one;
// port() says which); every TCPStore, the master's too, is a client of it over one connection. The
// values are bytes; add() keeps a decimal count in a value, as PyTorch's does. get() and wait() block
// until the keys exist or the store's timeout passes, then raise DistributedTimeoutError naming the
// keys, the address and the timeout. A client that cannot reach the server retries until the timeout
// (the master may start after its clients), then raises the same.
//
// Note [TCPStore wire format]: c10d's protocol, in the host's byte order (little-endian on every
// machine we run): a client opens with VALIDATE (query byte 0, then the uint32 0x3C85F7CE), then each
// query is one byte followed by its arguments, a string or a byte vector being a uint64 length and its
// bytes. The client puts "/" before every key, as c10d's TCPStore does (its keyPrefix_: torch's
// set("k") stores "/k"); the server keeps keys as they arrive. Our client's first query, a CHECK of
// one key, proves the server speaks the protocol; PING (byte 13) would too, but only servers of
// PyTorch 2.4 and later know it. PyTorch 1.x spoke an older protocol (no VALIDATE, so SET was byte
// 0): neither side talks to it. The server here answers every query of PyTorch 2.x's client (SET,
// COMPARE_SET, GET, ADD, CHECK, WAIT and CANCEL_WAIT, GETNUMKEYS, DELETE_KEY, APPEND, MULTI_GET,
// MULTI_SET, PING); the client sends SET, GET, ADD, CHECK, DELETE_KEY and GETNUMKEYS, and waits by
// polling CHECK (so no WAIT is left pending on a server when it gives up).
// tests/distributed/tcp_store_interop.py runs both directions against torch's own TCPStore (both of
// its servers) and real torchrun, where a torch 2.x is importable. The first check against PyTorch
// 2.11 failed because keys went without the "/" (each side waited for a key the other had written
// under another name); fixed since.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::distributed {

struct TCPStoreOptions {
  int port = 0;             // the master's listening port (0: any free port); a client's server port
  bool is_master = false;   // host the server in this process
  std::chrono::milliseconds timeout = std::chrono::minutes(5);  // connect, get, wait
};

class TCPStore {
 public:
  TCPStore(std::string host, TCPStoreOptions options = {});
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::vector<uint8_t>& value);
  void set(const std::string& key, const std::string& value);
  std::vector<uint8_t> get(const std::string& key);         // waits for the key
  int64_t add(const std::string& key, int64_t delta);       // the count after adding
  bool check(const std::vector<std::string>& keys);         // all exist now
  void wait(const std::vector<std::string>& keys);          // the store's timeout
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool delete_key(const std::string& key);                  // whether it existed
  int64_t num_keys();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  class Server;  // src/distributed/tcp_store_server.cpp

 private:
  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Server> server_;  // the master's (shared_ptr: its deleter lives with its definition)
  int fd_ = -1;
  std::mutex mutex_;  // one query at a time on the connection
};

}  // namespace tessera::distributed
