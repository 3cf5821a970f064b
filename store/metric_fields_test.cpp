// The metric list against every consumer in the store: the table's columns, rows written and
// read back, the blocks' keys, JSON, CSV and the schema's generated migration.
#include "store/metric_fields.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "store/export.h"
#include "store/json_rows.h"
#include "store/metric_blocks.h"
#include "store/metric_queries.h"
#include "store/rows.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::StoreTest;

class MetricFieldsTest : public StoreTest {};

std::vector<std::string> list_names() {
  std::vector<std::string> names;
  for (const MetricField& f : kMetricFields) names.emplace_back(f.name);
  return names;
}

// A row whose every field holds a value of its own (k + 1.5 for reals, k + 1 for integers).
MetricRow distinct_row() {
  MetricRow row;
  double k = 0;
  for (const MetricField& f : kMetricFields) {
    set_metric_value(row, f, is_integer_metric(f) ? k + 1 : k + 1.5);
    ++k;
  }
  return row;
}

TEST_F(MetricFieldsTest, TheTableHasEveryFieldAsAColumnOfItsType) {
  auto db = open_store(path(), Access::ReadWrite);
  Statement st(*db, "SELECT name, type FROM pragma_table_info('metrics') WHERE name != 'run_id' ORDER BY cid");
  std::vector<std::string> columns;
  while (st.step()) {
    columns.push_back(st.text(0));
    const MetricField* field = find_metric_field(st.text(0));
    ASSERT_NE(field, nullptr) << st.text(0) << " is a column the list does not declare";
    EXPECT_EQ(st.text(1), is_integer_metric(*field) ? "INTEGER" : "REAL") << field->name;
  }
  const std::vector<std::string> names = list_names();
  EXPECT_EQ(std::set<std::string>(columns.begin(), columns.end()), std::set<std::string>(names.begin(), names.end()));
  EXPECT_EQ(columns.size(), std::size(kMetricFields));
}

TEST_F(MetricFieldsTest, ARowReadsBackFieldForField) {
  auto db = open_store(path(), Access::ReadWrite);
  db->exec("INSERT INTO runs (name, created_at) VALUES ('r', 1)");
  const MetricRow row = distinct_row();
  insert_metric(*db, 1, row);
  Statement st(*db, "SELECT " + metric_column_list() + " FROM metrics WHERE run_id = 1");
  ASSERT_TRUE(st.step());
  const MetricRow back = read_metric(st);
  for (const MetricField& f : kMetricFields)
    EXPECT_EQ(metric_value(back, f), metric_value(row, f)) << f.name;
}

TEST_F(MetricFieldsTest, JsonAndCsvCarryEveryFieldInTheListsOrder) {
  const MetricRow row = distinct_row();
  const nlohmann::json json = to_json(row);
  EXPECT_EQ(json.size(), std::size(kMetricFields));
  for (const MetricField& f : kMetricFields) {
    ASSERT_TRUE(json.contains(f.name)) << f.name;
    EXPECT_EQ(json[std::string(f.name)].get<double>(), metric_value(row, f)) << f.name;
    EXPECT_EQ(json[std::string(f.name)].is_number_integer(), is_integer_metric(f)) << f.name;
  }
  // The export's columns as users' scripts know them: the list's order is this order.
  EXPECT_EQ(metrics_csv_header(),
            "run,step,rank,time,tokens,loss,lr,grad_norm,tokens_per_s,tflops,mfu,mem_used,mem_peak,"
            "fwd_ms,bwd_ms,opt_ms,comm_ms,data_ms,loss_scale,skipped_steps,a2a_ms,trained_tokens,shard_ms,pipe_ms,"
            "mtp1_loss,mtp2_loss,mtp3_loss,mtp4_loss");
  std::string line;
  append_metrics_csv_line(line, "r", row);
  EXPECT_EQ(line,
            "r,1,2,3.5,4,5.5,6.5,7.5,8.5,9.5,10.5,11,12,13.5,14.5,15.5,16.5,17.5,18.5,19,20.5,21,22.5,23.5,24.5,25.5,"
            "26.5,27.5\n");
}

