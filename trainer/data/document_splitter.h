// Splitting input files into documents for `kiln data prepare`, fed a chunk at a time so
// a file of any size passes through in bounded memory:
//   - plain text, one document per file or per block of lines between blank lines;
//   - JSONL, one document per line (the caller parses the JSON).
// Each piece of text comes with the byte offset in its file where it starts, so a later
// error (text that is not UTF-8) can name the exact byte.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kiln {

// Receives one file's documents: text(piece, offset) any number of times, then
// end_document(). A document's pieces are contiguous bytes of the file.
class DocumentSink {
 public:
  virtual ~DocumentSink() = default;
  virtual void text(std::string_view piece, uint64_t offset) = 0;
  virtual void end_document() = 0;
};

// --document-boundary blank-line: a document is a block of lines; one or more blank
// lines (empty, or spaces, tabs and \r only) separate blocks. A document keeps its text
// exactly, except the line ending after its last line, which is dropped. Holds back only
// what might still turn out to be a boundary: the last line ending and the whitespace at
// the start of the current line. Ends only documents that have text.
class BlankLineSplitter {
 public:
  explicit BlankLineSplitter(DocumentSink& sink) : sink_(sink) {}

  // The next chunk of the file, which starts at byte `offset` of it.
  void feed(std::string_view chunk, uint64_t offset);
  // The end of the file ends its last document; held line endings are dropped.
  void end_file();

 private:
  void put(char c, uint64_t offset);
  void begin_text();
  void end_block();

  DocumentSink& sink_;
  std::string held_;          // line ending and indentation not yet known to be text
  uint64_t held_offset_ = 0;  // where held_ starts in the file
  bool line_has_text_ = false;
  bool held_cr_ = false;  // a '\r' after text, waiting to see whether '\n' follows
  bool document_open_ = false;
};

// JSONL: calls on_line(line, number, offset) for each line that is not blank, numbered
// from 1, without its line ending ("\n" or "\r\n"), with the byte offset in the file
// where it starts. A line is held whole until its end arrives.
class JsonlLineSplitter {
 public:
  using OnLine = std::function<void(std::string_view line, int64_t number, uint64_t offset)>;
  explicit JsonlLineSplitter(OnLine on_line) : on_line_(std::move(on_line)) {}

  // The next chunk of the file; chunks come in order from the file's start.
  void feed(std::string_view chunk);
  void end_file();

 private:
  void emit(std::string_view line);

  OnLine on_line_;
  std::string partial_;  // the start of a line whose end has not arrived
  int64_t line_ = 0;
  uint64_t line_offset_ = 0;  // where the next line starts in the file
};

}  // namespace kiln
