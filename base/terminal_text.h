// Text from users and models made safe to print on a terminal. A tag, a note or a sampled
// text may hold control characters (ESC starting a sequence that retitles the window, recolours
// the screen or moves the cursor, BEL, NUL, the C1 controls); written raw, the terminal obeys
// them. The store and JSON keep such text as it is: it is data. Only what is drawn on a
// terminal (the CLI's human-readable output, the terminal UI) passes through here.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// Each control character as a visible escape: \t, \n, \r as themselves written out, others
// as \xHH (C0 and DEL) or \u0080..\u009f (C1, which some terminals also obey). Everything
// else (printable ASCII, other UTF-8, even ill-formed bytes) is kept. For one line of output:
// a table cell, a field.
std::string terminal_line(std::string_view text);

// The same for text printed as a block of lines (a sample, a note shown whole): line breaks
// and tabs are kept as they are.
std::string terminal_block(std::string_view text);

}  // namespace kiln
