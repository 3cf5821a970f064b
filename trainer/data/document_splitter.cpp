#include "trainer/data/document_splitter.h"

namespace kiln {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

void BlankLineSplitter::feed(std::string_view chunk, uint64_t offset) {
  for (size_t i = 0; i < chunk.size(); ++i) put(chunk[i], offset + i);
}

void BlankLineSplitter::end_file() {
  end_block();  // a '\r' still held is the last line's ending: dropped like "\n"
  held_.clear();
  line_has_text_ = false;
  held_cr_ = false;
}

void BlankLineSplitter::begin_text() {
  // What was held (a line ending, indentation) belongs to the document after all.
  if (!held_.empty()) sink_.text(held_, held_offset_);
  held_.clear();
  document_open_ = true;
}

void BlankLineSplitter::end_block() {
  if (document_open_) sink_.end_document();
  document_open_ = false;
}

void BlankLineSplitter::put(char c, uint64_t offset) {
  if (held_cr_) {  // a '\r' after text: part of a "\r\n" line ending, or just a byte
    held_cr_ = false;
    if (c == '\n') {
      held_ = "\r\n";
      held_offset_ = offset - 1;
      line_has_text_ = false;
      return;
    }
    sink_.text("\r", offset - 1);
  }
  if (c == '\n') {
    if (line_has_text_) {
      held_.assign(1, '\n');  // ends a line of text; kept only if more text follows
      held_offset_ = offset;
      line_has_text_ = false;
    } else {
      end_block();  // a blank line: the block is over
      held_.clear();
    }
    return;
  }
  if (!line_has_text_) {
    if (is_blank(c)) {
      if (held_.empty()) held_offset_ = offset;
      held_.push_back(c);
      return;
    }
    begin_text();
    line_has_text_ = true;
  }
  if (c == '\r') {
    held_cr_ = true;
    return;
  }
  sink_.text(std::string_view(&c, 1), offset);
}

void JsonlLineSplitter::feed(std::string_view chunk) {
  size_t start = 0;
  while (start < chunk.size()) {
    const size_t nl = chunk.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(chunk.substr(start));
      return;
    }
    if (partial_.empty()) {
      emit(chunk.substr(start, nl - start));
    } else {
      partial_.append(chunk.substr(start, nl - start));
      emit(partial_);
      partial_.clear();
    }
    ++line_offset_;  // the '\n'
    start = nl + 1;
  }
}

void JsonlLineSplitter::end_file() {
  if (!partial_.empty()) emit(partial_);  // a last line without a newline
  partial_.clear();
  line_ = 0;
  line_offset_ = 0;
}

void JsonlLineSplitter::emit(std::string_view line) {
  ++line_;
  const uint64_t offset = line_offset_;
  line_offset_ += line.size();
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t\r\f\v") == std::string_view::npos) return;
  on_line_(line, line_, offset);
}

}  // namespace kiln