TEST_F(MetricFieldsTest, BlocksKeepTheirKeysInTheOrderOnDisk) {
  // A block on disk holds its aggregates in this order; the list's slots must give it.
  const std::vector<std::string_view> on_disk = {
      "loss",   "lr",     "grad_norm", "tokens_per_s", "tflops",   "mfu",        "fwd_ms",        "bwd_ms", "opt_ms",
      "comm_ms", "data_ms", "mem_used", "mem_peak",     "loss_scale", "skipped_steps", "tokens", "time",   "a2a_ms", "trained_tokens",
      "shard_ms", "pipe_ms", "mtp1_loss", "mtp2_loss", "mtp3_loss", "mtp4_loss"};
  const auto keys = metric_keys();
  EXPECT_EQ(std::vector<std::string_view>(keys.begin(), keys.end()), on_disk);
  // Every field but the row's key (step, rank) is rolled up, with the value the store reads.
  BlockUpdate update;
  const MetricRow row = distinct_row();
  update.add(std::span<const MetricRow>(&row, 1));
  auto db = open_store(path(), Access::ReadWrite);
  db->exec("INSERT INTO runs (name, created_at) VALUES ('r', 1)");
  insert_metric(*db, 1, row);
  update.write(*db, 1);
  Statement st(*db, "SELECT aggregates FROM metric_blocks WHERE run_id = 1");
  ASSERT_TRUE(st.step());
  const BlockAggregates block = decode_block(st.blob(0));
  for (const MetricField* f : block_fields())
    EXPECT_EQ(block[static_cast<size_t>(f->block_slot)].last, metric_value(row, *f)) << f->name;
  EXPECT_EQ(block_fields().size() + 2, std::size(kMetricFields));
}

TEST_F(MetricFieldsTest, AVersionsNewColumnsComeFromTheList) {
  // Version 5 ran these two statements before the list existed; the list gives the same.
  const std::string empty_aggregate =
      "UPDATE metric_blocks SET aggregates = aggregates || "
      "X'000000000000F87F000000000000F87F000000000000F87F00000000000000000000000000000000';\n";
  EXPECT_EQ(metric_columns_added_in(5), "ALTER TABLE metrics ADD COLUMN a2a_ms REAL;\n" + empty_aggregate);
  EXPECT_EQ(metric_columns_added_in(10), "ALTER TABLE metrics ADD COLUMN trained_tokens INTEGER;\n" + empty_aggregate);
  EXPECT_EQ(metric_columns_added_in(14), "ALTER TABLE metrics ADD COLUMN shard_ms REAL;\n" + empty_aggregate);
  EXPECT_EQ(metric_columns_added_in(15), "ALTER TABLE metrics ADD COLUMN pipe_ms REAL;\n" + empty_aggregate);
  std::string depths;
  for (int d = 1; d <= 4; ++d)
    depths += "ALTER TABLE metrics ADD COLUMN mtp" + std::to_string(d) + "_loss REAL;\n" + empty_aggregate;
  EXPECT_EQ(metric_columns_added_in(16), depths);
  // Version 17 made the spread's table: six columns for each per-rank field before it.
  const std::string spread = metric_columns_added_in(kSpreadSince);
  EXPECT_EQ(std::count(spread.begin(), spread.end(), '\n'), 6 * static_cast<int64_t>(spread_fields().size()));
  EXPECT_NE(spread.find("ALTER TABLE metric_spread ADD COLUMN fwd_ms_min REAL;\n"), std::string::npos);
  EXPECT_NE(spread.find("ALTER TABLE metric_spread ADD COLUMN pipe_ms_max_rank INTEGER;\n"), std::string::npos);
  EXPECT_EQ(spread.find("loss_"), std::string::npos);  // the same on every rank: no spread
  // Version 18 made the spread's blocks: the same columns, from the same list.
  std::string blocks = spread;
  for (size_t at = 0; (at = blocks.find("metric_spread", at)) != std::string::npos;) blocks.replace(at, 13, "spread_blocks");
  EXPECT_EQ(metric_columns_added_in(kSpreadBlocksSince), blocks);
  for (int version = 1; version <= schema_version(); ++version)
    if (version != 5 && version != 10 && version != 14 && version != 15 && version != 16 && version != kSpreadSince &&
        version != kSpreadBlocksSince) {
      EXPECT_EQ(metric_columns_added_in(version), "") << version;
    }
}

TEST_F(MetricFieldsTest, TheServedListNamesEachFieldAndItsViews) {
  const nlohmann::json served = metric_fields_json();
  ASSERT_EQ(served.size(), std::size(kMetricFields));
  for (size_t i = 0; i < served.size(); ++i) EXPECT_EQ(served[i]["name"], kMetricFields[i].name);
  const auto in = [&](const std::string& view) {
    std::vector<std::string> names;
    for (const auto& f : served)
      for (const auto& v : f["views"])
        if (v == view) names.push_back(f["name"]);
    return names;
  };
  EXPECT_EQ(in("run_chart"), (std::vector<std::string>{"loss", "lr", "grad_norm", "tokens_per_s", "mfu", "mem_used"}));
  EXPECT_EQ(in("time_split"), (std::vector<std::string>{"fwd_ms", "bwd_ms", "opt_ms", "comm_ms", "data_ms"}));
  EXPECT_EQ(in("time_within"), (std::vector<std::string>{"a2a_ms", "shard_ms", "pipe_ms"}));
  for (const MetricField& f : kMetricFields)
    if (f.views & (kInRunChart | kInCompareGrid)) {
      EXPECT_FALSE(f.title.empty()) << f.name << " is charted without a title";
    }
}

}  // namespace
}  // namespace kiln::store
