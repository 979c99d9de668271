// distributed::TCPStore and the TCP rendezvous of torchrun's convention, in one process (no launcher):
// the store's queries between a master and clients, its server fed by hand-written wire bytes (split
// queries, WAIT and CANCEL_WAIT, MULTI_GET as PyTorch's clients send them, a peer that does not speak
// the protocol), every timeout's message, and the rendezvous among ranks played by threads, with rank
// 0 hosting the store or torchrun's agent hosting it, and with a rank that never comes.
// tests/distributed/tcp_store_interop.py checks the wire format against torch's own TCPStore.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "distributed/rendezvous.h"
#include "distributed/tcp_socket.h"
#include "distributed/tcp_store_wire.h"
#include "tessera/distributed.h"
#include "tessera/distributed/tcp_store.h"

namespace ts = tessera;
namespace dist = tessera::distributed;
namespace wire = tessera::distributed::wire;
using namespace std::chrono_literals;

namespace {

std::vector<uint8_t> bytes(std::initializer_list<int> v) { return {v.begin(), v.end()}; }

// A port nobody listens on now (bound, then released).
int free_port() {
  int port = 0;
  const int fd = dist::detail::tcp_listen(0, &port, "free_port");
  ::close(fd);
  return port;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A connection that speaks the wire format by hand, as another implementation's client would.
struct RawClient {
  int fd;
  explicit RawClient(int port) {
    fd = dist::detail::tcp_connect("127.0.0.1", port, std::chrono::steady_clock::now() + 5s, "raw");
  }
  ~RawClient() { ::close(fd); }
  void send(const wire::Writer& w) const { dist::detail::tcp_send_all(fd, w.out.data(), w.out.size(), "raw"); }
  template <typename T>
  T recv() const {
    T v{};
    dist::detail::tcp_recv_all(fd, &v, sizeof(v), std::chrono::steady_clock::now() + 5s, "raw");
    return v;
  }
  std::vector<uint8_t> recv_bytes() const {
    std::vector<uint8_t> v(recv<uint64_t>());
    if (!v.empty()) dist::detail::tcp_recv_all(fd, v.data(), v.size(), std::chrono::steady_clock::now() + 5s, "raw");
    return v;
  }
  bool closed_by_peer() const {
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }
};

TEST(TCPStore, SetGetAddCheckDeleteBetweenMasterAndClient) {
  dist::TCPStore master("127.0.0.1", {.port = 0, .is_master = true, .timeout = 5s});
  ASSERT_GT(master.port(), 0);
  dist::TCPStore client("127.0.0.1", {.port = master.port(), .timeout = 5s});
  const auto binary = bytes({0, 255, 0, 7, 128});
  master.set("bin", binary);
  client.set("empty", std::vector<uint8_t>{});
  EXPECT_EQ(client.get("bin"), binary);
  EXPECT_TRUE(master.get("empty").empty());
  EXPECT_EQ(master.add("n", 5), 5);
  EXPECT_EQ(client.add("n", -2), 3);
  EXPECT_EQ(client.add("n", 0), 3);
  const auto n = master.get("n");
  EXPECT_EQ(std::string(n.begin(), n.end()), "3");  // a decimal count, as PyTorch's
  EXPECT_TRUE(client.check({"bin", "empty", "n"}));
  EXPECT_FALSE(client.check({"bin", "absent"}));
  EXPECT_EQ(master.num_keys(), 3);
  EXPECT_TRUE(client.delete_key("bin"));
  EXPECT_FALSE(client.delete_key("bin"));
  EXPECT_EQ(client.num_keys(), 2);
  master.set("bin", std::string("over"));  // set again after delete, then overwrite
  client.set("bin", std::string("written"));
  const auto w = master.get("bin");
  EXPECT_EQ(std::string(w.begin(), w.end()), "written");
}

TEST(TCPStore, GetWaitsForAKeySetLater) {
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 5s});
  auto later = std::async(std::launch::async, [&] {
    dist::TCPStore c("127.0.0.1", {.port = master.port(), .timeout = 5s});
    std::this_thread::sleep_for(150ms);
    c.set("late", std::string("here"));
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto v = master.get("late");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_EQ(std::string(v.begin(), v.end()), "here");
  later.get();
}

TEST(TCPStore, TimeoutsNameTheKeysTheAddressAndTheTime) {
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 200ms});
  const std::string e = error_of([&] { master.get("never"); });
  EXPECT_NE(e.find("'never'"), std::string::npos) << e;
  EXPECT_NE(e.find("200 ms"), std::string::npos) << e;
  EXPECT_THROW(master.wait({"a", "b"}, 50ms), dist::DistributedTimeoutError);
  const std::string w = error_of([&] { master.wait({"a", "b"}, 50ms); });
  EXPECT_NE(w.find("['a', 'b']"), std::string::npos) << w;

  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string c = error_of([&] { dist::TCPStore("127.0.0.1", {.port = port, .timeout = 300ms}); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_NE(c.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos) << c;
  EXPECT_THROW(dist::TCPStore("127.0.0.1", {.port = port, .timeout = 100ms}), dist::DistributedTimeoutError);
}

TEST(TCPStore, BadArgumentsAndABusyPortAreClearErrors) {
  EXPECT_THROW(dist::TCPStore("127.0.0.1", {.port = 70000, .is_master = true}), ts::ValueError);
  EXPECT_THROW(dist::TCPStore("", {.port = 1}), ts::ValueError);
  EXPECT_THROW(dist::TCPStore("127.0.0.1", {.port = 1, .timeout = 0ms}), ts::ValueError);
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 2s});
  const std::string e = error_of([&] { dist::TCPStore("127.0.0.1", {.port = master.port(), .is_master = true}); });
  EXPECT_NE(e.find("cannot listen on port " + std::to_string(master.port())), std::string::npos) << e;
  EXPECT_NE(e.find("Address already in use"), std::string::npos) << e;
}

