// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

#include "base/raise.h"

namespace gradwire {

namespace {
std::shared_ptr<spdlog::logger> make_logger() {
  auto logger = std::make_shared<spdlog::logger>(
      "gradwire", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("[%H:%M:%S.%e] [gradwire] [%^%l%$] %v");
  logger->set_level(spdlog::level::warn);
  return logger;
}
}  // namespace

spdlog::logger& log() {
  // Leaked on purpose, like the flight recorder: threads that outlive
  // main() (a store server or watchdog left behind by a stuck communicator,
  // a store client failing as the peer exits) still log while static
  // destructors run; a destroyed logger there is a crash at exit.
  static spdlog::logger* logger = new spdlog::logger(*make_logger());
  return *logger;
}

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (parsed == spdlog::level::off && level != "off") {
    raise(ErrorCode::InvalidArgument,
          "log level '{}' is not one of trace, debug, info, warn, error, critical, off", level);
  }
  log().set_level(parsed);
}

void set_log_rank(int rank, int world) {
  log().set_pattern(fmt::format("[%H:%M:%S.%e] [gradwire rank {}/{}] [%^%l%$] %v", rank, world));
}

}  // namespace gradwire
