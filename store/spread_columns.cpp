#include "store/spread_columns.h"

namespace kiln::store {

std::string spread_column_list(SpreadFieldList fields) {
  std::string out;
  for (const MetricField* f : fields)
    for (const SpreadColumn& c : kSpreadColumns)
      out += (out.empty() ? "" : ", ") + std::string(f->name) + std::string(c.suffix);
  return out;
}

std::string spread_placeholders(SpreadFieldList fields) {
  std::string out;
  for (size_t i = 0; i < fields.size() * std::size(kSpreadColumns); ++i) out += ", ?";
  return out;
}

void bind_spreads(Statement& st, int first, std::span<const FieldSpread> spreads) {
  int c = first;
  for (const FieldSpread& f : spreads) {
    if (f.present()) {
      st.bind(c, f.min).bind(c + 1, f.max).bind(c + 2, f.sum).bind(c + 3, f.count);
      st.bind(c + 4, int64_t{f.min_rank}).bind(c + 5, int64_t{f.max_rank});
    } else {
      for (int k = c; k < c + kColumnsPerSpread; ++k) st.bind(k, std::nullopt);
    }
    c += kColumnsPerSpread;
  }
}

FieldSpread read_spread(const Statement& st, int first) {
  if (st.is_null(first + 3)) return FieldSpread{};
  return FieldSpread{st.real(first), st.real(first + 1), st.real(first + 2), st.int64(first + 3),
                     static_cast<int>(st.int64(first + 4)), static_cast<int>(st.int64(first + 5))};
}

std::vector<FieldSpread> read_spreads(const Statement& st, int first, size_t fields) {
  std::vector<FieldSpread> out;
  out.reserve(fields);
  for (size_t k = 0; k < fields; ++k) out.push_back(read_spread(st, first + static_cast<int>(k) * kColumnsPerSpread));
  return out;
}

}  // namespace kiln::store
