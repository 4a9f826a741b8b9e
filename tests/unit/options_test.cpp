// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "gradwire/error.h"
#include "gradwire/options.h"

namespace gradwire {
namespace {

// Sets a variable for one test and restores the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

void expect_invalid(const Options& o, const std::string& needle) {
  try {
    o.with_env_overrides().validate();
    ADD_FAILURE() << "expected InvalidArgument mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Options, DefaultsAreValid) {
  Options o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.timeout, std::chrono::seconds(300));
}

TEST(Options, EnvironmentOverrides) {
  ScopedEnv a("GRADWIRE_TIMEOUT_S", "2.5");
  ScopedEnv b("GRADWIRE_OFI_PROVIDER", "tcp;ofi_rxm");
  ScopedEnv c("GRADWIRE_SEGMENT_BYTES", "256K");
  ScopedEnv d("GRADWIRE_SMALL_MSG_BYTES", "1M");
  ScopedEnv e("GRADWIRE_OFI_REGISTER", "always");
  ScopedEnv f("GRADWIRE_LOG_LEVEL", "debug");
  ScopedEnv g("GRADWIRE_DEVICE_PATH", "staged");
  Options o = Options{}.with_env_overrides();
  EXPECT_EQ(o.device.path, Options::Device::Path::Staged);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(o.transport.provider, "tcp;ofi_rxm");
  EXPECT_EQ(o.collectives.segment_bytes, 256u * 1024);
  EXPECT_EQ(o.collectives.small_message_bytes, 1u << 20);
  EXPECT_EQ(o.transport.registration, Options::Transport::Registration::Always);
  EXPECT_EQ(o.diagnostics.log_level, "debug");
  EXPECT_NO_THROW(o.validate());
}

TEST(Options, MalformedValuesNameTheVariable) {
  {
    ScopedEnv a("GRADWIRE_TIMEOUT_S", "ten");
    expect_invalid({}, "GRADWIRE_TIMEOUT_S='ten'");
  }
  {
    ScopedEnv a("GRADWIRE_TIMEOUT_S", "-1");
    expect_invalid({}, "GRADWIRE_TIMEOUT_S");
  }
  {
    ScopedEnv a("GRADWIRE_SEGMENT_BYTES", "12Q");
    expect_invalid({}, "GRADWIRE_SEGMENT_BYTES");
  }
  {
    ScopedEnv a("GRADWIRE_SEGMENT_BYTES", "100");
    expect_invalid({}, "GRADWIRE_SEGMENT_BYTES");
  }
  {
    ScopedEnv a("GRADWIRE_OFI_REGISTER", "sometimes");
    expect_invalid({}, "GRADWIRE_OFI_REGISTER");
  }
  {
    ScopedEnv a("GRADWIRE_LOG_LEVEL", "loud");
    expect_invalid({}, "GRADWIRE_LOG_LEVEL");
  }
  {
    ScopedEnv a("GRADWIRE_DEVICE_PATH", "fast");
    expect_invalid({}, "GRADWIRE_DEVICE_PATH");
  }
  {
    ScopedEnv a("GRADWIRE_OFI_PROVIDER", "shm && rm -rf /");
    expect_invalid({}, "GRADWIRE_OFI_PROVIDER");
  }
  {
    ScopedEnv a("GRADWIRE_ASYMMETRIC_FENCES", "0");
    expect_invalid({}, "GRADWIRE_ASYMMETRIC_FENCES='0' must be 'auto' or 'off'");
  }
}

TEST(Options, NeverHangSilentlyVariables) {
  ScopedEnv a("GRADWIRE_FR_SIZE", "16");
  ScopedEnv b("GRADWIRE_FR_DIR", "/tmp/x");
  ScopedEnv c("GRADWIRE_DEBUG", "detail");
  ScopedEnv d("GRADWIRE_ASYNC_ERROR_HANDLING", "abort");
  Options o = Options{}.with_env_overrides();
  EXPECT_EQ(o.diagnostics.flight_recorder_size, 16u);
  EXPECT_EQ(o.diagnostics.flight_recorder_dir, "/tmp/x");
  EXPECT_TRUE(o.diagnostics.debug_detail);
  EXPECT_TRUE(o.diagnostics.abort_process_on_error);
  {
    ScopedEnv e("GRADWIRE_DEBUG", "verbose");
    expect_invalid({}, "GRADWIRE_DEBUG");
  }
  {
    ScopedEnv e("GRADWIRE_ASYNC_ERROR_HANDLING", "1");
    expect_invalid({}, "GRADWIRE_ASYNC_ERROR_HANDLING");
  }
  {
    ScopedEnv e("GRADWIRE_FR_SIZE", "-3");
    expect_invalid({}, "GRADWIRE_FR_SIZE");
  }
}

// Issue 17, item 5 (Note [strict environment values]): values that used to
// wrap around, fall back to the default or be read only by a feature not in
// use are refused when the options are read, naming the variable.
TEST(Options, ValuesAreParsedStrictlyWhetherOrNotTheFeatureIsUsed) {
  const std::pair<const char*, const char*> cases[] = {
      {"GRADWIRE_SMALL_MSG_BYTES", "17179869184G"},  // 2^64: used to wrap to 0
      {"GRADWIRE_SEGMENT_BYTES", "17179869185G"},    // used to wrap to 1 GiB
      {"GRADWIRE_SEGMENT_BYTES", "18446744073709551616"},
      {"GRADWIRE_SEGMENT_BYTES", "+64K"},
      {"GRADWIRE_TIMEOUT_S", "nan"},
      {"GRADWIRE_TIMEOUT_S", "inf"},
      {"GRADWIRE_TIMEOUT_S", "1e400"},
      {"GRADWIRE_TIMEOUT_S", "5s"},
      {"GRADWIRE_STALL_WARN_S", "abc"},  // read by the Reducer; no Reducer here
      {"GRADWIRE_STALL_SHUTDOWN_S", "-1"},
      {"GRADWIRE_STALL_WARN_S", "nan"},
  };
  for (auto [name, value] : cases) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    ScopedEnv a(name, value);
    expect_invalid({}, std::string(name) + "='" + value + "'");
  }
  const char* empty_refused[] = {"GRADWIRE_TIMEOUT_S", "GRADWIRE_SEGMENT_BYTES",
                                 "GRADWIRE_STALL_WARN_S", "GRADWIRE_DEBUG",
                                 "GRADWIRE_DEVICE_PATH"};
  for (const char* name : empty_refused) {
    SCOPED_TRACE(name);
    ScopedEnv a(name, "");
    expect_invalid({}, std::string("environment variable ") + name + " is set but empty");
  }
  {
    ScopedEnv a("GRADWIRE_STALL_WARN_S", "0");  // 0 turns the warning off
    ScopedEnv b("GRADWIRE_SEGMENT_BYTES", "4M");
    EXPECT_NO_THROW(Options{}.with_env_overrides().validate());
  }
}

TEST(Options, UnknownVariableIsAnErrorWithASuggestion) {
  ScopedEnv a("GRADWIRE_TIMEOUT", "5");
  expect_invalid({}, "did you mean GRADWIRE_TIMEOUT_S?");
}

TEST(Options, ExplicitFieldsAreValidated) {
  Options o;
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(o.validate(), Error);
  o = Options{};
  o.collectives.segment_bytes = 1;
  EXPECT_THROW(o.validate(), Error);
}

// Note [straggler detection]: the window is 0 (off) or at least three
// one-second rounds; the threshold a fraction.
TEST(Options, StragglerDetection) {
  {
    ScopedEnv a("GRADWIRE_STRAGGLER_WINDOW_S", "30");
    ScopedEnv b("GRADWIRE_STRAGGLER_THRESHOLD", "0.5");
    const Options o = Options{}.with_env_overrides();
    EXPECT_EQ(o.diagnostics.straggler_window, std::chrono::seconds(30));
    EXPECT_EQ(o.diagnostics.straggler_threshold, 0.5);
    EXPECT_NO_THROW(o.validate());
  }
  {
    ScopedEnv a("GRADWIRE_STRAGGLER_WINDOW_S", "0");
    EXPECT_NO_THROW(Options{}.with_env_overrides().validate());
  }
  for (const char* bad : {"2", "-1", "ten", ""}) {
    ScopedEnv a("GRADWIRE_STRAGGLER_WINDOW_S", bad);
    expect_invalid({}, "GRADWIRE_STRAGGLER_WINDOW_S");
  }
  for (const char* bad : {"0", "1.5", "-0.1", "nan", "0.25x", ""}) {
    ScopedEnv a("GRADWIRE_STRAGGLER_THRESHOLD", bad);
    expect_invalid({}, "GRADWIRE_STRAGGLER_THRESHOLD");
  }
  Options o;
  o.diagnostics.straggler_threshold = 0;
  expect_invalid(o, "straggler_threshold");
  o = Options{};
  o.diagnostics.straggler_window = std::chrono::milliseconds(500);
  expect_invalid(o, "straggler_window");
}

// Note [the spin budget]: auto (unset) by default; else whole
// microseconds in [0, 1 s]; every malformed value names the variable, the
// value and the range.
TEST(Options, SpinBudget) {
  EXPECT_FALSE(Options{}.collectives.spin_budget.has_value());
  EXPECT_FALSE(Options{}.with_env_overrides().collectives.spin_budget.has_value());
  const std::pair<const char*, long> good[] = {{"0", 0}, {"1", 1}, {"250", 250},
                                               {"1000000", 1000000}, {"007", 7}};
  for (const auto& [text, us] : good) {
    ScopedEnv a("GRADWIRE_SPIN_US", text);
    const Options o = Options{}.with_env_overrides();
    ASSERT_TRUE(o.collectives.spin_budget.has_value()) << text;
    EXPECT_EQ(o.collectives.spin_budget->count(), us) << text;
    EXPECT_NO_THROW(o.validate());
  }
  {
    // The variable overrides an explicit field, "auto" included.
    ScopedEnv a("GRADWIRE_SPIN_US", "auto");
    Options o;
    o.collectives.spin_budget = std::chrono::microseconds(5);
    EXPECT_FALSE(o.with_env_overrides().collectives.spin_budget.has_value());
  }
  for (const char* bad : {"-1", "1000001", "99999999999999999999", "ten", "10us", "1.5",
                          " 5", "5 ", "+5", "0x10", "AUTO", "auto "}) {
    ScopedEnv a("GRADWIRE_SPIN_US", bad);
    expect_invalid({}, std::string("GRADWIRE_SPIN_US='") + bad +
                           "' must be 'auto' or a whole number of microseconds in [0, 1000000]");
  }
  {
    ScopedEnv a("GRADWIRE_SPIN_US", "");
    expect_invalid({}, "GRADWIRE_SPIN_US is set but empty");
  }
  {
    ScopedEnv a("GRADWIRE_SPN_US", "0");
    expect_invalid({}, "did you mean GRADWIRE_SPIN_US?");
  }
  Options o;
  o.collectives.spin_budget = std::chrono::microseconds(-1);
  expect_invalid(o, "Options::collectives.spin_budget / GRADWIRE_SPIN_US = -1 us is out of range "
                    "[0, 1000000]");
  o.collectives.spin_budget = std::chrono::seconds(2);
  expect_invalid(o, "GRADWIRE_SPIN_US = 2000000 us is out of range [0, 1000000]");
  o.collectives.spin_budget = Options::Collectives::kMaxSpinBudget;
  EXPECT_NO_THROW(o.validate());
}

}  // namespace
}  // namespace gradwire
