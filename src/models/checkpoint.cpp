// save_checkpoint / load_checkpoint (Note [Atomic checkpoint] in checkpoint.h).
#include "tessera/checkpoint.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/checkpoint_meta.h"
#include "tessera/safetensors.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  TS_CHECK(fd >= 0, IOError, "save_checkpoint: cannot open ", p.string(), " to sync it");
  int rc = ::fsync(fd);
  ::close(fd);
  TS_CHECK(rc == 0, IOError, "save_checkpoint: fsync of ", p.string(), " failed");
}

// Swaps two paths in one step (Linux renameat2 with RENAME_EXCHANGE); false where the kernel or the
// filesystem lacks it.
bool exchange_paths(const fs::path& a, const fs::path& b) {
#ifdef SYS_renameat2
  constexpr unsigned kRenameExchange = 2;  // RENAME_EXCHANGE of <linux/fs.h>
  return ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange) == 0;
#else
  (void)a;
  (void)b;
  return false;
#endif
}

// The previous checkpoint that a save without exchange_paths moved aside (`dir.old.<pid>`) and was
// killed before it renamed the new one into place; empty when there is none.
fs::path moved_aside(const fs::path& dir) {
  const std::string prefix = dir.filename().string() + ".old.";
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  std::error_code ec;
  fs::path best;
  fs::file_time_type newest{};
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    if (!e.is_directory() || e.path().filename().string().rfind(prefix, 0) != 0) continue;
    if (!fs::exists(e.path() / "checkpoint.json")) continue;
    const auto t = fs::last_write_time(e.path(), ec);
    if (best.empty() || t > newest) best = e.path(), newest = t;
  }
  return best;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  TS_CHECK(in.good(), IOError, "load_checkpoint: cannot read ", p.string(), " (is this a tessera checkpoint?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The checkpoint's files, written and fsynced into `tmp`.
void write_checkpoint_files(const fs::path& tmp, const nn::Module& model, const optim::Optimizer* optimizer,
                            const optim::LRScheduler* scheduler, int64_t step, const NamedGenerators& generators) {
  save_safetensors(model.state_dict(), (tmp / "model.safetensors").string(), {{"format", "pt"}});
  nlohmann::json meta = {{"format", "tessera-checkpoint"}, {"version", 1}, {"step", step}};
  if (optimizer) {
    optim::OptimizerStateDict sd = optimizer->state_dict();
    save_safetensors(sd.state, (tmp / "optimizer.safetensors").string(), {{"param_groups", sd.param_groups}});
    meta["optimizer"] = optimizer->name();
  }
  if (scheduler) meta["scheduler"] = scheduler->state_dict();
  Generator& gen = default_generator(kCPU);
  meta["generator"] = {{"seed", gen.seed()}, {"offset", gen.offset()}};
  for (const auto& [name, g] : generators) {
    TS_CHECK(g != nullptr, ValueError, "save_checkpoint: generator '", name, "' is null");
    meta["generators"][name] = {{"seed", g->seed()}, {"offset", g->offset()}};
  }
  {
    std::ofstream out(tmp / "checkpoint.json");
    out << meta.dump(1) << "\n";
    out.close();  // the buffered bytes reach the file here, and a full disk says so here
    TS_CHECK(!out.fail(), IOError, "save_checkpoint: cannot write ", (tmp / "checkpoint.json").string());
  }
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "checkpoint.json"})
    if (fs::exists(tmp / f)) fsync_path(tmp / f, false);
  fsync_path(tmp, true);
}

}  // namespace

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, int64_t step, const NamedGenerators& generators) {
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  TS_CHECK(fs::create_directories(tmp, ec) || fs::is_directory(tmp), IOError, "save_checkpoint: cannot create ",
           tmp.string(), ": ", ec.message());
  try {
    write_checkpoint_files(tmp, model, optimizer, scheduler, step, generators);
  } catch (...) {
    fs::remove_all(tmp, ec);  // a failed save leaves the previous checkpoint and nothing else
    throw;
  }
  const bool had_old = fs::exists(final_dir);
  if (had_old && exchange_paths(tmp, final_dir)) {
    fs::remove_all(tmp, ec);  // tmp now holds the previous checkpoint
  } else {
    const fs::path old = final_dir.string() + ".old." + std::to_string(::getpid());
    if (had_old) fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    if (had_old) fs::remove_all(old, ec);
  }
  fs::path parent = final_dir.has_parent_path() ? final_dir.parent_path() : fs::path(".");
  fsync_path(parent, true);
}

int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer,
                        optim::LRScheduler* scheduler, const NamedGenerators& generators) {
  fs::path d(dir);
  if (!fs::exists(d)) {
    // A save killed between moving the previous checkpoint aside and renaming the new one in (only
    // where the filesystem cannot exchange the two in one step): the previous one is the checkpoint.
    const fs::path aside = moved_aside(d);
    if (!aside.empty()) d = aside;
  }
  TS_CHECK(fs::is_directory(d), IOError, "load_checkpoint: ", dir, " is not a checkpoint directory");
  const detail::CheckpointMeta meta =
      detail::parse_checkpoint_meta(read_text(d / "checkpoint.json"), (d / "checkpoint.json").string());
  for (const auto& [name, g] : generators)
    TS_CHECK(meta.generators.count(name), IOError, "load_checkpoint: ", dir, " holds no state for generator '", name,
             "'");
  model.load_state_dict(load_safetensors((d / "model.safetensors").string()), true);
  if (optimizer) {
    TS_CHECK(meta.optimizer.has_value(), IOError, "load_checkpoint: ", dir, " holds no optimizer state");
    TS_CHECK(*meta.optimizer == optimizer->name(), ValueError, "load_checkpoint: the checkpoint's optimizer is ",
             *meta.optimizer, " but ", optimizer->name(), " was given");
    SafetensorsFile f((d / "optimizer.safetensors").string());
    optim::OptimizerStateDict sd;
    for (const std::string& k : f.keys()) sd.state[k] = f.get(k).clone();
    auto it = f.metadata().find("param_groups");
    TS_CHECK(it != f.metadata().end(), IOError, "load_checkpoint: ", (d / "optimizer.safetensors").string(),
             " lacks its param_groups metadata");
    sd.param_groups = it->second;
    optimizer->load_state_dict(sd);
  }
  if (scheduler) {
    TS_CHECK(meta.scheduler.has_value(), IOError, "load_checkpoint: ", dir, " holds no scheduler state");
    scheduler->load_state_dict(*meta.scheduler);
  }
  // The generators change only once everything else has loaded: a failed load leaves them alone.
  if (meta.generator) {
    Generator& gen = default_generator(kCPU);
    gen.manual_seed(meta.generator->seed);
    gen.set_offset(meta.generator->offset);
  }
  for (const auto& [name, g] : generators) {
    const detail::GeneratorState& st = meta.generators.at(name);
    g->manual_seed(st.seed);
    g->set_offset(st.offset);
  }
  return meta.step;
}

}  // namespace tessera
