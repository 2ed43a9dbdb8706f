// test_utf8_text.cpp: OS bytes (library paths, symbol names) become UTF-8 text that Python
// decodes strictly; valid text is left as it is.
#include <string>

#include "harness.h"
#include "utf8_text.h"

using spprof::utf8_text;

TEST(utf8_text_keeps_valid_text_byte_for_byte) {
    const std::string s = "/usr/lib/libm.so.6 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8d";
    CHECK(utf8_text(s) == s);
    CHECK(utf8_text("") == "");
}

TEST(utf8_text_writes_stray_bytes_as_backslash_x) {
    // A Latin-1 directory name, as a library path from /proc/self/maps may hold.
    CHECK(utf8_text("/tmp/lib\xff" "dir/libspin.so") == "/tmp/lib\\xffdir/libspin.so");
    CHECK(utf8_text("caf\xe9") == "caf\\xe9");
    CHECK(utf8_text("\x80") == "\\x80");  // a continuation byte alone
}

TEST(utf8_text_refuses_truncated_overlong_surrogate_and_too_large_sequences) {
    CHECK(utf8_text("\xe2\x82") == "\\xe2\\x82");          // truncated at the end
    CHECK(utf8_text("\xe2\x82x") == "\\xe2\\x82x");        // truncated by an ASCII byte
    CHECK(utf8_text("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
    CHECK(utf8_text("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");  // overlong, 3 bytes
    CHECK(utf8_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
    CHECK(utf8_text("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
    CHECK(utf8_text("\xf4\x8f\xbf\xbf") == "\xf4\x8f\xbf\xbf");  // U+10FFFF itself
}
