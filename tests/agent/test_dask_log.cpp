// agent/cluster/dask_log.hpp: distributed's log lines as Debian 12's python3-distributed writes them, fed
// in chunks that split lines anywhere.
#include "agent/cluster/dask_log.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ferry::agent {
namespace {

const std::string scheduler_log =
    "2026-11-26 02:00:00,001 - distributed.scheduler - INFO - -----------------------------------------------\n"
    "2026-11-26 02:00:00,120 - distributed.scheduler - INFO - State start\n"
    "2026-11-26 02:00:00,130 - distributed.scheduler - INFO -   Scheduler at:    tcp://10.200.0.2:40457\n"
    "2026-11-26 02:00:00,131 - distributed.scheduler - INFO -   dashboard at:            10.200.0.2:8787\n"
    "2026-11-26 02:00:01,000 - distributed.scheduler - INFO - Register worker <WorkerState 'tcp://10.200.0.3:1'>\n"
    "2026-11-26 02:00:02,000 - distributed.scheduler - INFO - Receive client connection: Client-aa11\n"
    "2026-11-26 02:00:02,500 - distributed.scheduler - INFO - Receive client connection: Client-bb22\n"
    "2026-11-26 02:00:03,000 - distributed.scheduler - INFO - Remove client Client-aa11\n"
    "2026-11-26 02:00:03,001 - distributed.scheduler - INFO - Close client connection: Client-aa11\n";

TEST(dask_log, a_scheduler_log_in_any_split_gives_its_addresses_and_clients) {
  for (std::size_t step = 1; step <= scheduler_log.size(); step += step < 8 ? 1 : 37) {
    SCOPED_TRACE(step);
    dask_log log;
    for (std::size_t at = 0; at < scheduler_log.size(); at += step) log.feed(std::string_view(scheduler_log).substr(at, step));
    ASSERT_TRUE(log.scheduler());
    EXPECT_EQ(log.scheduler()->host, "10.200.0.2");
    EXPECT_EQ(log.scheduler()->port, 40457);
    ASSERT_TRUE(log.dashboard());
    EXPECT_EQ(log.dashboard()->host, "10.200.0.2");
    EXPECT_EQ(log.dashboard()->port, 8787);
    EXPECT_EQ(log.clients(), 1u);
    EXPECT_FALSE(log.registered());
  }
}

TEST(dask_log, a_worker_registers_and_a_users_print_is_not_a_log_line) {
  dask_log log;
  log.feed("Scheduler at: tcp://1.2.3.4:5\nRegistered to: tcp://1.2.3.4:5\n");
  EXPECT_FALSE(log.scheduler());
  EXPECT_FALSE(log.registered());
  const auto before = log.changes();
  log.feed("2026-11-26 02:00:01,000 - distributed.worker - INFO -         Registered to:   tcp://10.200.0.2:40457\n");
  EXPECT_TRUE(log.registered());
  EXPECT_GT(log.changes(), before);
}

TEST(dask_log, addresses_parse_with_or_without_scheme_and_host) {
  auto a = parse_dask_address("tcp://10.0.0.1:8786");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "10.0.0.1");
  auto empty_host = parse_dask_address("   :8787");
  ASSERT_TRUE(empty_host);
  EXPECT_EQ(empty_host->host, "");
  EXPECT_EQ(empty_host->port, 8787);
  auto v6 = parse_dask_address("tcp://[fd00::1]:9000");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_FALSE(parse_dask_address("tcp://10.0.0.1"));
  EXPECT_FALSE(parse_dask_address("10.0.0.1:99999"));
  EXPECT_FALSE(parse_dask_address("10.0.0.1:80x"));
  EXPECT_FALSE(parse_dask_address("a b:80"));
}

TEST(dask_log, the_tail_keeps_the_last_lines_and_an_endless_line_stays_bounded) {
  dask_log log;
  for (int i = 0; i < 20; ++i) log.feed("line " + std::to_string(i) + "\n");
  const auto tail = log.tail();
  EXPECT_EQ(tail.find("line 11\n"), std::string::npos);
  EXPECT_NE(tail.find("line 12\nline 13\n"), std::string::npos);
  EXPECT_NE(tail.find("line 19\n"), std::string::npos);
  log.feed(std::string(1 << 20, 'x'));
  log.feed("\n");
  EXPECT_LE(log.tail().size(), 8u * 1001u);
}

}  // namespace
}  // namespace ferry::agent