TEST(TCPStoreServer, AnswersQueriesSplitAcrossSegmentsAndPyTorchsWaitAndMultiGet) {
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 5s});
  RawClient raw(master.port());
  wire::Writer w;
  w.query(wire::Query::Validate).value(wire::kValidationMagic).query(wire::Query::Ping).value(uint32_t{77});
  w.query(wire::Query::Set).str("/k1").vec(bytes({1, 2, 3}));
  w.query(wire::Query::MultiSet).value(int64_t{2}).str("m1").vec(bytes({9})).str("m2").vec(bytes({}));
  w.query(wire::Query::Get).str("/k1");
  for (uint8_t b : w.out) {  // one byte per segment
    dist::detail::tcp_send_all(raw.fd, &b, 1, "raw");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(raw.recv<uint32_t>(), 77u);
  EXPECT_EQ(raw.recv_bytes(), bytes({1, 2, 3}));
  raw.send(wire::Writer().query(wire::Query::MultiGet).value(uint64_t{2}).str("m1").str("m2"));
  EXPECT_EQ(raw.recv_bytes(), bytes({9}));
  EXPECT_TRUE(raw.recv_bytes().empty());
  raw.send(wire::Writer().query(wire::Query::CompareSet).str("/k1").vec(bytes({1, 2, 3})).vec(bytes({4})));
  EXPECT_EQ(raw.recv_bytes(), bytes({4}));
  raw.send(wire::Writer().query(wire::Query::CompareSet).str("/k1").vec(bytes({1})).vec(bytes({5})));
  EXPECT_EQ(raw.recv_bytes(), bytes({4}));  // not swapped: the current value comes back
  raw.send(wire::Writer().query(wire::Query::Append).str("/k1").vec(bytes({6})));
  EXPECT_EQ(master.get("k1"), bytes({4, 6}));

  // WAIT parks until another client's write makes every key exist; CANCEL_WAIT unparks.
  raw.send(wire::Writer().query(wire::Query::Wait).value(uint64_t{2}).str("/k1").str("/w"));
  std::this_thread::sleep_for(50ms);
  master.set("w", std::string("x"));
  EXPECT_EQ(raw.recv<wire::WaitReply>(), wire::WaitReply::StopWaiting);
  raw.send(wire::Writer().query(wire::Query::Wait).value(uint64_t{1}).str("/never"));
  raw.send(wire::Writer().query(wire::Query::CancelWait));
  EXPECT_EQ(raw.recv<wire::WaitReply>(), wire::WaitReply::WaitCanceled);
  master.set("never", std::string("now"));  // no STOP_WAITING follows a cancel
  raw.send(wire::Writer().query(wire::Query::Ping).value(uint32_t{5}));
  EXPECT_EQ(raw.recv<uint32_t>(), 5u);
}

