#include "io/shrunk_mapping.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace mpverify::io {

namespace {

// Written by the reading threads, read by the signal handler: only lock-free atomics and plain bytes the
// handler reads after the acquire load that publishes them.
struct Slot {
  std::atomic<std::uintptr_t> begin{0};  // 0: free
  std::size_t size = 0;
  char path[480] = {};
};
std::array<Slot, 256> slots;
std::atomic<bool> any_unnamed{false};  // a mapping that found no free slot

void say(const char* text) {
  const std::size_t n = std::strlen(text);
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::write(2, text + done, n - done);
    if (w <= 0) return;
    done += static_cast<std::size_t>(w);
  }
}

const Slot* slot_holding(std::uintptr_t address) {
  for (const Slot& s : slots) {
    const std::uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b != 0 && address >= b && address - b < s.size) return &s;
  }
  return nullptr;
}

// Async-signal-safe: write(2) and _exit(2) only.
void on_sigbus(int, siginfo_t* info, void*) {
  const Slot* s = slot_holding(reinterpret_cast<std::uintptr_t>(info->si_addr));
  if (s == nullptr && !any_unnamed.load()) {
    ::signal(SIGBUS, SIG_DFL);  // not a mapping of ours: the default action when the access is retried
    return;
  }
  say("mpverify: error: ");
  say(s ? s->path : "a memory-mapped input");
  say(": the file shrank while it was being read (another process truncated or rewrote it); what was read "
      "from it is void: read it again once it is complete\n");
  ::_exit(2);
}

}  // namespace

void exit_on_shrunk_mapping() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, nullptr);
}

void register_mapping(const void* begin, std::size_t size, const std::filesystem::path& file) {
  const auto address = reinterpret_cast<std::uintptr_t>(begin);
  for (Slot& s : slots) {
    std::uintptr_t expected = 0;
    // Claimed with a marker first, filled, then published: the handler never reads a half-written path.
    if (!s.begin.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    s.size = size;
    std::strncpy(s.path, file.c_str(), sizeof s.path - 1);
    s.path[sizeof s.path - 1] = '\0';
    s.begin.store(address, std::memory_order_release);
    return;
  }
  any_unnamed.store(true);
}

void unregister_mapping(const void* begin) {
  const auto address = reinterpret_cast<std::uintptr_t>(begin);
  for (Slot& s : slots) {
    std::uintptr_t expected = address;
    if (s.begin.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return;
  }
}

}  // namespace mpverify::io