// c10d's client sends every key with "/" before it (torch.distributed's set("k") writes "/k"); ours
// must too, or neither side sees the other's keys (the failure first seen against PyTorch 2.11).
TEST(TCPStore, KeysTravelWithPyTorchsSlashPrefix) {
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 5s});
  master.set("rank0", std::string("id"));
  RawClient raw(master.port());
  raw.send(wire::Writer().query(wire::Query::Validate).value(wire::kValidationMagic).query(wire::Query::Get).str("/rank0"));
  EXPECT_EQ(raw.recv_bytes(), bytes({'i', 'd'}));
  raw.send(wire::Writer().query(wire::Query::Set).str("/from_torch").vec(bytes({7})));
  EXPECT_EQ(master.get("from_torch"), bytes({7}));
  raw.send(wire::Writer().query(wire::Query::Add).str("/n").value(int64_t{4}));
  EXPECT_EQ(raw.recv<int64_t>(), 4);
  EXPECT_EQ(master.add("n", 1), 5);
  raw.send(wire::Writer().query(wire::Query::Check).value(uint64_t{1}).str("rank0"));  // no slash: another key
  EXPECT_EQ(raw.recv<wire::CheckReply>(), wire::CheckReply::NotReady);
  EXPECT_TRUE(master.check({"rank0", "from_torch", "n"}));
  EXPECT_EQ(master.num_keys(), 3);  // the handshake's CHECK made no key
}

TEST(TCPStoreServer, DropsAPeerThatDoesNotSpeakTheProtocolAndServesTheOthers) {
  dist::TCPStore master("127.0.0.1", {.is_master = true, .timeout = 5s});
  {
    RawClient http(master.port());
    const char req[] = "GET / HTTP/1.0\r\n\r\n";
    dist::detail::tcp_send_all(http.fd, req, sizeof(req) - 1, "raw");
    EXPECT_TRUE(http.closed_by_peer());
  }
  {
    RawClient wrong_magic(master.port());
    wrong_magic.send(wire::Writer().query(wire::Query::Validate).value(uint32_t{0x12345678}));
    EXPECT_TRUE(wrong_magic.closed_by_peer());
  }
  {
    RawClient huge(master.port());  // a length of 2^40 bytes is refused, not allocated
    huge.send(wire::Writer().query(wire::Query::Validate).value(wire::kValidationMagic).query(wire::Query::Set)
                  .value(uint64_t{1} << 40));
    EXPECT_TRUE(huge.closed_by_peer());
  }
  master.set("still", std::string("serving"));
  dist::TCPStore client("127.0.0.1", {.port = master.port(), .timeout = 5s});
  EXPECT_EQ(client.get("still").size(), 7u);
}

TEST(TCPStore, AServerThatDoesNotSpeakTheProtocolIsAClearError) {
  int port = 0;
  const int fd = dist::detail::tcp_listen(0, &port, "test");
  std::thread http([fd] {
    const int c = ::accept(fd, nullptr, nullptr);
    char buf[64];
    (void)!::recv(c, buf, sizeof(buf), 0);
    const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
    (void)!::send(c, reply, sizeof(reply) - 1, MSG_NOSIGNAL);
    ::close(c);
  });
  const std::string e = error_of([&] { dist::TCPStore("127.0.0.1", {.port = port, .timeout = 2s}); });
  http.join();
  ::close(fd);
  EXPECT_NE(e.find("does not speak the TCPStore protocol"), std::string::npos) << e;
}

dist::LaunchEnv rank_env(int rank, int world, int port) {
  dist::LaunchEnv env;
  env.rank = rank;
  env.world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.launcher = "torchrun";
  return env;
}

std::vector<uint8_t> id_bytes() {
  std::vector<uint8_t> id(128);
  for (int i = 0; i < 128; ++i) id[i] = static_cast<uint8_t>(i * 37 + 11);
  return id;
}

TEST(TcpRendezvous, RankZeroHostsTheStoreAndEveryRankGetsItsValue) {
  const int port = free_port();
  std::vector<std::future<std::vector<uint8_t>>> ranks;
  for (int r = 3; r >= 0; --r)  // the others start first: they retry until rank 0 listens
    ranks.push_back(std::async(std::launch::async, [=] {
      if (r == 0) std::this_thread::sleep_for(100ms);
      return dist::detail::tcp_rendezvous_broadcast(rank_env(r, 4, port), "id", "test",
                                                    r == 0 ? id_bytes() : std::vector<uint8_t>(128), 10s);
    }));
  for (auto& f : ranks) EXPECT_EQ(f.get(), id_bytes());
}

TEST(TcpRendezvous, UnderTorchrunsAgentStoreEveryRankIsAClientAndRestartsDoNotMix) {
  dist::TCPStore agent("127.0.0.1", {.is_master = true, .timeout = 10s});
  // A previous attempt's value is left in the store; attempt 1 must not read it.
  agent.set("tessera/0/id", std::vector<uint8_t>(128, 0xEE));
  std::vector<std::future<std::vector<uint8_t>>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      dist::LaunchEnv env = rank_env(r, 2, agent.port());
      env.agent_store = true;
      env.restart_count = 1;
      return dist::detail::tcp_rendezvous_broadcast(env, "id", "test", r == 0 ? id_bytes() : std::vector<uint8_t>{},
                                                    10s);
    }));
  for (auto& f : ranks) EXPECT_EQ(f.get(), id_bytes());
  EXPECT_TRUE(agent.check({"tessera/1/arrived/0", "tessera/1/arrived/1"}));
}

TEST(TcpRendezvous, AMissingRankIsNamedByRankZeroWithinTheTimeout) {
  const int port = free_port();
  auto one = std::async(std::launch::async, [=] {
    return dist::detail::tcp_rendezvous_broadcast(rank_env(1, 3, port), "id", "test", {}, 5s);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] {
    dist::detail::tcp_rendezvous_broadcast(rank_env(0, 3, port), "id", "init_process_group('nccl'): the id",
                                           id_bytes(), 700ms);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(e.find("init_process_group('nccl'): the id"), std::string::npos) << e;
  EXPECT_NE(e.find("ranks 2 of 3 did not arrive"), std::string::npos) << e;
  EXPECT_NE(e.find("700 ms"), std::string::npos) << e;
  EXPECT_EQ(one.get(), id_bytes());  // rank 1 came, and got the value before rank 0 gave up
}

TEST(TcpRendezvous, WithoutRankZeroTheOthersSayWhereTheyLooked) {
  const int port = free_port();
  const std::string e = error_of([&] {
    dist::detail::tcp_rendezvous_broadcast(rank_env(1, 2, port), "id", "test", {}, 300ms);
  });
  EXPECT_NE(e.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
  dist::LaunchEnv no_addr = rank_env(1, 2, port);
  no_addr.master_addr.clear();
  const std::string m = error_of([&] { dist::detail::tcp_rendezvous_broadcast(no_addr, "id", "test", {}, 300ms); });
  EXPECT_NE(m.find("MASTER_ADDR is not set"), std::string::npos) << m;
}

TEST(LaunchEnv, ReadsTorchrunsAgentStoreAndRestartCount) {
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  const dist::LaunchEnv env = dist::read_launch_env();
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.master_addr, "10.1.2.3");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_TRUE(env.agent_store);
  EXPECT_EQ(env.restart_count, 3);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  EXPECT_FALSE(dist::read_launch_env().agent_store);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "x", 1);
  EXPECT_THROW(dist::read_launch_env(), ts::ValueError);
  for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE",
                        "TORCHELASTIC_RESTART_COUNT"})
    ::unsetenv(v);
}

}  // namespace
